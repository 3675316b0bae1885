"""clear_tool_results builds a turn's cleared history from the last one when it can (Measure.cleared_before).

Wave 1 clears the oldest tool results of the whole raw history every turn. The cleared history was a list
of the whole conversation, patched, then a tuple of it: three passes over every message a turn. When this
turn's raw history only appended to the one last cleared, and the same places are cleared within it, the
cleared history is the last one plus what was appended (cleared where the clearing reaches past it). The
result must be what clearing the raw history afresh makes: held here against a fresh Measure, turn by
turn, over histories with small results (not worth clearing), messages holding two results, breakers
that trip and batches that move the boundary."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.optimize import OptimizeLimits, clear_results
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import Tier
from tests.optimize.fixtures import ctx, history, identity


def _measure() -> Measure:
    return Measure(TokenCounter(CharTokenizer()))


def _round(k: int, sizes: list[int]) -> tuple[Message, Message]:
    calls = tuple(ToolCall(f"c{k}.{i}", "bash", "{}") for i in range(len(sizes)))
    results = tuple(ToolResult(f"c{k}.{i}", chr(97 + (k + i) % 26) * n) for i, n in enumerate(sizes))
    return Message("assistant", calls), Message("user", results)


def _apply(m: Measure, items: tuple[Any, ...], limits: OptimizeLimits) -> tuple[Any, ...]:
    asm = (identity(), history(items))
    c = ctx(asm, Tier.COMPACT_HISTORY, limits=limits)
    c.measure = m
    out = clear_results.apply(asm, c)
    return (out.asm[-1].items, out.changed, out.detail, out.tokens_saved, out.reason_not_applied)


_SIZES = st.lists(st.sampled_from([10, 300, 800, 2_000]), min_size=1, max_size=2)


@settings(max_examples=60, deadline=None)
@given(
    turns=st.lists(st.lists(_SIZES, min_size=0, max_size=3), min_size=2, max_size=14),
    breakers=st.lists(st.sampled_from([600, 4_000, 10**9]), min_size=1, max_size=3),
    keep=st.sampled_from([1, 3]),
)
def test_a_carried_cleared_history_is_the_fresh_one(
    turns: list[list[list[int]]], breakers: list[int], keep: int
) -> None:
    m = _measure()
    items: tuple[Any, ...] = (Message("user", (Text("Fix the failing test."),)),)
    k = 0
    for t, appended in enumerate(turns):
        for sizes in appended:
            items += _round(k, sizes)
            k += 1
        limits = OptimizeLimits(max_clear_tokens=breakers[t % len(breakers)], keep_recent_results=keep)
        got = _apply(m, items, limits)
        assert got == _apply(_measure(), items, limits)


def test_an_append_only_turn_takes_the_carried_path(monkeypatch: Any) -> None:
    # The breaker trips at the same results every turn (the oldest ones): each turn's cleared history is
    # the last one plus what was appended.
    taken: list[bool] = []
    real = Measure.cleared_before

    def spy(self: Measure, like: tuple[Any, ...], at: Any) -> Any:
        got = real(self, like, at)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(Measure, "cleared_before", spy)
    m = _measure()
    items: tuple[Any, ...] = (Message("user", (Text("Fix the failing test."),)),)
    for k in range(12):
        items += _round(k, [800])
    limits = OptimizeLimits(max_clear_tokens=1_000, keep_recent_results=3)
    prev: tuple[Any, ...] = ()
    for k in range(12, 30):
        items += _round(k, [800])
        got = _apply(m, items, limits)[0]
        assert got == _apply(_measure(), items, limits)[0]
        if prev:
            assert got[: len(prev)] == prev
            assert all(a is b for a, b in zip(got, prev, strict=False))  # the last one's very objects
        prev = got
    # clear_tool_results asks once and cleared_from once a turn; every turn after the first is carried.
    assert taken.count(True) >= 2 * 16, taken
