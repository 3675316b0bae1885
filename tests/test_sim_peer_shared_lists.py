"""The peers' per-call work that followed the whole conversation (engine/sim/policies/), made O(new).

- HistoryBlocks.of / edited with copy=False hand out the store's own list (read at once, never
  changed): a peer copies it into its request anyway (system blocks first), and the copy it was handed
  besides was a reference count touched per Block of the conversation, a call (~0.1 ms late in a
  3,000-turn what-if, per peer). clear_tool_uses' edited conversation is edited in its carried list,
  in place, not copied whole twice a call.
- The compaction peers weigh the conversation from running sums of their own, extended by what a turn
  appended (the views say when a conversation was made from the last one): Measure.cumulative found
  its lineage by comparing each view's new tuple with the last by value, and released its memo's
  links, every call.

Differential: whatever the sequence of asks, what is handed out equals a lookup of every message, and
the sums equal the sums of every message's count."""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.policies import PEERS, TurnView
from engine.sim.policies.base import HistoryBlocks, last_fitting_window_reference, message_block
from engine.sim.policies.clear_tool_uses import ClearToolUses
from engine.sim.policies.compaction import SummaryCompaction
from engine.sim.turn_views import TurnViews
from engine.tokens import CharTokenizer, TokenCounter
from tests.support.conversation_ops import tool_rounds

M = Measure(TokenCounter(CharTokenizer()))
SYSTEM = (Block("identity", "system", "s" * 64, 100, True),)


def _msg(i: int) -> Message:
    return Message("user" if i % 2 else "assistant", (Text(f"message {i} " + "x" * (i % 17)),))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["append", "edit", "window", "tokens", "other"]),
            st.integers(0, 40),
            st.lists(st.integers(0, 60), max_size=4),
            st.booleans(),
        )
    )
)
def test_lists_handed_out_unshared_or_shared_equal_a_lookup_of_every_message(
    ops: list[tuple[str, int, list[int], bool]],
) -> None:
    """copy=False or not, in any order of asks and edits (each edit of the last edited conversation,
    as clear_tool_uses asks), what is handed out is the Blocks of every message, and so are the
    conversations asked for later (an in-place edit changes only the list of the conversation edited)."""
    h = HistoryBlocks()
    fresh = HistoryBlocks()
    msgs: tuple[Message, ...] = (_msg(0),)
    h.of(msgs, M)
    asked: list[tuple[Message, ...]] = [msgs]
    n = 1
    for op, k, at, copy in ops:
        ask = msgs
        if op == "append":
            msgs = msgs + tuple(_msg(n + j) for j in range(k % 4))
            n += 4
            got = h.of(msgs, M, copy=copy)
            ask = msgs
        elif op == "edit":
            edited = list(msgs)
            changed = [i % len(msgs) for i in at]
            for i in changed:
                edited[i] = _msg(1000 + n)
                n += 1
            edited += [_msg(n + j) for j in range(k % 3)]
            n += 3
            was, msgs = msgs, tuple(edited)
            got = h.edited(msgs, was, changed, M, copy=copy)
            ask = msgs
        elif op == "window":
            ask = msgs[k % (len(msgs) + 1) :]
            got = h.of(ask, M, copy=copy)
        elif op == "other":
            ask = tuple(_msg(5000 + n + j) for j in range(k % 5))
            n += 5
            got = h.of(ask, M, copy=copy)
        else:
            got = h.of(ask, M, copy=copy)
        want = [message_block(m, M) for m in ask]
        assert got == want
        assert h.tokens(ask, M) == sum(b.tokens for b in want)
        asked.append(ask)
        for old in asked[-4:]:  # earlier conversations asked again: as they were
            assert h.of(old, M) == fresh.looked_up(old, M)


