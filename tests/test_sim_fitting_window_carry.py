"""FittingWindow (engine/sim/policies/base.py): clear_tool_uses' window of its edited conversation moved
from the last turn's start, not read again from the newest message back every turn.

Past the point where its window fills, clear_tool_uses keeps thousands of short cleared rounds in the
window, and last_fitting_window read all of them every turn (a 3,000-turn what-if: ~1.6 s CPU, the
column's share growing with the square of the session). Differential: whatever the edits, appends and
budgets, the moved window is last_fitting_window's."""

from __future__ import annotations

from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.grown import Grown
from engine.sim.policies import TurnView
from engine.sim.policies.base import FittingWindow, HistoryBlocks, last_fitting_window, message_block
from engine.sim.policies.clear_tool_uses import ClearToolUses
from engine.tokens import CharTokenizer, TokenCounter
from tests.support.conversation_ops import tool_rounds
from tests.support.counting import CountingMeasure

M = Measure(TokenCounter(CharTokenizer()))
Role = Literal["user", "assistant"]
SYSTEM = (Block("identity", "system", "s" * 64, 100, True),)


def test_clear_tool_uses_moves_its_window_instead_of_reading_every_round_it_keeps() -> None:
    """600 turns whose window keeps ~300 short cleared rounds once it fills: a turn weighs its new and
    newly cleared messages and the few its window's start moves past, where reading the window back
    weighed every message in it every turn (old code: 161,780 items weighed; now 4,592)."""
    m = CountingMeasure(TokenCounter(CharTokenizer()))
    history = HistoryBlocks()
    p = ClearToolUses(trigger=2_000)
    turns = 600
    CountingMeasure.weighed = 0
    for k, msgs in enumerate(tool_rounds(turns, 600)):
        got = p.request(TurnView(k, SYSTEM, msgs, 12_000, 11_000, False, m, history))
    weighed = CountingMeasure.weighed
    assert got.actions == ["clear_tool_uses", "drop_oldest_rounds"]
    assert len(got.blocks) > 500  # the window keeps hundreds of rounds
    fresh = ClearToolUses(trigger=2_000).request(TurnView(k, SYSTEM, msgs, 12_000, 11_000, False, M))
    assert (got.blocks, got.actions) == (fresh.blocks, fresh.actions)
    assert weighed <= 8 * turns, weighed


def test_clear_tool_uses_with_a_moving_window_gives_a_fresh_peers_requests() -> None:
    """Budgets that shrink and grow from turn to turn (the ceiling of each turn's build): the start moves
    both ways; every turn's request is the one a peer with nothing carried makes."""
    history = HistoryBlocks()
    carrying = ClearToolUses(trigger=1_500)
    drops = 0
    for k, msgs in enumerate(tool_rounds(250, 300)):
        ceiling = 1_800 + (k * 7_919) % 1_200
        v = TurnView(k, SYSTEM, msgs, 12_000, ceiling, False, M, history)
        fresh = TurnView(k, SYSTEM, msgs, 12_000, ceiling, False, M, HistoryBlocks())
        got, want = carrying.request(v), ClearToolUses(trigger=1_500).request(fresh)
        assert (got.blocks, got.actions, got.compaction) == (want.blocks, want.actions, want.compaction)
        drops += "drop_oldest_rounds" in got.actions
    assert drops > 150, drops


