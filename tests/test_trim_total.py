"""Dropping history rounds records the kept history's total from the old one (Measure.derived), so the
budget trim does not walk every kept message again; the recorded total is what a fresh sum gives."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, SectionItem, Text, ToolCall, ToolResult
from engine.assembly import Measure, Section
from engine.optimize.context import OptimizeLimits
from engine.optimize.history_ops import drop_oldest, drop_range, oldest_to_drop
from engine.pipeline import Pipeline
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind


def _history(sizes: list[int], task: str | None, marker: bool) -> Section:
    items: list[SectionItem] = []
    if task is not None:
        parts: tuple[Text, ...] = (Text(task),)
        if marker:  # an earlier drop's omission note, which the next drop replaces
            parts += (Text("[...123 tokens omitted (2 earlier rounds dropped)...]"),)
        items.append(Message("user", parts))
    for k, n in enumerate(sizes):
        items.append(Message("assistant", (ToolCall(f"c{k}", "bash", json.dumps({"k": k})),)))
        items.append(Message("user", (ToolResult(f"c{k}", "x" * n),)))
    return Section("history", "History", SectionKind.HISTORY, CacheScope.SESSION, Priority.NORMAL, tuple(items))


histories = st.tuples(
    st.lists(st.integers(0, 400), min_size=0, max_size=14),
    st.one_of(st.none(), st.text(min_size=0, max_size=40)),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(histories, st.integers(-20, 3_000), st.booleans(), st.integers(0, 16))
def test_the_kept_history_total_is_the_fresh_sum(h: tuple[list[int], str | None, bool], need: int,
                                                 by_count: bool, count: int) -> None:
    hist = _history(*h)
    counter = TokenCounter(CharTokenizer())
    m = Measure(counter)
    asm = (hist,)
    if by_count:
        new, _ = drop_oldest(asm, 0, count, m)
    else:
        droppable = m.rounds(hist.items)[1:-1]
        n, acc = oldest_to_drop(hist.items, droppable, m.section(hist), need, m)
        if not n:
            return
        new, _ = drop_range(asm, 0, droppable[0][0], droppable[n - 1][1], n, acc, m)
    # What the trim reads (the recorded total) equals a fresh measure's sum of the kept items.
    assert m.section(new[0]) == Measure(counter).section(new[0]) == Measure(counter).items(new[0].items)


class CountingMeasure(Measure):
    def __init__(self, counter: TokenCounter) -> None:
        super().__init__(counter)
        self.calls = 0

    def item(self, it: SectionItem) -> int:
        self.calls += 1
        return super().item(it)


def test_the_budget_trim_does_not_walk_the_kept_history() -> None:
    # Every gate closed: nothing is compacted, and each turn's build trims the whole history down to
    # the window by dropping its oldest rounds. The kept part is hundreds of messages; a turn should
    # measure what is new and the rounds it drops, not every kept message again (the old code summed
    # the kept history once more after each drop: measured items >= kept messages).
    counter = TokenCounter(CharTokenizer())
    pipe = Pipeline("deepseek-chat", "openai", 20_000, counter=counter, serve=False, clock=lambda: 0.0,
                    limits=OptimizeLimits.all_closed())
    m = CountingMeasure(counter)
    pipe.measure = m
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug.")
    per_turn = []
    kept = []
    for t in range(700):
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t})}])
        pipe.tool_result(calls[0].id, f"output of step {t}\n" * (3 + t % 7))
        before = m.calls
        req = pipe.next_request()
        per_turn.append(m.calls - before)
        hist = next(s for s in req.trace["sections"] if s["id"] == "history")
        kept.append(hist["items"])
    assert hist["form"] == "trimmed"
    assert kept[-1] > 300, kept[-1]  # a long kept history, trimmed every turn
    late = sorted(per_turn[-100:])
    # Most turns only drop rounds: a handful of lookups. On some (2 of 7 here) the total is still over
    # the ceiling after the section budgets and the squeeze pass reads the trimmed history's running
    # sums afresh (Measure.cumulative): that walk is left (BENCHMARKS.md, simulate, sim5).
    assert late[len(late) // 2] < kept[-1] // 4, (late, kept[-1])
    assert late[len(late) // 2] <= 20, late