def test_clear_tool_uses_edits_its_carried_list_in_place() -> None:
    """300 turns clearing one more result a turn: the edited conversation's Blocks are one list carried
    and edited where it is (the old code copied it twice a turn: a new list every turn), and each
    request is the one a peer with nothing carried makes."""
    history = HistoryBlocks()
    p = ClearToolUses(trigger=1000)
    lists: set[int] = set()
    kept: list[Any] = []
    for k, msgs in enumerate(tool_rounds(300)):
        got = p.request(TurnView(k, SYSTEM, msgs, 1_000_000, 900_000, False, M, history))
        if k > 10:
            assert "clear_tool_uses" in got.actions
            lists.add(id(history.carried[-1][1]))
            kept.append(history.carried[-1][1])  # (held: an id is the list's only while it lives)
        if k % 50 == 0 or k == 299:
            fresh = ClearToolUses(trigger=1000).request(
                TurnView(k, SYSTEM, msgs, 1_000_000, 900_000, False, M, HistoryBlocks())
            )
            assert (got.blocks, got.actions) == (fresh.blocks, fresh.actions)
    assert len(lists) == 1, len(lists)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["append", "noted", "same", "edit", "other", "measure"]), st.integers(0, 40)
        )
    )
)
def test_compaction_running_sums_equal_the_sums_of_every_message(ops: list[tuple[str, int]]) -> None:
    """_running_sums, carried from call to call, equals the running sums of every message's count
    whatever the conversation is next: one that appends (said so by the views or not), the same one,
    one edited (it does not start with the last), another, or another Measure."""
    p = SummaryCompaction()
    history = HistoryBlocks()
    m = M
    msgs: tuple[Message, ...] = (_msg(0),)
    n = 1
    for op, k in ops:
        if op in ("append", "noted"):
            was, msgs = msgs, msgs + tuple(_msg(n + j) for j in range(k % 4))
            n += 4
            if op == "noted":
                history.note_extends(msgs, was)
        elif op == "edit" and msgs:
            i = k % len(msgs)
            msgs = msgs[:i] + (_msg(1000 + n),) + msgs[i + 1 :]
            n += 1
        elif op == "other":
            msgs = tuple(_msg(5000 + n + j) for j in range(k % 5))
            n += 5
        elif op == "measure":
            m = Measure(TokenCounter(CharTokenizer()))  # another Measure: not the sums carried
        v = TurnView(0, SYSTEM, msgs, 100_000, 90_000, False, m, history)
        assert p._running_sums(v) == list(accumulate(map(m.item, msgs), initial=0))


