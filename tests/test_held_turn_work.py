"""What a held turn no longer does: split and sum the whole history to count its cut on, and tokenize a
short text it counted before under another hash.

- cut_choice._counted_on walks round by round from the end of the remembered cut. A hypothesis test
  drives random histories through _choose_cut with the memo (counted on, carried or chosen afresh) and
  without it (always from scratch) and requires the same cut and the same remembered bound; the
  side-by-side sessions of tests/test_turn_lineage.py hold every request, trace, state and journal
  equal with the fast path on and off. The counting test fails on a348f50 (every counted-on turn split
  and summed the whole history: Measure.rounds and Measure.cumulative once each).
- TokenCounter remembers short texts by their text: the same empty tool output under another call id
  (16 of pydicom-1413's 271 counts) is tokenized once. Fails on a348f50.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure, Section
from engine.pipeline import Pipeline
from engine.policy import CompactionState, cost_aware, cut_choice
from engine.tokens import SHORT_TEXT, CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind
from tests.test_cost_aware_cut_carry import STEADY, _choices
from tests.test_turn_carry import reuses_counted

SLOT = ("limits", "settings")  # any hashable: _choose_cut keys its memo by it


def _round(t: int, size: int) -> tuple[Message, Message]:
    call = ToolCall(f"c{t}", "bash", f'{{"n": {t}}}')
    return Message("assistant", (Text(f"step {t}"), call)), Message(
        "user", (ToolResult(f"c{t}", "x" * size),)
    )


def _history(task: Message, rounds: list[tuple[Message, ...]]) -> Section:
    items = (task,) + tuple(m for r in rounds for m in r)
    return Section("history", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, items)


class _Counting:
    """A character tokenizer that counts its calls per text."""

    name = "counting"

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def count(self, text: str) -> int:
        self.calls[text] = self.calls.get(text, 0) + 1
        return (len(text) + 3) // 4


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.lists(st.integers(1, 400), min_size=1, max_size=3),  # sizes of the rounds appended
            st.booleans(),  # a plain user message after them (a round that is not a tool round)
        ),
        min_size=2,
        max_size=30,
    ),
    first=st.lists(st.integers(1, 400), min_size=0, max_size=12),
    target=st.integers(0, 3_000),
)
def test_counting_on_equals_choosing_afresh(
    steps: list[tuple[list[int], bool]], first: list[int], target: int
) -> None:
    """Each step appends rounds (and sometimes a user message) and chooses a cut to `target` twice: with
    the remembered cut (carried, counted on or chosen afresh, as the steady turn does) and without any
    memo (always from scratch). The cuts are equal, and so is what is remembered for the next turn."""
    m = Measure(TokenCounter(CharTokenizer()))
    task = Message("user", (Text("Fix the bug."),))
    rounds: list[tuple[Message, ...]] = [_round(i, n) for i, n in enumerate(first)]
    carry: dict[str, Any] = {}
    state = CompactionState()
    t = len(rounds)
    with reuses_counted(cut_choice, "_counted_on") as counted:
        for sizes, user in steps:
            for n in sizes:
                rounds.append(_round(t, n))
                t += 1
            if user:
                rounds.append((Message("user", (Text(f"also {t}"),)),))
            asm = (_history(task, rounds),)
            full = len(asm[0].items)
            got = cost_aware._choose_cut(asm, state, target, m, full, carry, SLOT)
            want = cost_aware._choose_cut(asm, state, target, m, full)
            assert got == want
            memo = carry.get(cost_aware.CUT_CARRY, {}).get(SLOT)
            if memo is not None and memo.items is asm[0].items:  # remembered this turn: its bound too
                items = asm[0].items
                droppable = m.rounds(items)[1:-1]
                cum = m.cumulative(items)
                k = memo.cut.dropped_rounds
                below = cum[droppable[k - 1][0]] - cum[droppable[0][0]] if k > 1 else -math.inf
                assert memo.below == below
                assert memo.cut.dropped_tokens == cum[droppable[k - 1][1]] - cum[droppable[0][0]]
    event(f"counted on: {'none' if not counted[0] else 'some'}")


def test_a_counted_on_turn_does_not_split_or_sum_the_whole_history() -> None:
    """The STEADY session (70 rounds above the target until a compaction pays) with the carry on: the
    cut is counted on most turns, and no turn that counts it on splits the history into rounds or sums
    it (on a348f50 each did both, once)."""
    calls = [0]

    def counting(name: str) -> Any:
        real = getattr(Measure, name)

        def wrapped(self: Measure, items: Any) -> Any:
            calls[0] += 1
            return real(self, items)

        return wrapped

    saved = Measure.rounds, Measure.cumulative
    Measure.rounds, Measure.cumulative = counting("rounds"), counting("cumulative")  # type: ignore[method-assign]
    try:
        with reuses_counted(cut_choice, "_counted_on") as counted:
            fresh, builds = _choices(True, STEADY, 6_000, "cost_aware")
    finally:
        Measure.rounds, Measure.cumulative = saved  # type: ignore[method-assign]
    assert counted[0] >= builds // 4, (counted[0], builds)
    # What remains: a split and a running sum for each cut chosen from scratch (and the guarantee's).
    assert calls[0] <= 2 * fresh + 4, (calls[0], fresh, counted[0], builds)


def test_a_short_text_under_another_hash_is_tokenized_once() -> None:
    tok = _Counting()
    c = TokenCounter(tok)
    empty = "<returncode>0</returncode>\n<output>\n</output>"
    assert c.count(empty, "a" * 64) == c.count(empty, "b" * 64) == c.count(empty, "c" * 64)
    assert tok.calls[empty] == 1
    assert c.misses == 3  # three keys the cache did not hold, one text tokenized
    # A long text is remembered by its hash only (what forget() frees stays freed).
    long = "y" * (SHORT_TEXT + 1)
    c.count(long, "d" * 64)
    c.count(long, "e" * 64)
    assert tok.calls[long] == 2
    # Another tokenizer's counts are not these.
    c.tokenizer = other = _Counting()
    c.count(empty, "f" * 64)
    assert other.calls[empty] == 1


def test_the_same_tool_output_under_new_call_ids_is_tokenized_once() -> None:
    tok = _Counting()
    pipe = Pipeline(
        "deepseek-chat", "openai", 32_000, counter=TokenCounter(tok), serve=False, clock=lambda: 0.0
    )
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the bug.")
    empty = "<returncode>0</returncode>\n<output>\n</output>"
    for i in range(6):
        pipe.assistant("", [{"id": f"call{i}", "name": "bash", "arguments": '{"command": "true"}'}])
        pipe.tool_result(f"call{i}", empty)
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 5})
    pipe.close()
    assert tok.calls[empty] == 1
    assert tok.calls['bash {"command": "true"}'] == 1


def test_adding_a_blob_is_membership_then_store() -> None:
    """BlobStore.add (what Journal.blob calls every turn) against `h not in store` then `store[h] = text`
    on a twin store: held in memory, evicted to disk (read back by either), and new."""
    from engine.hashing import sha256_hex
    from engine.recording.blob_store import BlobStore

    texts = [f"text {i} " * (i + 1) for i in range(12)]
    stores = (BlobStore(), BlobStore())
    for s in stores:
        for t in texts[:8]:
            s[sha256_hex(t)] = t
        assert s.evict(sha256_hex(t) for t in texts[:4]) == 4  # on disk now
    fast, slow = stores
    for t in texts[2:6] + texts[8:] + texts[9:10]:  # on disk, in memory, new, new again
        h = sha256_hex(t)
        was_new = h not in slow
        if was_new:
            slow[h] = t
        assert fast.add(h, t) is was_new
        assert fast._mem == slow._mem  # (a text read back from disk is in memory again in both)
        assert (len(fast), len(fast._disk)) == (len(slow), len(slow._disk))
    assert len(fast._disk) == 2  # texts 0 and 1 stayed on disk throughout
    assert dict(fast.items()) == dict(slow.items())
