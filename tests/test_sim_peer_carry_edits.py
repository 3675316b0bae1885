"""The peers' per-turn work on a long session (engine/sim/policies/): what is carried from turn to turn.

- clear_tool_uses' edited conversation (a few more results cleared every turn, and the new messages) has
  its Blocks carried from the last turn's (HistoryBlocks.edited): it was looked up whole every turn, a
  dictionary look-up per message (a what-if on a 1,500-turn recording: 2.24 million, 1.9 s CPU).
- A conversation's token total is carried with its Blocks (HistoryBlocks.tokens), not summed again.
- last_fitting_window reads the round starts from the newest message back, as far as it keeps rounds
  (tests/test_sim_fitting_window.py holds it to the split of the whole conversation).

Differential: whatever the order of asks and edits, what HistoryBlocks hands out equals a lookup of
every message (`looked_up`), and its totals their sum."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.policies import TurnView
from engine.sim.policies.base import HistoryBlocks, blocks_tokens, last_fitting_window, message_block
from engine.sim.policies.clear_tool_uses import ClearToolUses
from engine.tokens import CharTokenizer, TokenCounter
from tests.support.conversation_ops import tool_rounds

M = Measure(TokenCounter(CharTokenizer()))
SYSTEM = (Block("identity", "system", "s" * 64, 100, True),)


class CountingDict(dict):  # type: ignore[type-arg]
    """HistoryBlocks.by_sha, counting the Blocks looked up by hash (either way of asking)."""

    lookups = 0

    def __getitem__(self, key: str) -> object:
        CountingDict.lookups += 1
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        CountingDict.lookups += 1
        return super().get(key, default)


def test_clear_tool_uses_looks_up_the_changed_messages_not_the_whole_edited_conversation() -> None:
    """300 turns clearing from the first: a turn looks up its new messages and the newly cleared one,
    where the edited conversation was looked up whole every turn (180,209 look-ups in 300 turns)."""
    history = HistoryBlocks()
    history.by_sha = CountingDict()
    CountingDict.lookups = 0
    p = ClearToolUses(trigger=1000)
    turns = 300
    for k, msgs in enumerate(tool_rounds(turns)):
        got = p.request(TurnView(k, SYSTEM, msgs, 1_000_000, 900_000, False, M, history))
        if k > 10:
            assert "clear_tool_uses" in got.actions
    lookups = CountingDict.lookups
    # The carried request is the one a peer with nothing carried makes of the same conversation.
    fresh = ClearToolUses(trigger=1000).request(
        TurnView(k, SYSTEM, msgs, 1_000_000, 900_000, False, M, HistoryBlocks())
    )
    assert (got.blocks, got.actions) == (fresh.blocks, fresh.actions)
    assert lookups <= 12 * turns, lookups


def test_clear_tool_uses_and_its_window_give_the_requests_a_fresh_peer_gives() -> None:
    """A window smaller than the session: the edit, then the newest rounds that fit, every turn."""
    history = HistoryBlocks()
    carrying = ClearToolUses(trigger=500)
    for k, msgs in enumerate(tool_rounds(200, 900)):
        v = TurnView(k, SYSTEM, msgs, 3_000, 2_700, False, M, history)
        fresh = TurnView(k, SYSTEM, msgs, 3_000, 2_700, False, M, HistoryBlocks())
        got, want = carrying.request(v), ClearToolUses(trigger=500).request(fresh)
        assert (got.blocks, got.actions, got.compaction) == (want.blocks, want.actions, want.compaction)
    assert "drop_oldest_rounds" in got.actions


def _msg(i: int) -> Message:
    return Message("user" if i % 2 else "assistant", (Text(f"message {i} " + "x" * (i % 17)),))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["append", "edit", "edit_unknown", "window", "tokens", "other"]),
            st.integers(0, 40),
            st.lists(st.integers(0, 60), max_size=4),
        )
    )
)
def test_edited_and_carried_totals_equal_a_lookup_of_every_message(
    ops: list[tuple[str, int, list[int]]],
) -> None:
    h = HistoryBlocks()
    fresh = HistoryBlocks()
    msgs: tuple[Message, ...] = (_msg(0),)
    h.of(msgs, M)
    n = 1
    for op, k, at in ops:
        ask: tuple[Message, ...] = msgs
        if op == "append":
            msgs = msgs + tuple(_msg(n + j) for j in range(k % 4))
            n += 4
            got = h.of(msgs, M)
            ask = msgs
        elif op in ("edit", "edit_unknown"):
            # Some messages replaced (or left as they were: an index may repeat), some appended.
            was = msgs if op == "edit" else tuple(msgs)  # a copy: not a carried conversation
            edited = list(msgs)
            changed = [i % len(msgs) for i in at]
            for i in changed:
                edited[i] = _msg(1000 + n)
                n += 1
            edited += [_msg(n + j) for j in range(k % 3)]
            n += 3
            changed += [len(msgs) + j for j in range(k % 3) if j % 2]  # appended ones may be named too
            msgs = tuple(edited)
            got = h.edited(msgs, was, changed, M)
            ask = msgs
        elif op == "window":
            ask = msgs[k % (len(msgs) + 1) :]
            got = h.of(ask, M)
        elif op == "other":
            ask = tuple(_msg(5000 + n + j) for j in range(k % 5))
            n += 5
            got = h.of(ask, M)
        else:
            got = h.of(ask, M)
        want = fresh.looked_up(ask, M)
        assert got == want == [message_block(m, M) for m in ask]
        assert h.tokens(ask, M) == blocks_tokens(want)
        got.append(message_block(_msg(9999), M))  # a caller may extend what it was handed
        assert h.of(ask, M) == want
        assert h.tokens(msgs, M) == blocks_tokens(fresh.looked_up(msgs, M))


def test_the_fitting_window_reads_the_rounds_it_keeps_not_the_whole_conversation() -> None:
    """last_fitting_window on a 3,000-message conversation whose window keeps ~20 rounds reads the roles
    of the messages it keeps and a round more, where splitting the whole conversation read all of them."""

    class Counted(Message):
        reads = 0

        def __getattribute__(self, name: str) -> Any:
            if name == "role":
                Counted.reads += 1
            return object.__getattribute__(self, name)

    msgs = tuple(Counted(x.role, x.parts) for x in tool_rounds(1500, 100)[-1])
    Counted.reads = 0
    v = TurnView(1, SYSTEM, msgs, 6_000, 5_000, False, M)
    kept = last_fitting_window(v, msgs, 5_000)
    assert 10 < len(kept) < 400
    assert Counted.reads <= len(kept) + 4, Counted.reads
