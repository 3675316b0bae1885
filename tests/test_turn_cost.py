"""A turn's work grows with what it sends and what is new, not with the length of the session.

No timing here (timing is benchmarks/bench_engine.py's job): the test counts how many items the
engine measures in one steady-state turn, after a short and after a ten times longer history, at the
same window. A turn that walked the whole history would measure every message every turn.
"""

from __future__ import annotations

import json

from engine.artifacts import SectionItem
from engine.assembly import Measure
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


def _items_measured_per_turn(history_rounds: int) -> tuple[int, int]:
    counter = TokenCounter(CharTokenizer())
    pipe = Pipeline("deepseek-chat", "openai", 6_000, counter=counter, serve=False, clock=lambda: 0.0)
    m = CountingMeasure(counter)
    pipe.measure = m
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug.")
    for t in range(history_rounds):
        _round(pipe, t)
        if t % 50 == 49:
            pipe.next_request()
            pipe.record_usage({"input_tokens": 1000, "output_tokens": 10})
    per_turn = []
    for t in range(history_rounds, history_rounds + 12):
        _round(pipe, t)
        before = m.calls
        pipe.next_request()
        pipe.record_usage({"input_tokens": 1000, "output_tokens": 10})
        per_turn.append(m.calls - before)
    return max(per_turn[4:]), len(pipe.history)


def test_turn_work_does_not_grow_with_session_length() -> None:
    short, short_len = _items_measured_per_turn(200)
    long, long_len = _items_measured_per_turn(2_000)
    assert long_len > 9 * short_len  # the long session really is ~10x longer
    # Same window, so about the same request: the work per turn must not follow the history.
    assert long <= 2 * short + 50, (short, long)
    assert long < long_len // 4, (long, long_len)
