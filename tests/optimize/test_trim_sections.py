"""trim_sections (engine/optimize/trim_sections.py): the budget guarantee, cut inside sections."""

from __future__ import annotations

from engine.artifacts import Text
from engine.optimize import trim_sections
from engine.types import Form
from tests.optimize.fixtures import MEASURE, ctx, history, identity, pairs_intact, rounds, text_section


def test_text_section_over_budget_keeps_head_and_tail_with_a_marker() -> None:
    body = "head " + "x" * 4000 + " tail"
    asm = (identity(), text_section("docs", body), history(rounds(1)))
    out = trim_sections.apply(asm, ctx(asm, budgets={"docs": 200}))
    assert out.changed
    docs = out.asm[1]
    assert docs.form == Form.TRIMMED and MEASURE.section(docs) <= 200
    text = docs.items[0]
    assert isinstance(text, Text) and text.text.startswith("head") and text.text.endswith("tail")
    assert "tokens omitted" in text.text


def test_history_over_budget_loses_oldest_whole_rounds() -> None:
    asm = (identity(), history(rounds(12, result_chars=400)))
    out = trim_sections.apply(asm, ctx(asm, budgets={"history": MEASURE.section(asm[1]) // 2}))
    assert out.changed
    assert MEASURE.section(out.asm[1]) <= MEASURE.section(asm[1]) // 2
    assert pairs_intact(out.asm[1].items)


def test_total_over_ceiling_is_squeezed_but_identity_never() -> None:
    asm = (identity("I" * 400), text_section("docs", "d" * 4000), history(rounds(2)))
    ceiling = MEASURE.total(asm) - 500
    out = trim_sections.apply(asm, ctx(asm, ceiling=ceiling))
    assert MEASURE.total(out.asm) <= ceiling
    assert out.asm[0] == asm[0]


def test_within_budget_is_not_needed() -> None:
    asm = (identity(), history(rounds(2)))
    out = trim_sections.apply(asm, ctx(asm))
    assert not out.changed and out.detail == "every section within budget"


def test_does_not_import_another_rule() -> None:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(trim_sections))
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    rules = {"align", "clear_results", "drop_rounds", "markers", "spill_large", "summarize", "trim_schemas"}
    assert not {f"engine.optimize.{r}" for r in rules} & mods
