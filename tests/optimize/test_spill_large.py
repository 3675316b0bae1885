"""spill (engine/optimize/spill_large.py): large content goes to the backend, a reference stays."""

from __future__ import annotations

from engine.artifacts import Message, SpillReference, ToolResult
from engine.optimize import OptimizeLimits, spill_large
from engine.spill import MemorySpill
from engine.types import Form
from tests.optimize.fixtures import ctx, history, identity, pairs_intact, rounds, text_section

LIMITS = OptimizeLimits(spill_threshold=100)


def test_large_tool_result_is_spilled_and_stays_paired() -> None:
    asm = (identity(), history(rounds(2, result_chars=2000)))
    c = ctx(asm, limits=LIMITS)
    out = spill_large.apply(asm, c)
    assert out.changed and out.tokens_saved > 0
    results = [p for m in out.asm[-1].items if isinstance(m, Message) for p in m.tool_results]
    assert [r.form for r in results] == ["spilled", "spilled"]
    assert pairs_intact(out.asm[-1].items)
    assert isinstance(c.spill, MemorySpill) and len(c.spill._data) == 2


def test_large_text_section_becomes_a_reference_identity_never() -> None:
    asm = (identity("I" * 2000), text_section("docs", "d" * 2000), history(rounds(1)))
    out = spill_large.apply(asm, ctx(asm, limits=LIMITS))
    assert out.asm[0] is asm[0]
    assert out.asm[1].form == Form.SPILLED and isinstance(out.asm[1].items[0], SpillReference)


def test_same_input_spills_identically_every_turn() -> None:
    # Spilling is decided by content alone, so a result spilled when it first appears is spilled the
    # same way on every later turn: the prefix the cache holds does not change.
    asm = (identity(), history(rounds(2, result_chars=2000)))
    a = spill_large.apply(asm, ctx(asm, limits=LIMITS))
    b = spill_large.apply(asm, ctx(asm, limits=LIMITS))
    assert [m.sha for m in a.asm[-1].items] == [m.sha for m in b.asm[-1].items]


def test_failed_write_keeps_content_and_says_why() -> None:
    asm = (identity(), history(rounds(1, result_chars=2000)))
    c = ctx(asm, limits=LIMITS)
    from engine.hashing import sha256_hex

    c.spill = MemorySpill(frozenset({sha256_hex("a" * 2000)}))
    out = spill_large.apply(asm, c)
    assert not out.changed and "spill backend failed" in out.reason_not_applied
    res = [
        p for m in out.asm[-1].items if isinstance(m, Message) for p in m.parts if isinstance(p, ToolResult)
    ]
    assert res[0].form == "full"


def test_nothing_over_threshold_is_not_needed() -> None:
    asm = (identity(), history(rounds(2, result_chars=40)))
    out = spill_large.apply(asm, ctx(asm, limits=LIMITS))
    assert not out.changed and "nothing over 100" in out.detail