def _message(role: Role, size: int, tag: str) -> Message:
    return Message(role, (Text(tag + "x" * size),))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 60), min_size=1, max_size=12),
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), max_size=4),  # edits: (at, size)
            st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=6),  # appended: (a round?, size)
            st.integers(0, 900),  # budget
            st.sampled_from(["carried", "carried", "carried", "unknown", "none"]),
        ),
        max_size=25,
    ),
    st.booleans(),
    st.booleans(),
)
def test_the_moved_window_is_last_fitting_windows(
    first: list[int],
    steps: list[tuple[list[tuple[int, int]], list[tuple[bool, int]], int, str]],
    grown: bool,
    with_blocks: bool,
) -> None:
    # grown: each conversation a Grown made from the last (clear_tool_uses' edited conversation), read
    # partly from its run and partly from its tail (base.direct); with_blocks: the messages' tokens read
    # from their Blocks (what clear_tool_uses hands it), not measured
    n = 0

    def fresh(role: Role, size: int) -> Message:
        nonlocal n
        n += 1
        return _message(role, size, f"{n}:")

    msgs = tuple(fresh("assistant" if i % 2 else "user", s) for i, s in enumerate(first))
    w = FittingWindow()
    v = TurnView(1, (), msgs, 200_000, 180_000, False, M)
    assert w.window(v, msgs, 100) == last_fitting_window(v, msgs, 100)
    for edits, appended, budget, how in steps:
        was = msgs
        new = list(msgs)
        changed = []
        for at, size in edits:
            i = at % len(new)
            new[i] = fresh(new[i].role, size)  # an edit keeps the message's role
            changed.append(i)
        for is_round, size in appended:
            new.append(fresh("assistant" if is_round else "user", size))
        changed += [len(was) + j for j in range(len(appended)) if j % 2]  # appended ones may be named
        if grown:
            d = min([*changed, len(was)])
            msgs = was.extended(d, new[d:]) if isinstance(was, Grown) else Grown.of(new)
        else:
            msgs = tuple(new)
        if how == "carried" and with_blocks:
            blocks = [message_block(x, M) for x in msgs]
            got = msgs[w.start(v, msgs, budget, was, changed, blocks) :]
        elif how == "carried":
            got = w.window(v, msgs, budget, was, changed)
        elif how == "unknown":
            got = w.window(v, msgs, budget, tuple(was), changed)  # not the conversation carried
        else:
            got = w.window(v, msgs, budget)
        assert got == last_fitting_window(v, msgs, budget)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 60)), min_size=1, max_size=12),  # (a round?, size)
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), max_size=4),  # edits: (at, size)
            st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=6),  # appended: (a round?, size)
            st.integers(-300, 300),  # budget, from the conversation's total
        ),
        max_size=25,
    ),
)
def test_a_window_moved_from_a_conversation_that_fitted_is_last_fitting_windows(
    first: list[tuple[bool, int]], steps: list[tuple[list[tuple[int, int]], list[tuple[bool, int]], int]]
) -> None:
    """A turn whose conversation fits whole is carried (FittingWindow.fits) from its first round start:
    the next turn's window, when that one does not fit, is last_fitting_window's."""
    n = 0

    def fresh(role: Role, size: int) -> Message:
        nonlocal n
        n += 1
        return _message(role, size, f"{n}:")

    msgs = tuple(fresh("assistant" if r else "user", s) for r, s in first)  # (the first may be a round's)
    w = FittingWindow()
    v = TurnView(1, (), msgs, 200_000, 180_000, False, M)
    w.fits(v, msgs, M.items(msgs))
    for edits, appended, off in steps:
        was = msgs
        new = list(msgs)
        changed = []
        for at, size in edits:
            i = at % len(new)
            new[i] = fresh(new[i].role, size)
            changed.append(i)
        for is_round, size in appended:
            new.append(fresh("assistant" if is_round else "user", size))
        msgs = tuple(new)
        total = M.items(msgs)
        budget = max(0, total + off)
        if total <= budget:
            w.fits(v, msgs, total)
        else:
            assert w.window(v, msgs, budget, was, changed) == last_fitting_window(v, msgs, budget)


def test_clear_tool_uses_about_its_budget_moves_its_window_from_the_turn_that_fitted() -> None:
    """A ceiling that lets the edited conversation fit every other turn: the turn after one that fitted
    moves the window from that turn's first round start, where it read the whole conversation back
    (old code: 160,020 items weighed over 400 turns; now 3,050). Same requests as a fresh peer's."""
    m = CountingMeasure(TokenCounter(CharTokenizer()))
    history = HistoryBlocks()
    p = ClearToolUses(trigger=1_000)
    fits = over = 0
    CountingMeasure.weighed = 0
    for k, msgs in enumerate(tool_rounds(400, 300)):
        # The request's tokens with nothing dropped (the cleared conversation and the system block).
        whole = ClearToolUses(trigger=1_000).request(TurnView(k, SYSTEM, msgs, 120_000, 10**9, False, M))
        ceiling = sum(b.tokens for b in whole.blocks) + (40 if k % 2 else -40)
        got = p.request(TurnView(k, SYSTEM, msgs, 120_000, ceiling, False, m, history))
        want = ClearToolUses(trigger=1_000).request(TurnView(k, SYSTEM, msgs, 120_000, ceiling, False, M))
        assert (got.blocks, got.actions) == (want.blocks, want.actions)
        over += "drop_oldest_rounds" in got.actions
        fits += "clear_tool_uses" in got.actions and "drop_oldest_rounds" not in got.actions
    assert fits > 150 and over > 150, (fits, over)
    assert CountingMeasure.weighed < 4_000, CountingMeasure.weighed
