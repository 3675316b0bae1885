"""reorder (engine/optimize/align.py): scope order, anchors first, history last, move limit."""

from __future__ import annotations

from engine.optimize import OptimizeLimits, align
from engine.types import CacheScope
from tests.optimize.fixtures import ctx, history, identity, rounds, text_section


def test_sections_move_into_scope_order_with_anchor_first_and_history_last() -> None:
    asm = (
        identity(),
        text_section("scratch", "x", CacheScope.NONE),
        text_section("repo_map", "y", CacheScope.GLOBAL),
        history(rounds(1)),
    )
    out = align.apply(asm, ctx(asm))
    assert out.changed
    assert [s.id for s in out.asm] == ["identity", "repo_map", "scratch", "history"]


def test_already_aligned_is_not_needed() -> None:
    asm = (identity(), text_section("a", "x", CacheScope.GLOBAL), history(rounds(1)))
    out = align.apply(asm, ctx(asm))
    assert not out.changed and out.detail == "already cache-aligned" and not out.reason_not_applied


def test_too_many_moves_is_skipped_with_a_reason() -> None:
    asm = (
        identity(),
        text_section("b", "x", CacheScope.NONE),
        text_section("a", "y", CacheScope.GLOBAL),
        history(rounds(1)),
    )
    out = align.apply(asm, ctx(asm, limits=OptimizeLimits(max_reorder_moves=1)))
    assert not out.changed
    assert "max_reorder_moves=1" in out.reason_not_applied
    assert out.asm is asm
