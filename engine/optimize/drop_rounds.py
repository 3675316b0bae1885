"""AggressivePrune: drop the oldest whole rounds; the fraction scales with pressure.

Only when at least four rounds are droppable. The task (round 0) and the newest round are never
droppable, and a round is dropped whole, so tool calls and their results leave together.
"""

from __future__ import annotations

from engine.artifacts import Message, Text
from engine.assembly import Assembly, history_rounds, omission_marker
from engine.optimize.context import OptimizeContext, RuleOutcome
from engine.types import Form, SectionKind

NAME = "drop_rounds"
MIN_DROPPABLE = 4
DROP_BATCH = 2


def drop_oldest(asm: Assembly, idx: int, count: int, ctx: OptimizeContext) -> tuple[Assembly, int]:
    """Drop `count` oldest droppable rounds of the history at asm[idx]; returns (asm, tokens saved)."""
    hist = asm[idx]
    rounds = history_rounds(hist.items)
    droppable = rounds[1:-1]
    if count <= 0 or not droppable:
        return asm, 0
    gone = droppable[:count]
    start, end = gone[0][0], gone[-1][1]
    removed = hist.items[start:end]
    saved = ctx.measure.items(removed)
    first = hist.items[0]
    marker = Text(omission_marker(saved, f"{len(gone)} earlier rounds dropped"))
    if isinstance(first, Message) and first.role == "user":
        # The marker rides on the task message so the sequence still alternates user/assistant.
        parts = tuple(p for p in first.parts if not (isinstance(p, Text) and p.text.startswith("[...")))
        prior = sum(
            ctx.measure.part(p) for p in first.parts if isinstance(p, Text) and p.text.startswith("[...")
        )
        new_first = Message("user", parts + (marker,))
        saved -= ctx.measure.item(new_first) - ctx.measure.item(first) + prior
        items = (new_first,) + hist.items[1:start] + hist.items[end:]
    else:
        items = hist.items[:start] + hist.items[end:]
    new_hist = hist.with_items(items, Form.TRIMMED, saved)
    return asm[:idx] + (new_hist,) + asm[idx + 1 :], saved


def apply(asm: Assembly, ctx: OptimizeContext) -> RuleOutcome:
    idx = next((i for i, s in enumerate(asm) if s.kind == SectionKind.HISTORY), None)
    if idx is None:
        return RuleOutcome(asm, False, "no history section")
    droppable = len(history_rounds(asm[idx].items)) - 2
    if droppable < MIN_DROPPABLE:
        return RuleOutcome(asm, False, f"only {max(0, droppable)} droppable rounds (< {MIN_DROPPABLE})")
    # Pressure 0.90 -> drop 25%, rising linearly to 75% at pressure 1.5 and above.
    p = ctx.plan.predictive_pressure
    frac = min(0.75, 0.25 + max(0.0, p - 0.9) * (0.5 / 0.6))
    # Quantized to whole batches so the drop boundary (and the cache break) moves rarely.
    count = max(DROP_BATCH, int(droppable * frac) // DROP_BATCH * DROP_BATCH)
    new, saved = drop_oldest(asm, idx, count, ctx)
    return RuleOutcome(new, True, f"dropped {count} of {droppable} droppable rounds", saved)
