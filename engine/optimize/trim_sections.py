"""In-section trimming: a section over its budget is cut inside itself, leaving a visible marker.

Text sections keep their head and tail around `[...N tokens omitted...]`; the tools section loses its
last schemas; history loses whole oldest rounds first, then the middle of its largest tool results.
Identity, Constraints, the goal and Never-priority sections are never trimmed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from engine.artifacts import Message, SectionItem, Text, ToolResult
from engine.assembly import Assembly, Measure, Section, omission_marker
from engine.dropped_history import Round
from engine.dropped_history import droppable as droppable_rounds
from engine.optimize.context import OptimizeContext, RuleOutcome
from engine.optimize.history_ops import cut_holds_after_appends, drop_range, oldest_to_drop
from engine.plan import Plan
from engine.tokens import REPLY_PRIMING_TOKENS
from engine.types import PROTECTED_KINDS, Form, Priority, SectionKind

NAME = "trim_sections"
FITS = "every section within budget"  # its outcome when nothing is over


def fits_as_planned(p: Plan, asm: Assembly) -> bool:
    """Whether this rule leaves `asm`, the assembly `p` planned (nothing changed since), as it is, so a
    caller may skip the walk over its sections and record the FITS outcome (cost_aware.run does).

    When the planned sections' total plus the reply priming is within the ceiling, the allocation gives
    every section exactly its size (nothing is in excess; the planner's estimates carry no per-section
    cap), so no section is over its budget and the total is not over the ceiling. One budget per section
    (no repeated id), else the rule itself decides."""
    return p.estimated_tokens + REPLY_PRIMING_TOKENS <= p.ceiling and len(p.budgets) == len(asm)


def protected(s: Section) -> bool:
    return s.kind in PROTECTED_KINDS or s.priority == Priority.NEVER


def trim_text(text: str, target: int, m: Measure) -> tuple[str, int]:
    """Head + marker + tail of `text` within `target` tokens. Returns (text, tokens omitted)."""
    full = m.counter.count(text)
    if full <= target:
        return text, 0
    ratio = max(0.0, (target - 12) / full)
    keep = int(len(text) * ratio)
    while True:
        head, tail = text[: keep * 3 // 5], text[len(text) - keep * 2 // 5 :] if keep >= 5 else ""
        omitted = full - m.counter.count(head) - m.counter.count(tail)
        out = f"{head}\n{omission_marker(omitted)}\n{tail}" if keep else omission_marker(full)
        if m.counter.count(out) <= target or keep == 0:
            return out, omitted if keep else full
        keep = int(keep * 0.8)


def _trim_text_section(s: Section, budget: int, m: Measure) -> Section:
    texts = [i.text for i in s.items if isinstance(i, Text)]
    if len(texts) != len(s.items):
        return s  # spilled/media sections are already small or cannot be cut
    overhead = m.section(s) - m.counter.count("\n".join(texts))
    new, omitted = trim_text("\n".join(texts), max(0, budget - overhead), m)
    return s.with_items((Text(new),), Form.TRIMMED, omitted)


def _trim_tools(s: Section, budget: int, m: Measure) -> Section:
    items = list(s.items)
    removed = 0
    while items and m.items(items) > budget:
        removed += m.item(items.pop())
    return s.with_items(tuple(items), Form.TRIMMED, removed)


# History cuts remembered per Measure (Measure.drops): simulate builds several columns a turn from one
# Measure, and its gates-closed column cuts its (growing, never compacted) history every turn.
RECENT_DROPS = 4


class _Drop(NamedTuple):
    """One history cut, as oldest_to_drop chose it in the raw history `items`: the `rounds` oldest
    droppable rounds, items [start, end), holding `acc` tokens as oldest_to_drop reckons them (`below`
    for the first rounds - 1), with `offset` the section total less the sum of its items' counts
    (0: a primed total is the sum; oldest_to_drop reads both). `marked`: the task message carrying
    their omission marker (None when the history does not start with a user message). A NamedTuple,
    not a dataclass: it is made once per process at import, and a dataclass costs ~0.5 ms CPU there."""

    items: tuple[SectionItem, ...]
    offset: int
    below: int
    acc: int
    rounds: int
    start: int
    end: int
    marked: Message | None


def _carried_drop(m: Measure, items: tuple[SectionItem, ...], size: int, need: int) -> _Drop | None:
    """A remembered cut that oldest_to_drop would choose again for `items` (total `size`) and `need`:
    one chosen under this Measure in a history `items` only appended to, with the same offset (see
    history_ops.cut_holds_after_appends); nothing when need <= 0, as oldest_to_drop."""
    if need <= 0:
        return None
    offset = None  # this history's (computed once, for the first remembered cut that may hold)
    for j, d in enumerate(m.drops):
        if not cut_holds_after_appends(d.items, items, d.below, d.acc, need, m):
            continue
        if offset is None:
            offset = size - m.cumulative(items)[len(items)]
        if offset == d.offset:
            if j:
                m.drops.insert(0, m.drops.pop(j))
            return d
    return None


def _remember_drop(
    m: Measure,
    items: tuple[SectionItem, ...],
    size: int,
    droppable: Sequence[Round],
    count: int,
    acc: int,
    kept: tuple[SectionItem, ...],
) -> None:
    """Remember oldest_to_drop's cut of `items` (the `count` oldest `droppable` rounds, `acc` tokens;
    `kept` the history drop_range left) for the next build. Only a cut that reached the tokens to drop
    is (the caller's check): a cut of every droppable round short of them takes more once more are."""
    cum = m.cumulative(items)
    offset = size - cum[len(items)]
    below = cum[droppable[count - 1][0]] - cum[droppable[0][0]] + offset
    first = items[0]
    marked = kept[0] if isinstance(first, Message) and first.role == "user" else None
    assert marked is None or isinstance(marked, Message)
    m.drops.insert(
        0, _Drop(items, offset, below, acc, count, droppable[0][0], droppable[count - 1][1], marked)
    )
    del m.drops[RECENT_DROPS:]


def _trim_history(asm: Assembly, idx: int, budget: int, ctx: OptimizeContext) -> Assembly:
    m = ctx.measure
    hist = asm[idx]
    size = m.section(hist)
    need = size - budget
    # Choose how many oldest rounds must go in one pass, then drop them together (one marker). An
    # append-only turn usually needs the cut it had (the history grew by less than what that cut left
    # spare): the cut and its marked task message are carried (the same request either way).
    d = _carried_drop(m, hist.items, size, need)
    if d is not None:
        asm, _ = drop_range(asm, idx, d.start, d.end, d.rounds, d.acc, m, d.marked)
        hist = asm[idx]
    else:
        droppable = droppable_rounds(m.rounds(hist.items))  # rounds[1:-1]
        count, acc = oldest_to_drop(hist.items, droppable, size, need, m)
        if count:
            start, end = droppable[0][0], droppable[count - 1][1]
            raw = hist.items
            asm, _ = drop_range(asm, idx, start, end, count, acc, m)
            hist = asm[idx]
            if acc >= need:
                _remember_drop(m, raw, size, droppable, count, acc, hist.items)
    # Still over (a huge result in the newest round): cut the middle of the largest tool results.
    hist = cut_inside_results(hist, budget, m)
    return asm[:idx] + (hist,) + asm[idx + 1 :]


def cut_inside_results(hist: Section, budget: int, m: Measure) -> Section:
    """A history section still over `budget` once its rounds are cut (a huge result in the newest
    round), with the middle of its largest tool results (or texts, never the task's) cut until it fits
    or nothing large is left: the last step of the budget guarantee's history trim (simulate's
    gates-closed builds call it after a cut of their own, engine/sim/closed_cut.py)."""
    while m.section(hist) > budget:
        over = m.section(hist) - budget
        best = None
        for i, it in enumerate(hist.items):
            if isinstance(it, Message):
                for j, p in enumerate(it.parts):
                    if isinstance(p, ToolResult | Text) and (best is None or m.part(p) > best[2]):
                        if i == 0 and isinstance(p, Text):
                            continue  # the task text is an instruction: never evicted
                        best = (i, j, m.part(p))
        if best is None or best[2] <= 16:
            break
        i, j, size_p = best
        msg = hist.items[i]
        assert isinstance(msg, Message)
        part = msg.parts[j]
        target = max(8, size_p - over - 16)
        if isinstance(part, ToolResult):
            new_text, omitted = trim_text(part.content, target, m)
            new_part: ToolResult | Text = ToolResult(part.call_id, new_text, part.is_error, part.form)
        else:
            assert isinstance(part, Text)  # the search above only picks tool results and text
            new_text, omitted = trim_text(part.text, target, m)
            new_part = Text(new_text)
        parts = list(msg.parts)
        parts[j] = new_part
        items = list(hist.items)
        items[i] = new_msg = replace(msg, parts=tuple(parts), sha="")
        # One message changed: the new total is the old one with that message's count swapped, not a
        # walk over every other message of the (long) kept history.
        total = m.section(hist) - m.item(msg) + m.item(new_msg)
        hist = hist.with_items(tuple(items), Form.TRIMMED, omitted)
        m.derived(hist, total)
        if omitted == 0:
            break
    return hist


def _fit(asm: Assembly, s_idx: int, budget: int, ctx: OptimizeContext) -> Assembly:
    s = asm[s_idx]
    m = ctx.measure
    if s.kind == SectionKind.HISTORY:
        return _trim_history(asm, s_idx, budget, ctx)
    if s.kind == SectionKind.TOOLS:
        new = _trim_tools(s, budget, m)
    else:
        new = _trim_text_section(s, budget, m)
    if budget <= 0 or m.section(new) > budget:
        new = s.with_items((), Form.DROPPED, m.section(s))
    return asm[:s_idx] + (new,) + asm[s_idx + 1 :]


def apply(asm: Assembly, ctx: OptimizeContext) -> RuleOutcome:
    m = ctx.measure
    before = m.total(asm)
    trimmed: list[str] = []
    for k in range(len(asm)):
        s = asm[k]
        budget = ctx.plan.budgets.get(s.id)
        if budget is None or protected(s) or m.section(s) <= budget:
            continue
        asm = _fit(asm, k, budget, ctx)
        trimmed.append(s.id)
    # Budgets were set before compaction; if the whole is still over the ceiling, squeeze the largest
    # unprotected sections (compression priority order) until it fits.
    ceiling = ctx.plan.ceiling
    # Already within the ceiling (the usual turn): nothing to squeeze, so no ordering to compute.
    for prio in (Priority.FIRST, Priority.NORMAL, Priority.LAST_RESORT) if m.total(asm) > ceiling else ():
        for k in sorted(range(len(asm)), key=lambda k: (-m.section(asm[k]), asm[k].id)):
            over = m.total(asm) - ceiling
            if over <= 0:
                break
            s = asm[k]
            if s.priority != prio or protected(s) or not s.items:
                continue
            asm = _fit(asm, k, max(0, m.section(s) - over), ctx)
            if s.id not in trimmed:
                trimmed.append(s.id)
    if not trimmed:
        return RuleOutcome(asm, False, FITS)
    saved = before - m.total(asm)
    return RuleOutcome(asm, True, f"trimmed inside {', '.join(trimmed)}", saved)
