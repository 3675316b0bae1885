"""Cache markers at scope boundaries, per the provider's policy.

Candidates, in wire order (tools first for marker providers, then system sections, then messages):
the end of the tools, each scope boundary inside the system prompt, the end of the system prompt and
the newest message. Prefix-only providers get none. In a turn where a latch flipped, the None-scope
(conversation tail) marker is suppressed: the prefix it would write is about to change anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.assembly import Assembly, wire_order
from engine.optimize.context import Marker, OptimizeContext, RuleOutcome
from engine.providers.policy import ProviderCachePolicy
from engine.types import CacheScope, SectionKind

NAME = "place_markers"


def automatic(pol: ProviderCachePolicy) -> str | None:
    """Why no marker is placed whatever the assembly (a provider that caches prefixes by itself), or
    None: then apply's outcome depends on the sections, and a caller that knows this one may record it
    as a not-needed step without running the rule (cost_aware.run does)."""
    if not pol.supports_markers or pol.max_markers <= 0:
        return f"{pol.name} caches prefixes automatically: no markers"
    return None


def apply(asm: Assembly, ctx: OptimizeContext) -> RuleOutcome:
    pol = ctx.policy
    auto = automatic(pol)
    if auto is not None:
        return RuleOutcome(asm, False, auto)
    m = ctx.measure
    wire = [s for s in wire_order(asm) if s.items]
    # (rank, marker): lower rank is kept first when there are more candidates than the policy allows.
    cands: list[tuple[int, int, Marker]] = []
    cum = 0
    suppressed = ""
    for k, s in enumerate(wire):
        cum += m.section(s)
        nxt = wire[k + 1] if k + 1 < len(wire) else None
        last = len(s.items) - 1
        if s.kind == SectionKind.HISTORY:
            if ctx.latch_flipped:
                suppressed = "conversation-tail marker suppressed: a latch flipped this turn"
                continue
            cands.append((0, cum, Marker(s.id, last, s.scope.label, "conversation tail")))
            continue
        if s.kind == SectionKind.TOOLS:
            cands.append((2, cum, Marker(s.id, last, s.scope.label, "end of tools")))
            continue
        if nxt is None or nxt.kind == SectionKind.HISTORY:
            cands.append((1, cum, Marker(s.id, last, s.scope.label, "end of system prompt")))
        elif nxt.scope != s.scope:
            if s.scope == CacheScope.GLOBAL and not pol.global_scope:
                continue
            cands.append((3, cum, Marker(s.id, last, s.scope.label, f"{s.scope.label} scope boundary")))
    # Fewer markers than the policy allows: each reason the rule left one out goes into the step's
    # detail (after the count, "; "-separated), so the trace says why, not only "0 markers".
    why = [suppressed] if suppressed else []
    least = pol.min_cacheable_tokens
    short = [c for c in cands if c[1] < least]
    if short:
        cands = [c for c in cands if c[1] >= least]
        where = ", ".join(f"{c[2].reason} at {c[1]}" for c in short)
        lead = "no prefix reaches" if not cands else f"{len(short)} prefix(es) under"
        why.append(f"{lead} the model's {least}-token minimum cacheable prefix ({where})")
    kept = sorted(cands, key=lambda c: (c[0], c[1]))[: pol.max_markers]
    kept.sort(key=lambda c: c[1])
    markers = tuple(c[2] for c in kept)
    detail = "; ".join([f"{len(markers)} markers", *why])
    if not markers:
        return RuleOutcome(asm, False, detail)
    return RuleOutcome(asm, True, detail, markers=markers)


def recount(steps: Iterable[dict[str, Any]], actions: Iterable[dict[str, Any]], n: int) -> None:
    """Set the marker count in this rule's step and action details to `n`, what the request carries once a
    caller added a marker of its own (cost_aware's on the task); the reasons after the count stay."""
    for rec in (*steps, *actions):
        if rec.get("step") == NAME and isinstance(rec.get("detail"), str):
            count, sep, rest = rec["detail"].partition("; ")
            if count.split(" ")[0].isdigit():
                rec["detail"] = f"{n} markers{sep}{rest}"


def note_of(steps: Iterable[Mapping[str, Any]]) -> str:
    """Why a trace's place_markers step placed fewer markers than its provider allows (what follows the
    count in its detail or reason), or "": for the trace's readers (explain, the cache layout)."""
    for s in steps:
        if s.get("step") == NAME:
            text = str(s.get("detail") or s.get("reason") or "")
            count, sep, rest = text.partition("; ")
            # A provider that caches by itself (automatic) has no count: its whole text is the note.
            return rest if sep else ("" if count.split(" ")[0].isdigit() else text)
    return ""
