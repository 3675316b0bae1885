"""Plan: pressure, compaction tier and per-section budgets. Pure: no clock, no I/O, no randomness."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter

from engine.errors import ConfigError
from engine.tokens import Budget
from engine.trace_schema import TierReason
from engine.types import CacheScope, Priority, SectionKind, Tier

# Tier labels read from a dict: the enum's `label` property is a Python call each, three a plan.
TIER_LABELS = {t: t.label for t in Tier}


@dataclass(frozen=True)
class Thresholds:
    """Pressure levels (fractions of the usable window) at which each compaction tier starts."""
    trim_schemas: float = 0.60
    compact_history: float = 0.80
    aggressive_prune: float = 0.90

    def __post_init__(self) -> None:
        vals = (self.trim_schemas, self.compact_history, self.aggressive_prune)
        if not all(0.0 < v <= 10.0 for v in vals) or not (vals[0] <= vals[1] <= vals[2]):
            raise ConfigError(
                f"tier thresholds must be positive and ordered trim_schemas <= compact_history <= "
                f"aggressive_prune, got {vals}"
            )

    def tier_for(self, pressure: float) -> Tier:
        if pressure >= self.aggressive_prune:
            return Tier.AGGRESSIVE_PRUNE
        if pressure >= self.compact_history:
            return Tier.COMPACT_HISTORY
        if pressure > self.trim_schemas:
            return Tier.TRIM_SCHEMAS
        return Tier.NORMAL

    def to_dict(self) -> dict[str, float]:
        return {
            "trim_schemas": self.trim_schemas,
            "compact_history": self.compact_history,
            "aggressive_prune": self.aggressive_prune,
        }


@dataclass(frozen=True)
class SectionEstimate:
    """What the planner knows about a section before this turn's optimize."""

    id: str
    name: str
    kind: SectionKind
    scope: CacheScope
    priority: Priority
    tokens: int
    max_tokens: int | None = None


@dataclass(frozen=True, init=False)
class Reserves:
    """Tokens kept free in the window for the reply, thinking and tool schemas."""
    response: int
    thinking: int
    schema: int
    percentile: int = 75

    def __init__(self, response: int, thinking: int, schema: int, percentile: int = 75) -> None:
        # Stored into the instance's dict (see engine.artifacts.Text.__init__): every turn makes one.
        d = self.__dict__
        d["response"] = response
        d["thinking"] = thinking
        d["schema"] = schema
        d["percentile"] = percentile

    @property
    def total(self) -> int:
        return self.response + self.thinking + self.schema


@dataclass(frozen=True)
class PlanInput:
    """Everything plan_of reads: the window's limit, thresholds, reserves and each section's estimate."""
    limit: int
    usable: int  # limit minus the margin
    thresholds: Thresholds
    reserves: Reserves
    sections: tuple[SectionEstimate, ...]
    recovering: bool = False


@dataclass(frozen=True, init=False)
class Plan:
    """The planner's answer for one turn: pressure, tier and why, the ceiling and each section's budget."""
    raw_pressure: float
    predictive_pressure: float
    tier: Tier
    raw_tier: Tier
    predictive_tier: Tier
    recovery_escalated: bool
    reason: str
    ceiling: int  # the most tokens the final request may hold
    estimated_tokens: int
    budgets: dict[str, int] = field(default_factory=dict)

    def __init__(
        self,
        raw_pressure: float,
        predictive_pressure: float,
        tier: Tier,
        raw_tier: Tier,
        predictive_tier: Tier,
        recovery_escalated: bool,
        reason: str,
        ceiling: int,
        estimated_tokens: int,
        budgets: dict[str, int] | None = None,
    ) -> None:
        # Stored into the instance's dict (see Reserves.__init__): the generated frozen __init__ sets ten
        # fields through object.__setattr__ one by one, and every build plans once or twice a column.
        d = self.__dict__
        d["raw_pressure"] = raw_pressure
        d["predictive_pressure"] = predictive_pressure
        d["tier"] = tier
        d["raw_tier"] = raw_tier
        d["predictive_tier"] = predictive_tier
        d["recovery_escalated"] = recovery_escalated
        d["reason"] = reason
        d["ceiling"] = ceiling
        d["estimated_tokens"] = estimated_tokens
        d["budgets"] = {} if budgets is None else budgets

    def tier_reason(self) -> TierReason:
        return {
            "raw": TIER_LABELS[self.raw_tier],
            "predictive": TIER_LABELS[self.predictive_tier],
            "recovery": self.recovery_escalated,
            "text": self.reason,
        }


@lru_cache(maxsize=32, typed=True)
def budget_of(window: int, margin: float) -> Budget:
    """The Budget of a config's window and margin. `PipelineConfig.budget` builds and validates a new
    one on every read, and the planner and the trace read it every turn of a session whose window and
    margin rarely change; a Budget is immutable and a pure function of the two (typed: 0 and 0.0 are
    kept apart, so a memo never answers with another type's figures)."""
    return Budget(window, margin)


def pressures(total: int, limit: int, reserve: int) -> tuple[float, float]:
    """(raw T/L, predictive T/(L-R)); a zero or invalid limit saturates to 1.0."""
    if limit <= 0:
        return 1.0, 1.0
    raw = total / limit
    room = limit - reserve
    predictive = 1.0 if room <= 0 else max(raw, total / room)
    return raw, predictive


