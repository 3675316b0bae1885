"""Spill: content over the spill threshold goes to the spill backend and leaves a SpillReference.

Applies to whole non-history sections and to single tool results. The backend write happens first;
only a successful write replaces the content (a failed write keeps the content and is traced).
Identity, Constraints and working memory are never spilled.
"""

from __future__ import annotations

from dataclasses import replace

from engine.artifacts import Message, SpillReference, Text, ToolResult
from engine.assembly import Assembly, Section
from engine.hashing import sha256_hex
from engine.optimize.context import OptimizeContext, RuleOutcome
from engine.types import ANCHOR_KINDS, Form, SectionKind

NAME = "spill"
NEVER_SPILL = ANCHOR_KINDS | {SectionKind.WORKING_MEMORY, SectionKind.GOAL, SectionKind.TOOLS}
PREVIEW_CHARS = 400


def _preview(text: str) -> str:
    return text[:PREVIEW_CHARS] + ("..." if len(text) > PREVIEW_CHARS else "")


def _spill(ctx: OptimizeContext, text: str, tokens: int) -> SpillReference | None:
    key = sha256_hex(text)
    if ctx.dry_run or ctx.spill is None:
        uri = f"spill://{key[:16]}"
    else:
        try:
            uri = ctx.spill.put(key, text)
        except Exception as exc:  # a failing backend must not abort the turn
            ctx.spill_failures.append(f"{key}: {type(exc).__name__}: {exc}")
            return None
    return SpillReference(key, uri, tokens, _preview(text))


def apply(asm: Assembly, ctx: OptimizeContext) -> RuleOutcome:
    return spill_sections(asm, ctx)


def spill_sections(asm: Assembly, ctx: OptimizeContext, history: bool = True) -> RuleOutcome:
    """The rule; with `history=False`, a history section is left as it is, unread (for a caller that
    knows it holds no full tool result over the threshold: simulate's wave-1 lane,
    engine/sim/wave1_lane.py, which would otherwise scan a new window's history every turn)."""
    if ctx.spill is None and not ctx.dry_run:
        return RuleOutcome(asm, False, "", reason_not_applied="no spill backend configured")
    m = ctx.measure
    limit = ctx.limits.spill_threshold
    out: list[Section] = []
    saved = 0
    spilled: list[str] = []
    for s in asm:
        if s.kind in NEVER_SPILL:
            out.append(s)
            continue
        if s.kind != SectionKind.HISTORY:
            size = m.section(s)
            texts = [i.text for i in s.items if isinstance(i, Text)]
            if size > limit and len(texts) == len(s.items):
                ref = _spill(ctx, "\n".join(texts), size)
                if ref is not None:
                    out.append(s.with_items((ref,), Form.SPILLED, size - m.item(ref)))
                    saved += size - m.item(ref)
                    spilled.append(s.id)
                    continue
            out.append(s)
            continue
        # Messages before the first one holding an over-limit result have nothing to spill: skip them
        # with one (remembered, incremental) scan instead of looking at the whole history every turn.
        first = m.first_over(s.items, limit) if history else len(s.items)
        if first >= len(s.items):
            out.append(s)
            continue
        items = list(s.items)
        changed = False
        for i in range(first, len(items)):
            it = items[i]
            if not isinstance(it, Message) or m.largest_result(it) <= limit:
                continue  # nothing here to spill (one cached lookup per message)
            parts = list(it.parts)
            for j, p in enumerate(parts):
                if isinstance(p, ToolResult) and p.form == "full" and m.part(p) > limit:
                    ref = _spill(ctx, p.content, m.part(p))
                    if ref is None:
                        continue
                    new = ToolResult(p.call_id, ref.render(), p.is_error, "spilled")
                    saved += m.part(p) - m.part(new)
                    parts[j] = new
                    spilled.append(f"result {p.call_id}")
                    changed = True
            if changed:
                items[i] = replace(it, parts=tuple(parts), sha="")
        out.append(s.with_items(tuple(items), Form.SPILLED, 0) if changed else s)
    if ctx.spill_failures and not spilled:
        return RuleOutcome(
            asm, False, "", reason_not_applied=f"spill backend failed: {ctx.spill_failures[0]}"
        )
    if not spilled:
        return RuleOutcome(asm, False, f"nothing over {limit} tokens")
    return RuleOutcome(tuple(out), True, f"spilled {', '.join(spilled)}", saved)
