"""A turn's work grows with what it sends and what is new, not with the length of the session.

No timing here (timing is benchmarks/bench_engine.py's job): the test counts how many items the
engine measures in one steady-state turn, after a short and after a ten times longer history, at the
same window. A turn that walked the whole history would measure every message every turn. Likewise
for memory: the caches a pipeline carries between turns (Pipeline.cache_sizes()) stay bounded by what
recent requests sent, however long the session.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, SectionItem, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.history_rounds import history_rounds
from engine.optimize.context import OptimizeLimits
from engine.optimize.history_ops import oldest_to_drop
from engine.pipeline import Pipeline
from engine.tokens import CharTokenizer, TokenCounter


class CountingMeasure(Measure):
    def __init__(self, counter: TokenCounter) -> None:
        super().__init__(counter)
        self.calls = 0

    def item(self, it: SectionItem) -> int:
        self.calls += 1
        return super().item(it)


def _round(pipe: Pipeline, t: int) -> None:
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t})}])
    pipe.tool_result(calls[0].id, f"output of step {t}\n" * (3 + t % 7))


def _items_measured_per_turn(rounds: int, limits: OptimizeLimits | None = None) -> tuple[int, int]:
    counter = TokenCounter(CharTokenizer())
    pipe = Pipeline(
        "deepseek-chat", "openai", 3_000, counter=counter, serve=False, clock=lambda: 0.0, limits=limits
    )
    m = CountingMeasure(counter)
    pipe.measure = m
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug.")
    for t in range(rounds):
        _round(pipe, t)
        if t % 50 == 49:
            pipe.next_request()
            pipe.record_usage({"input_tokens": 1000, "output_tokens": 10})
    per_turn = []
    for t in range(rounds, rounds + 12):
        _round(pipe, t)
        before = m.calls
        pipe.next_request()
        pipe.record_usage({"input_tokens": 1000, "output_tokens": 10})
        per_turn.append(m.calls - before)
    return max(per_turn[4:]), len(pipe.history)


@pytest.mark.parametrize("limits", [None, OptimizeLimits.all_closed()], ids=["default", "gates_closed"])
def test_turn_work_does_not_grow_with_session_length(limits: OptimizeLimits | None) -> None:
    # With every gate closed nothing is compacted: the budget guarantee trims the whole (growing)
    # history every turn, and must still only walk the rounds it keeps.
    short, short_len = _items_measured_per_turn(300, limits)
    long, long_len = _items_measured_per_turn(3_000, limits)
    assert long_len > 9 * short_len  # the long session really is ~10x longer
    # Same window, so about the same request: the work per turn must not follow the history.
    assert long <= 2 * short + 50, (short, long)
    assert long < long_len // 4, (long, long_len)


def _forward(sizes: list[int], need: int, at_least_one: bool) -> tuple[int, int]:
    """The obvious oldest-first walk oldest_to_drop must agree with."""
    if not sizes or (need <= 0 and not at_least_one):
        return 0, 0
    acc = 0
    for c, t in enumerate(sizes, 1):
        acc += t
        if acc >= need:
            return c, acc
    return len(sizes), acc


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 40), min_size=0, max_size=12),
    st.integers(-50, 600),
    st.booleans(),
    st.booleans(),
)
def test_oldest_to_drop_matches_the_forward_walk(
    lens: list[int], need: int, at_least_one: bool, task_first: bool
) -> None:
    m = Measure(TokenCounter(CharTokenizer()))
    items: list[SectionItem] = [Message("user", (Text("the task"),))] if task_first else []
    for k, n in enumerate(lens):
        items.append(Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)))
        items.append(Message("user", (ToolResult(f"c{k}", "x" * (4 * n)),)))
    tup = tuple(items)
    droppable = history_rounds(tup)[1:-1]
    sizes = [m.items(tup[s:e]) for s, e in droppable]
    got = oldest_to_drop(tup, droppable, m.items(tup), need, m, at_least_one)
    assert got == _forward(sizes, need, at_least_one)


def test_per_turn_caches_do_not_grow_with_the_session() -> None:
    # Memory the engine keeps for speed must follow the live window, not the session: a memo that
    # pinned every turn's full-history tuple (1,024 of them) once grew RSS by megabytes per 100 turns.
    counter = TokenCounter(CharTokenizer())
    pipe = Pipeline("deepseek-chat", "openai", 3_000, counter=counter, serve=False, clock=lambda: 0.0)
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug.")
    sizes = []
    sent = 0  # items in the longest history section sent lately
    for t in range(2_400):
        _round(pipe, t)
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": 1000, "output_tokens": 10})
        if t >= 2_300:
            sent = max(sent, req.trace["sections"][-1]["items"])
        if t in (599, 2_399):
            sizes.append(pipe.cache_sizes())
    early, late = sizes
    assert len(pipe.history) > 4_000 and sent < 500
    for name, n in late.items():
        if name == "measure longest item tuple held":
            # About what was sent lately (a turn also measures the history before its cut), never
            # the 4,800-message conversation.
            assert n <= 2 * sent, (name, n, sent)
        else:
            # Entries: a few turns' worth, about as many as at turn 600 (give or take a prune).
            assert n <= max(2 * early[name], 64) and n < 1_000, (name, early[name], n)