def history_pressure(raw_tokens: int, window: int, ratio: float) -> float:
    """The trace's `raw_history`: the whole uncompacted history's tokens over the window as the engine's
    tokenizer sees it, the denominator `raw` pressure has (Pipeline._plan: the window over the learned
    calibration ratio), so the two compare. Over the bare window it read lower than `raw` by the ratio
    (1.06 on the demo recording, up to 2.0), and a 'uncompacted' pressure beside a compacted one was
    on another scale."""
    return round(pressures(raw_tokens, int(window / ratio), 0)[0], 4)


def ceiling_for(usable: int, reserve: int) -> int:
    # The response reserve comes off the window, but never more than half of it: an absurd observed
    # completion length must not starve the prompt to nothing.
    return max(0, usable - min(reserve, usable // 2))


def _water_fill(sizes: list[int], cut: int) -> list[int]:
    """Lower a common cap until `cut` tokens are freed: the largest sections give first, and a small
    section is only touched once the big ones are down to its size (max-min fair). Deterministic:
    leftovers from integer rounding go to the earliest largest sections."""
    total = sum(sizes)
    target = max(0, total - cut)
    if target >= total:
        return list(sizes)
    ordered = sorted(sizes)
    level, remaining, n = 0, target, len(ordered)
    for i, size in enumerate(ordered):
        share = remaining // (n - i)
        if size <= share:
            remaining -= size
            continue
        level = share
        break
    else:
        return list(sizes)
    capped = [min(size, level) for size in sizes]
    spare = target - sum(capped)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        if spare <= 0:
            break
        if sizes[i] > capped[i]:
            capped[i] += 1
            spare -= 1
    return capped


def allocate(sections: tuple[SectionEstimate, ...], ceiling: int) -> dict[str, int]:
    """Per-section budgets: everyone gets what they need if it fits; otherwise sections give up tokens
    in compression-priority order (First, then Normal, then LastResort), and within a priority the
    largest give first (water-filling), so a large history shrinks before a small memory section is
    touched. Never sections and the goal keep their size."""
    budgets = {s.id: s.tokens if s.max_tokens is None else min(s.tokens, s.max_tokens) for s in sections}
    excess = sum(budgets.values()) - ceiling
    if excess <= 0:  # everything fits (most turns of a compacting policy)
        return budgets
    goal = SectionKind.GOAL
    for prio in _GIVING_ORDER:
        group = [s.id for s in sections if s.priority == prio and s.kind != goal]
        if not group:  # (what the general step below does with none: cuts nothing)
            continue
        if len(group) == 1 and budgets[group[0]] >= 0:
            # One section gives alone: what _water_fill([size], cut) frees, without sorting a list of
            # one (a long session's gates-closed plan cuts its one Normal section, the history, every turn).
            sid = group[0]
            size = budgets[sid]
            cut = min(excess, size)
            budgets[sid] = size - cut
        else:
            sizes = [budgets[sid] for sid in group]
            cut = min(excess, sum(sizes))
            for sid, new in zip(group, _water_fill(sizes, cut), strict=True):
                budgets[sid] = new
        excess -= cut
        if excess <= 0:
            break
    return budgets


# Compression-priority order: the sections that give up tokens first come first.
_GIVING_ORDER = (Priority.FIRST, Priority.NORMAL, Priority.LAST_RESORT)


_TOKENS = attrgetter("tokens")


def plan(inp: PlanInput) -> Plan:
    return plan_of(inp.limit, inp.usable, inp.thresholds, inp.reserves, inp.sections, inp.recovering)


def plan_of(
    limit: int,
    usable: int,
    thresholds: Thresholds,
    reserves: Reserves,
    sections: tuple[SectionEstimate, ...],
    recovering: bool = False,
) -> Plan:
    """plan() of the PlanInput these fields make, without making it (the pipeline plans every turn)."""
    total = sum(map(_TOKENS, sections))  # in C: a generator is a Python frame per section
    reserve = reserves.response + reserves.thinking + reserves.schema  # reserves.total, read once
    raw, pred = pressures(total, limit, reserve)
    raw_tier = thresholds.tier_for(raw)
    pred_tier = thresholds.tier_for(pred)
    tier = max(raw_tier, pred_tier)  # prediction only escalates
    reason = (
        f"predictive pressure {pred:.2f} -> {TIER_LABELS[pred_tier]}"
        if pred_tier > raw_tier
        else f"raw pressure {raw:.2f} -> {TIER_LABELS[raw_tier]}"
    )
    escalated = False
    if recovering and tier < Tier.AGGRESSIVE_PRUNE:
        tier = Tier(tier + 1)
        escalated = True
        reason += f"; escalated to {tier.label} after a prompt_too_long"
    ceiling = ceiling_for(usable, reserve)
    # Positional, in field order (raw_pressure, predictive_pressure, tier, raw_tier, predictive_tier,
    # recovery_escalated, reason, ceiling, estimated_tokens, budgets): ten keywords matched by name
    # cost ~0.3 us a plan, every turn.
    return Plan(raw, pred, tier, raw_tier, pred_tier, escalated, reason, ceiling, total, allocate(sections, ceiling))
