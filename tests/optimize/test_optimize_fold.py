"""optimize(asm, ctx, rules=...): the fold takes its rule list, records every rule, respects gates."""

from __future__ import annotations

from engine.optimize import RULES, OptimizeLimits, Rule, optimize
from engine.optimize import align as align_rule
from engine.optimize import trim_schemas as trim_schemas_rule
from engine.types import CacheScope, Tier
from tests.optimize.fixtures import ctx, history, identity, rounds, text_section, tools


def test_custom_rule_list_runs_only_those_rules() -> None:
    asm = (identity(), text_section("b", "x", CacheScope.NONE), text_section("a", "y", CacheScope.GLOBAL))
    only = (Rule(align_rule.NAME, align_rule.apply, "reorder"),)
    res = optimize(asm, ctx(asm), rules=only)
    assert [s["step"] for s in res.steps] == ["reorder"]
    assert [s.id for s in res.asm] == ["identity", "a", "b"]


def test_default_is_RULES_in_order() -> None:
    asm = (identity(), history(rounds(2)))
    res = optimize(asm, ctx(asm))
    assert [s["step"] for s in res.steps] == [r.name for r in RULES]


def test_closed_gate_is_measured_dry_and_reported() -> None:
    asm = (identity(), tools("bash", "edit"), history(rounds(2)))
    rules = (Rule(trim_schemas_rule.NAME, trim_schemas_rule.apply, "trim_schemas", Tier.TRIM_SCHEMAS),)
    res = optimize(asm, ctx(asm, Tier.TRIM_SCHEMAS, limits=OptimizeLimits(trim_schemas=False)), rules=rules)
    assert res.asm is asm
    assert res.skipped and res.skipped[0]["reason"] == "gate trim_schemas is off"
    assert int(res.skipped[0]["tokens_saved"]) > 0  # type: ignore[call-overload]


def test_tier_below_min_is_not_needed() -> None:
    asm = (identity(), tools("bash", "edit"), history(rounds(2)))
    rules = (Rule(trim_schemas_rule.NAME, trim_schemas_rule.apply, "trim_schemas", Tier.TRIM_SCHEMAS),)
    res = optimize(asm, ctx(asm, Tier.NORMAL), rules=rules)
    assert res.steps[0]["status"] == "not_needed" and res.asm is asm


def test_no_rule_imports_another_rule() -> None:
    """Rules are independent: shared code lives in helper modules (history_ops, context), never in a rule."""
    import ast
    import importlib
    import inspect

    rule_modules = {r.fn.__module__ for r in RULES}
    for mod_name in rule_modules:
        tree = ast.parse(inspect.getsource(importlib.import_module(mod_name)))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not (imported & (rule_modules - {mod_name})), (mod_name, imported & rule_modules)
