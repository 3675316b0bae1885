"""Optimize: one pure rule per module, applied in this fixed order, each behind its gate.

Adding, removing or reordering a rule is a one-line change to RULES. The fold records every rule in
the trace: applied, not needed, or skipped (a closed gate, with the tokens it would have saved).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from engine.assembly import Assembly
from engine.optimize import (
    align,
    clear_results,
    drop_rounds,
    markers,
    spill_large,
    summarize,
    trim_schemas,
    trim_sections,
)
from engine.optimize.context import Marker, OptimizeContext, OptimizeLimits, RuleOutcome, Summarizer
from engine.types import Tier

__all__ = [
    "OptimizeContext",
    "OptimizeLimits",
    "Marker",
    "Summarizer",
    "Rule",
    "RULES",
    "optimize",
    "not_needed",
    "OptimizeResult",
]


@dataclass(frozen=True)
class Rule:
    """One optimization rule: its function, the gate that opens it (None: always on) and the lowest tier it runs at."""
    name: str
    fn: Callable[[Assembly, OptimizeContext], RuleOutcome]
    gate: str | None  # attribute of OptimizeLimits; None = always on (the budget guarantee, markers)
    min_tier: Tier = Tier.NORMAL


RULES: tuple[Rule, ...] = (
    Rule(align.NAME, align.apply, "reorder"),
    Rule(trim_schemas.NAME, trim_schemas.apply, "trim_schemas", Tier.TRIM_SCHEMAS),
    Rule(clear_results.NAME, clear_results.apply, "clear_tool_results", Tier.COMPACT_HISTORY),
    Rule(spill_large.NAME, spill_large.apply, "spill"),
    Rule(summarize.NAME, summarize.apply, "llm_summary", Tier.COMPACT_HISTORY),
    Rule(drop_rounds.NAME, drop_rounds.apply, "drop_rounds", Tier.AGGRESSIVE_PRUNE),
    Rule(trim_sections.NAME, trim_sections.apply, None),
    Rule(markers.NAME, markers.apply, None),
)


@dataclass
class OptimizeResult:
    """What Optimize made of an assembly: the result, every rule's step, the actions taken and skipped, the
    cache markers."""
    asm: Assembly
    steps: list[dict[str, object]] = field(default_factory=list)  # every rule, in order, with its status
    actions: list[dict[str, object]] = field(default_factory=list)
    skipped: list[dict[str, object]] = field(default_factory=list)
    markers: tuple[Marker, ...] = ()


def not_needed(rule: str, reason: str) -> dict[str, object]:
    """A trace step for a rule that had nothing to do (a caller that knows a rule's outcome without
    running it records it with this, in the same form)."""
    return {"step": rule, "status": "not_needed", "reason": reason}


def optimize(asm: Assembly, ctx: OptimizeContext, rules: Sequence[Rule] = RULES) -> OptimizeResult:
    """Fold `rules` (default RULES) over the assembly, in order, each behind its gate and min tier.

    A caller (a what-if, a peer policy, a test) passes its own list the way sqlglot's
    `optimize(expression, rules=RULES)` does; the rules do not know about each other."""
    res = OptimizeResult(asm)
    for rule in rules:
        if ctx.tier < rule.min_tier:
            res.steps.append(not_needed(rule.name, f"tier {ctx.tier.label} < {rule.min_tier.label}"))
            continue
        gate_open = rule.gate is None or bool(getattr(ctx.limits, rule.gate))
        if not gate_open:
            # Measure what the closed gate costs, without side effects, so the trace can say so.
            dry = replace(ctx, dry_run=True, spill_failures=[])
            out = rule.fn(res.asm, dry)
            rec = {"step": rule.name, "reason": f"gate {rule.gate} is off", "tokens_saved": out.tokens_saved}
            res.skipped.append(rec)
            res.steps.append({**rec, "status": "skipped"})
            continue
        out = rule.fn(res.asm, ctx)
        if out.markers:
            res.markers = out.markers
        if out.changed:
            res.asm = out.asm
            rec = {"step": rule.name, "detail": out.detail, "tokens_saved": out.tokens_saved}
            res.actions.append(rec)
            res.steps.append({**rec, "status": "applied"})
        elif out.reason_not_applied:
            rec = {"step": rule.name, "reason": out.reason_not_applied, "tokens_saved": out.tokens_saved}
            res.skipped.append(rec)
            res.steps.append({**rec, "status": "skipped"})
        else:
            res.steps.append(not_needed(rule.name, out.detail))
    return res
