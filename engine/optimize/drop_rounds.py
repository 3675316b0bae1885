"""AggressivePrune: drop the oldest whole rounds; the fraction scales with pressure.

Only when at least four rounds are droppable. The task (round 0) and the newest round are never
droppable, and a round is dropped whole, so tool calls and their results leave together.
"""

from __future__ import annotations

from engine.assembly import Assembly
from engine.optimize.context import OptimizeContext, RuleOutcome
from engine.optimize.history_ops import drop_oldest, history_index

NAME = "drop_rounds"
MIN_DROPPABLE = 4
DROP_BATCH = 2


def rounds_to_drop(droppable: int, pressure: float) -> int:
    """How many of `droppable` (>= MIN_DROPPABLE) oldest rounds the rule drops at this predictive
    pressure (simulate's wave-1 lane, engine/sim/wave1_lane.py, asks it too)."""
    # Pressure 0.90 -> drop 25%, rising linearly to 75% at pressure 1.5 and above.
    frac = min(0.75, 0.25 + max(0.0, pressure - 0.9) * (0.5 / 0.6))
    # Quantized to whole batches so the drop boundary (and the cache break) moves rarely.
    return max(DROP_BATCH, int(droppable * frac) // DROP_BATCH * DROP_BATCH)


def apply(asm: Assembly, ctx: OptimizeContext) -> RuleOutcome:
    idx = history_index(asm)
    if idx is None:
        return RuleOutcome(asm, False, "no history section")
    droppable = len(ctx.measure.rounds(asm[idx].items)) - 2
    if droppable < MIN_DROPPABLE:
        return RuleOutcome(asm, False, f"only {max(0, droppable)} droppable rounds (< {MIN_DROPPABLE})")
    count = rounds_to_drop(droppable, ctx.plan.predictive_pressure)
    new, saved = drop_oldest(asm, idx, count, ctx.measure)
    return RuleOutcome(new, True, f"dropped {count} of {droppable} droppable rounds", saved)
