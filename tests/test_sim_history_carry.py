"""HistoryBlocks.of carried from call to call: every turn each peer asks for the whole conversation (the
same tuple), and the next turn's is this one with messages appended; the Blocks of the carried part are
reused, a window of the newest messages is the tail of a carried list, and only the rest is looked up.
The lists handed out must equal a lookup of every message (`looked_up`), whatever the order of asks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text
from engine.assembly import Measure
from engine.sim.policies.base import HistoryBlocks, message_block
from engine.tokens import CharTokenizer, TokenCounter

M = Measure(TokenCounter(CharTokenizer()))


class CountingDict(dict):  # type: ignore[type-arg]
    """HistoryBlocks.by_sha, counting the Blocks looked up by hash."""

    lookups = 0

    def __getitem__(self, key: str) -> object:
        CountingDict.lookups += 1
        return super().__getitem__(key)


def msg(i: int) -> Message:
    return Message("user" if i % 2 else "assistant", (Text(f"message {i} " + "x" * (i % 13)),))


def test_a_growing_conversation_looks_up_each_new_message_not_the_whole_one_per_ask() -> None:
    h = HistoryBlocks()
    h.by_sha = CountingDict()
    CountingDict.lookups = 0
    msgs: tuple[Message, ...] = ()
    turns = 300
    for t in range(turns):
        msgs = msgs + (msg(2 * t), msg(2 * t + 1))
        for _ in range(3):  # three peers ask for the whole conversation
            blocks = h.of(msgs, M)
        window = h.of(msgs[len(msgs) // 2 :], M)  # one keeps the newest half
        assert window == blocks[len(msgs) // 2 :]
    assert blocks == [message_block(m, M) for m in msgs]
    # The old code looked up every message of every ask: 4 asks a turn, ~3.5 * 300 * 300 = 315,000.
    assert CountingDict.lookups <= 6 * turns, CountingDict.lookups


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["append", "same", "window", "edit", "list", "other"]), st.integers(0, 40))
    )
)
def test_carried_blocks_equal_a_lookup_of_every_message(ops: list[tuple[str, int]]) -> None:
    h = HistoryBlocks()
    fresh = HistoryBlocks()
    msgs: tuple[Message, ...] = (msg(0),)
    others: list[tuple[Message, ...]] = []
    n = 1
    for op, k in ops:
        ask: tuple[Message, ...] | list[Message] = msgs
        if op == "append":
            msgs = msgs + tuple(msg(n + j) for j in range(k % 4))
            n += 4
            ask = msgs
        elif op == "window":
            ask = msgs[k % (len(msgs) + 1) :]
        elif op == "edit" and msgs:
            i = k % len(msgs)
            msgs = msgs[:i] + (msg(1000 + n),) + msgs[i + 1 :]
            n += 1
            ask = msgs
        elif op == "list":
            ask = list(msgs)
        elif op == "other":
            others.append(tuple(msg(5000 + n + j) for j in range(k % 5)))
            n += 5
            ask = others[k % len(others)]
        got = h.of(ask, M)
        assert got == fresh.looked_up(ask, M) == [message_block(m, M) for m in ask]
        got.append(message_block(msg(9999), M))  # a caller may extend what it was handed
        assert h.of(ask, M) == fresh.looked_up(ask, M)


def test_a_growing_conversation_extends_its_carried_list_and_hands_out_copies() -> None:
    """The carried list of a conversation that grows is extended where it is (one list a lineage, not a
    copy of the whole conversation a turn besides the one handed out), and what callers get are copies:
    a caller that changes its list (a peer marking its newest message) changes nothing carried."""
    h = HistoryBlocks()
    msgs: tuple[Message, ...] = (msg(0), msg(1))
    got = h.of(msgs, M)
    lists = {id(h.carried[-1][1])}
    for t in range(1, 40):
        msgs = msgs + (msg(2 * t), msg(2 * t + 1))
        got = h.of(msgs, M)
        lists.add(id(h.carried[-1][1]))
        got[-1] = message_block(msg(0), M)  # a caller's own change
        got.append(message_block(msg(1), M))
        assert h.of(msgs, M) == [message_block(m, M) for m in msgs]
    assert len(lists) == 1  # the old code: a new list every turn (12 ids here, some reused)
