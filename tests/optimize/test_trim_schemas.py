"""trim_schemas (engine/optimize/trim_schemas.py): drop schemas never called in the kept history."""

from __future__ import annotations

from engine.artifacts import ToolSchema
from engine.optimize import trim_schemas
from engine.types import Form, Tier
from tests.optimize.fixtures import MEASURE, ctx, history, identity, rounds, tools


def test_unused_schemas_are_dropped_and_saving_counted() -> None:
    asm = (identity(), tools("bash", "edit", "search"), history(rounds(2, tool="bash")))
    out = trim_schemas.apply(asm, ctx(asm, Tier.TRIM_SCHEMAS))
    assert out.changed
    kept = [i.name for i in out.asm[1].items if isinstance(i, ToolSchema)]
    assert kept == ["bash"]
    assert out.asm[1].form == Form.TRIMMED
    assert out.tokens_saved == MEASURE.items(asm[1].items[1:])
    assert "edit" in out.detail and "search" in out.detail


def test_no_calls_yet_keeps_every_schema() -> None:
    asm = (identity(), tools("bash", "edit"), history(rounds(0)))
    out = trim_schemas.apply(asm, ctx(asm, Tier.TRIM_SCHEMAS))
    assert not out.changed and out.asm is asm


def test_every_schema_used_is_not_needed() -> None:
    asm = (identity(), tools("bash"), history(rounds(3)))
    out = trim_schemas.apply(asm, ctx(asm, Tier.TRIM_SCHEMAS))
    assert not out.changed and out.detail == "every schema is in use"
