"""FittingWindow's sums (engine/sim/policies/base.py): where the caller hands the messages' Blocks
(clear_tool_uses), the window of its edited conversation is found by bisection over carried prefix sums
and round starts, not walked message by message from the last turn's start.

Differential: whatever the edits (anywhere, same roles), appends, budgets, and turns that fit whole, the
window is last_fitting_window's; and clear_tool_uses over varied sessions and ceilings sends, every turn,
what a peer with nothing carried sends."""

from __future__ import annotations

from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.grown import Grown
from engine.sim.policies import TurnView
from engine.sim.policies.base import FittingWindow, HistoryBlocks, last_fitting_window, message_block
from engine.sim.policies.clear_tool_uses import ClearToolUses
from engine.tokens import CharTokenizer, TokenCounter

M = Measure(TokenCounter(CharTokenizer()))
Role = Literal["user", "assistant"]
SYSTEM = (Block("identity", "system", "s" * 64, 100, True),)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=12),  # (a round?, size)
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), max_size=4),  # edits: (at, size)
            st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=6),  # appended: (a round?, size)
            st.integers(-400, 200),  # budget, from the conversation's total
            st.sampled_from(["carried", "carried", "carried", "unknown", "no blocks"]),
        ),
        max_size=30,
    ),
    st.booleans(),
)
def test_the_window_from_carried_sums_is_last_fitting_windows(
    first: list[tuple[bool, int]],
    steps: list[tuple[list[tuple[int, int]], list[tuple[bool, int]], int, str]],
    grown: bool,
) -> None:
    n = 0

    def fresh(role: Role, size: int) -> Message:
        nonlocal n
        n += 1
        return Message(role, (Text(f"{n}:" + "x" * size),))

    msgs: tuple[Message, ...] | Grown[Message] = tuple(
        fresh("assistant" if r else "user", s) for r, s in first
    )
    w = FittingWindow()
    v = TurnView(1, (), msgs, 200_000, 180_000, False, M)
    blocks = [message_block(x, M) for x in msgs]
    w.fits(v, msgs, M.items(msgs), None, (), blocks)
    for edits, appended, off, how in steps:
        was = msgs
        new = list(msgs)
        changed = []
        for at, size in edits:
            if new:
                i = at % len(new)
                new[i] = fresh(new[i].role, size)  # an edit keeps the message's role
                changed.append(i)
        for is_round, size in appended:
            new.append(fresh("assistant" if is_round else "user", size))
        if grown and new:
            d = min([*changed, len(was)])
            msgs = was.extended(d, new[d:]) if isinstance(was, Grown) else Grown.of(new)
        else:
            msgs = tuple(new)
        blocks = [message_block(x, M) for x in msgs]
        total = M.items(msgs)
        budget = max(0, total + off)
        told: tuple[object, ...] = {
            "carried": (was, changed, blocks),
            "unknown": (tuple(was), changed, blocks),  # not the conversation carried: made afresh
            "no blocks": (was, changed, None),  # the walk's way (sliding_window's)
        }[how]
        if total <= budget:
            w.fits(v, msgs, total, *told)  # type: ignore[arg-type]
        else:
            start = w.start(v, msgs, budget, *told)  # type: ignore[arg-type]
            assert msgs[start:] == last_fitting_window(v, msgs, budget)


def _session(sizes: list[tuple[int, int]]) -> list[tuple[Message, ...]]:
    """Each turn's conversation: a tool round a turn (a call, then a result of the size asked), a user
    note now and then (a round of more than two messages)."""
    msgs = [Message("user", (Text("the task"),))]
    out = []
    for k, (size, note) in enumerate(sizes):
        msgs += [
            Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)),
            Message("user", (ToolResult(f"c{k}", "r" * size),)),
        ]
        if note:
            msgs.append(Message("user", (Text("n" * note),)))
        out.append(tuple(msgs))
    return out


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 900), st.sampled_from([0, 0, 0, 40])), min_size=10, max_size=150),
    st.integers(100, 2_000),  # trigger
    st.integers(250, 2_500),  # ceiling
    st.integers(0, 600),  # how far the ceiling swings from turn to turn
    st.integers(1, 4),  # keep
)
def test_clear_tool_uses_carrying_its_window_sends_a_fresh_peers_requests(
    sizes: list[tuple[int, int]], trigger: int, ceiling: int, swing: int, keep: int
) -> None:
    history = HistoryBlocks()
    carrying = ClearToolUses(trigger=trigger, keep=keep)
    for k, msgs in enumerate(_session(sizes)):
        c = ceiling + (k * 7_919) % (swing + 1)
        got = carrying.request(TurnView(k, SYSTEM, msgs, 120_000, c, False, M, history))
        want = ClearToolUses(trigger=trigger, keep=keep).request(
            TurnView(k, SYSTEM, msgs, 120_000, c, False, M)
        )
        assert (list(got.blocks), got.actions, got.compaction) == (
            list(want.blocks),
            want.actions,
            want.compaction,
        )
