"""Cache alignment: order reorderable sections by scope volatility so the stable prefix is longest.

Stable sort Global < Session < None, ties by section id. Anchors stay first and history stays last
(every provider sends messages after the system prompt). Adopted only within max_reorder_moves.
"""

from __future__ import annotations

from engine.optimize.context import OptimizeContext, RuleOutcome
from engine.types import SectionKind
from engine.wording import counted

NAME = "reorder"


def apply(asm, ctx: OptimizeContext) -> RuleOutcome:  # type: ignore[no-untyped-def]
    anchors = [s for s in asm if s.is_anchor]
    history = [s for s in asm if s.kind == SectionKind.HISTORY]
    middle = [s for s in asm if not s.is_anchor and s.kind != SectionKind.HISTORY]
    ordered = sorted(middle, key=lambda s: (int(s.scope), s.id))
    new = tuple(anchors + ordered + history)
    moves = sum(1 for a, b in zip(asm, new, strict=True) if a.id != b.id)
    if moves == 0:
        return RuleOutcome(asm, False, "already cache-aligned")
    if moves > ctx.limits.max_reorder_moves:
        return RuleOutcome(
            asm,
            False,
            "",
            reason_not_applied=f"{moves} moves exceed max_reorder_moves={ctx.limits.max_reorder_moves}",
        )
    return RuleOutcome(new, True, f"moved {counted(moves, 'section')} into scope order")