@pytest.mark.parametrize("name", ["server_compaction", "threshold_compaction"])
def test_compaction_peers_weigh_the_views_without_comparing_them(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """600 turns handed out by TurnViews (each view made from the last by appending): the peer never
    asks Measure whether a conversation starts with another (the old code did, by value at first, in
    Measure.cumulative's lineage lookup, every call), and its requests are a fresh peer's."""
    asked = 0
    starts_with = Measure.starts_with

    def counted(self: Measure, items: Any, prev: Any) -> bool:
        nonlocal asked
        asked += 1
        return starts_with(self, items, prev)

    # (before the Measure is made: its memos hold the bound method)
    monkeypatch.setattr(Measure, "starts_with", counted)
    m = Measure(TokenCounter(CharTokenizer()))
    history = HistoryBlocks()
    views = TurnViews()
    for k, msgs in enumerate(tool_rounds(600, 200)):
        views.add(k, SYSTEM, msgs, 20_000, 19_000, False, m, history)
    p = PEERS[name]()
    acted: set[str] = set()
    for v in views:
        got = p.request(v)
        acted.update(got.actions)
        if v.turn % 100 == 99:
            fresh = PEERS[name]()
            # (a fresh peer at the same cut and summary: the request made from them alone)
            fresh.cut, fresh.summary = p.cut, p.summary
            want = fresh.request(TurnView(v.turn, v.system, v.messages, v.window, v.ceiling, v.markers, m))
            if not want.side_calls and not got.side_calls:
                assert (got.blocks, got.actions) == (want.blocks, want.actions)
    assert "compact" in acted
    assert asked == 0, asked


def test_clear_tool_uses_windows_are_the_blocks_of_the_newest_rounds_of_the_cleared_conversation() -> None:
    """Past its window the request is the system Blocks and the Blocks of the newest whole rounds of the
    cleared conversation that fit, every turn: checked against the reference edit (_clear_all) and the
    reference window (last_fitting_window_reference), not against another peer of the same code (the
    request is cut from the whole conversation's carried Blocks now)."""
    history = HistoryBlocks()
    p = ClearToolUses(trigger=500)
    windows = 0
    for k, msgs in enumerate(tool_rounds(200, 900)):
        v = TurnView(k, SYSTEM, msgs, 3_000, 2_700, False, M, history)
        got = p.request(v)
        ref = ClearToolUses(trigger=500)
        results = ref._results(msgs)
        cleared = ref._clear_all(msgs, results[: max(0, len(results) - ref.keep)], M) or msgs
        budget = v.ceiling - sum(b.tokens for b in SYSTEM)
        sent = cleared
        if sum(map(M.item, cleared)) > budget:
            sent = last_fitting_window_reference(v, cleared, budget)
            windows += len(sent) < len(cleared)
        assert got.blocks == [*SYSTEM, *(message_block(x, M) for x in sent)]
    assert windows > 100, windows


@pytest.mark.parametrize("markers", [False, True])
@pytest.mark.parametrize("window", [1_000_000, 3_000])
def test_clear_tool_uses_says_how_much_of_its_last_request_it_kept(markers: bool, window: int) -> None:
    """PeerRequest.same, as simulate takes it (_said_shared), is the shared prefix simulate finds by
    comparing the two requests (_shared_len), every turn; and it is said on the turns that clear one
    more result of the whole conversation (they were compared over their whole length, several times),
    and on every turn whose window moved (its stretch starts elsewhere in the last request: simulate
    compared the two ~4,800-Block Windows to find they part after the system Blocks)."""
    from engine.sim.simulate_column import _said_shared, _shared_len

    history = HistoryBlocks()
    p = ClearToolUses(trigger=500)
    prev: list[Block] = []
    said = moved = moved_said = 0
    for k, msgs in enumerate(tool_rounds(200, 900)):
        got = p.request(TurnView(k, SYSTEM, msgs, window, int(window * 0.9), markers, M, history))
        assert _said_shared(prev, got.blocks, got.same) == _shared_len(prev, got.blocks)
        if got.same is not None:
            said += 1
            assert got.same == _shared_len(prev, got.blocks)
        if got.stretch is not None and got.stretch[0] != got.stretch[1]:
            moved += 1
            moved_said += got.same is not None
        prev = got.blocks
    if window > 100_000:
        assert said >= 190, said
    else:
        assert moved > 100 and moved_said == moved, (moved, moved_said)


@pytest.mark.parametrize("markers", [False, True])
def test_clear_tool_uses_says_which_stretch_of_its_last_request_its_window_sends_again(markers: bool) -> None:
    """PeerRequest.stretch past the window (which moves on or back by a round or two a turn): the told
    Blocks are the last request's, the same objects, and simulate takes the stretch as it would have
    found it (_told_stretch's (h, a, m) names the same Blocks as a search's); told on most turns past
    the window (simulate searched two copies of each ~4,700-Block request a call for it)."""
    from engine.sim.simulate_column import _shared_len, _told_stretch

    history = HistoryBlocks()
    p = ClearToolUses(trigger=500)
    prev: list[Block] = []
    told = windows = 0
    for k, msgs in enumerate(tool_rounds(200, 900)):
        got = p.request(TurnView(k, SYSTEM, msgs, 3_000, 2_700, markers, M, history))
        windows += "drop_oldest_rounds" in got.actions
        if got.stretch is not None:
            s, a, m = got.stretch
            assert m >= 1 and s + m <= len(got.blocks) and a + m <= len(prev)
            assert all(x is y for x, y in zip(got.blocks[s : s + m], prev[a : a + m], strict=True))
            common = _shared_len(prev, got.blocks)
            h = _told_stretch(prev, got.blocks, common, got.stretch)
            if h is not None:
                told += 1
                assert got.blocks[common + h[0] : common + h[0] + h[2]] == prev[h[1] : h[1] + h[2]]
        prev = got.blocks
    assert windows > 100 and told >= windows // 2, (told, windows)
