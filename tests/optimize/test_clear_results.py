"""clear_tool_results (engine/optimize/clear_results.py): oldest results become placeholders."""

from __future__ import annotations

from engine.artifacts import Message, ToolResult
from engine.optimize import OptimizeLimits, clear_results
from engine.types import Tier
from tests.optimize.fixtures import ctx, history, identity, pairs_intact, rounds


def _results(asm: tuple) -> list[ToolResult]:  # type: ignore[type-arg]
    return [p for m in asm[-1].items if isinstance(m, Message) for p in m.tool_results]


def test_clears_oldest_in_batches_keeping_recent_and_pairing() -> None:
    asm = (identity(), history(rounds(10, result_chars=800)))
    out = clear_results.apply(asm, ctx(asm, Tier.COMPACT_HISTORY))
    assert out.changed
    forms = [r.form for r in _results(out.asm)]
    # 10 results, keep 3 recent -> 7 candidates, cleared in batches of 4 -> the oldest 4.
    assert forms == ["cleared"] * 4 + ["full"] * 6
    assert out.tokens_saved > 0
    assert pairs_intact(out.asm[-1].items)
    assert all(r.call_id == f"c{k}" for k, r in enumerate(_results(out.asm)))


def test_small_results_are_not_worth_clearing() -> None:
    asm = (identity(), history(rounds(10, result_chars=20)))
    out = clear_results.apply(asm, ctx(asm, Tier.COMPACT_HISTORY))
    assert not out.changed and not out.reason_not_applied


def test_circuit_breaker_is_reported() -> None:
    asm = (identity(), history(rounds(10, result_chars=800)))
    out = clear_results.apply(asm, ctx(asm, Tier.COMPACT_HISTORY, limits=OptimizeLimits(max_clear_tokens=10)))
    assert not out.changed
    assert "max_clear_tokens=10" in out.reason_not_applied
