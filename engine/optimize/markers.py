"""Cache markers at scope boundaries, per the provider's policy.

Candidates, in wire order (tools first for marker providers, then system sections, then messages):
the end of the tools, each scope boundary inside the system prompt, the end of the system prompt and
the newest message. Prefix-only providers get none. In a turn where a latch flipped, the None-scope
(conversation tail) marker is suppressed: the prefix it would write is about to change anyway.
With OptimizeContext.task_marker (cost_aware's revision 2) one more goes on the task message when a
breakpoint is free (task_marker below), counted in the step like the others, and one after the newest
message the agent edited where it stood, when one is still free (edit_marker).
A turn that only appended to the history, on the very sections before it, takes the last placement
with the tail marker moved instead of placing again (_carried; the Measure remembers recent ones).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from engine.assembly import Assembly, Section, wire_order

# The step's name and how a trace's reader reads its note live in engine/marker_note.py, which the
# readers import without this package (note_of is re-exported here for the engine's own callers).
from engine.marker_note import NAME as NAME
from engine.marker_note import note_of as note_of
from engine.optimize.context import Marker, OptimizeContext, RuleOutcome
from engine.optimize.history_ops import task_end
from engine.providers.policy import ProviderCachePolicy
from engine.types import CacheScope, SectionKind
from engine.wording import counted


def automatic(pol: ProviderCachePolicy) -> str | None:
    """Why no marker is placed whatever the assembly (a provider that caches prefixes by itself), or
    None: then apply's outcome depends on the sections, and a caller that knows this one may record it
    as a not-needed step without running the rule (cost_aware.run does)."""
    if not pol.supports_markers or pol.max_markers <= 0:
        return f"{pol.name} caches prefixes automatically: no markers"
    return None


class _Placed(NamedTuple):
    """A placement _placed made from the sections, with what its outcome was made of, for a later call
    on the same sections before another history (an agent's next turn): see _carried."""

    policy: ProviderCachePolicy
    task_marker: bool
    task_noted: bool
    # The sections in wire order before the history, empty ones too (the very objects).
    before: tuple[Section, ...]
    history: str  # the history section's id
    scope: CacheScope  # its scope
    cum_before: int  # tokens of the non-empty sections of `before`
    task_fits: bool  # task_marker's task ends inside the history (0 < te < its length)
    task: tuple[Any, ...]  # then the history's items before te (the very objects), else ()
    markers: tuple[Marker, ...]
    tail: int  # where the conversation-tail marker is in `markers`
    detail: str
    # What the placement was before the task's breakpoint was added (task_marker): the markers before
    # the conversation tail, which the tail followed, and why any were left out (the detail's reasons).
    # A later turn whose task breakpoint moved (the task grew past the history's first turn, or a
    # compaction put its note after it) adds the breakpoint to these again (_carried's `retask`).
    lead: tuple[Marker, ...] | None = None  # (None: not known)
    why: tuple[str, ...] = ()
    edit_k: int = -1  # edit_item of the history then: a placement holds only where it is the same


RECENT = 4  # placements remembered per Measure (simulate builds several columns a turn from one)


def apply(asm: Assembly, ctx: OptimizeContext) -> RuleOutcome:
    pol = ctx.policy
    auto = automatic(pol)
    if auto is not None:
        return RuleOutcome(asm, False, auto)
    order = wire_order(asm)
    placed = ctx.measure.placed
    retask: _Retask | None = None
    for j, last in enumerate(placed):
        out = _carried(last, asm, order, ctx)
        if isinstance(out, _Retask):
            retask = retask or out
        elif out is not None:
            if j:
                placed.insert(0, placed.pop(j))
            return out
    if retask is not None:
        # None carries as it was, but one on these sections differs only in the task's breakpoint (the
        # turn after the first, when the task stops being the tail; the first compaction, which notes
        # it): its other markers are kept and the breakpoint worked out again, as _placed would.
        last = retask.last
        hist = order[-1]
        tail = Marker(hist.id, len(hist.items) - 1, hist.scope.label, "conversation tail")
        return _finished(
            asm, order, ctx, (*(last.lead or ()), tail), list(last.why), retask.cum, True, last.cum_before
        )
    return _placed(asm, order, ctx)


class _Retask(NamedTuple):
    """_carried's answer for a placement that holds on these sections but for the task's breakpoint."""

    last: _Placed
    cum: int  # the prefix's tokens through the history


def _task_cut(items: Any, ctx: OptimizeContext) -> int:
    """task_marker's te: where the task ends in the history, less a compaction note after it."""
    return task_end(items) - (1 if ctx.task_noted else 0)


def _carried(
    last: _Placed, asm: Assembly, order: Assembly, ctx: OptimizeContext
) -> RuleOutcome | _Retask | None:
    """_placed's outcome without placing, when it is `last`'s with the tail marker on the history's last
    item, else None: an agent's turn appends to the history and leaves the sections before it as they
    were, and this rule placed the same markers on those every turn (~16 us a turn, the tail's item the
    only change).

    It is when the sections before the history are the very ones `last` was placed on (with the same
    policy and flags: the same candidates, prefix tokens and reasons some were left out) and the
    history, still last in wire order, reaches the minimum cacheable prefix with more tokens than the
    sections before it: its tail candidate (rank 0, the largest prefix) is kept and sorted last, as it
    was in `last` (recorded only then). The task's breakpoint (revision 2) depends on the same count of
    markers and, when the task ends inside the history, on the prefix through it: the same items after
    the same sections. A flipped latch (no tail candidate) is never carried.

    A _Retask when all of that holds but the task's breakpoint may not be where it was (the flags differ,
    or the task moved): the candidates, which markers are kept and why others were left out depend only
    on the sections before the history and on the tail being kept, as above, and the breakpoint is
    task_marker's, which reads those markers, the history and the flags (apply adds it to `last`'s
    other markers and remembers the outcome as _placed does). Only for a placement that knows those
    markers (`lead`)."""
    pol = ctx.policy
    if ctx.latch_flipped or (pol is not last.policy and pol != last.policy):
        return None
    before = last.before
    n = len(before)
    if len(order) != n + 1:
        return None
    for a, b in zip(order, before, strict=False):  # (order holds the history after them)
        if a is not b:
            return None
    hist = order[n]
    items = hist.items
    if hist.kind != SectionKind.HISTORY or hist.id != last.history or hist.scope != last.scope or not items:
        return None
    cum = last.cum_before + ctx.measure.section(hist)
    if cum <= last.cum_before or cum < pol.min_cacheable_tokens:
        return None
    if (ctx.edit_back or last.edit_k >= 0) and edit_item(items, ctx) != last.edit_k:
        return None  # the agent's newest edit is elsewhere in this history (a cut moved it): place again
    if (
        ctx.task_marker != last.task_marker
        or ctx.task_noted != last.task_noted
        or (
            last.task_marker
            and not task_where_it_was(items, _task_cut(items, ctx), last.task_fits, last.task)
        )
    ):
        return _Retask(last, cum) if last.lead is not None else None
    tail = Marker(hist.id, len(items) - 1, hist.scope.label, "conversation tail")
    k = last.tail
    return RuleOutcome(asm, True, last.detail, markers=(*last.markers[:k], tail, *last.markers[k + 1 :]))


def _placed(asm: Assembly, order: Assembly, ctx: OptimizeContext) -> RuleOutcome:
    """apply's outcome, placed from the sections; remembered for _carried when the history is last and
    its tail marker is kept."""
    pol = ctx.policy
    m = ctx.measure
    wire = [s for s in order if s.items]
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
        lead = "no prefix reaches" if not cands else f"{counted(len(short), 'prefix', 'prefixes')} under"
        why.append(f"{lead} the model's {least}-token minimum cacheable prefix ({where})")
    kept = sorted(cands, key=lambda c: (c[0], c[1]))[: pol.max_markers]
    kept.sort(key=lambda c: c[1])
    return _finished(
        asm, order, ctx, tuple(c[2] for c in kept), why, cum, bool(wire) and order[-1] is wire[-1]
    )


def _finished(
    asm: Assembly,
    order: Assembly,
    ctx: OptimizeContext,
    base: tuple[Marker, ...],
    why: list[str],
    cum: int,
    hist_last: bool,
    cum_before: int | None = None,
) -> RuleOutcome:
    """_placed's outcome from the markers the candidates left (`base`, in wire order), the reasons some
    were left out and the prefix's tokens through the last non-empty section: the task's breakpoint
    added, the detail written, the placement remembered. `hist_last`: the last section in wire order is
    the last non-empty one; `cum_before`: the tokens of the non-empty sections before it (None: summed)."""
    pol = ctx.policy
    m = ctx.measure
    markers = base
    if ctx.task_marker:
        # Counted with the rest: the step and its action say what the request carries.
        markers = task_marker(asm, markers, ctx)
        if ctx.edit_back:
            markers = edit_marker(asm, markers, ctx)
    detail = "; ".join([counted(len(markers), "marker"), *why])
    if not markers:
        return RuleOutcome(asm, False, detail)
    hist = order[-1]
    items = hist.items
    tail = Marker(hist.id, len(items) - 1, hist.scope.label, "conversation tail")
    before = tuple(order[:-1])
    if cum_before is None:
        cum_before = sum(m.section(s) for s in before if s.items)
    if (
        hist_last
        and hist.kind == SectionKind.HISTORY
        and not ctx.latch_flipped
        and markers.count(tail) == 1
        and cum > cum_before
        and all(s.id != hist.id for s in before)
    ):
        te = _task_cut(items, ctx) if ctx.task_marker else 0
        fits = 0 < te < len(items)
        entry = _Placed(
            pol,
            ctx.task_marker,
            ctx.task_noted,
            before,
            hist.id,
            hist.scope,
            cum_before,
            fits,
            tuple(items[:te]) if fits else (),
            markers,
            markers.index(tail),
            detail,
            # (The tail is the last of `base`: its prefix, the whole request, is the largest.)
            base[:-1] if base and base[-1] == tail else None,
            tuple(why),
            edit_item(items, ctx),
        )
        m.placed.insert(0, entry)
        del m.placed[RECENT:]
    return RuleOutcome(asm, True, detail, markers=markers)


def task_marker(asm: Assembly, marks: tuple[Marker, ...], ctx: OptimizeContext) -> tuple[Marker, ...]:
    """`marks` with one more breakpoint on the task message when one is free (ctx.task_marker).

    After a compaction the request diverges right after the task (cost_aware's revision 2 leaves the
    task as it was), and a provider with breakpoints reads only entries written at a breakpoint: without
    one on the task, everything from the system prompt on is written again. The entry costs nothing (its
    tokens are written by the tail breakpoint anyway) and every turn's read refreshes its lifetime."""

    def end_of_task(items: Sequence[Any]) -> int:
        te = task_end(items) - (1 if ctx.task_noted else 0)
        return te - 1 if 0 < te < len(items) else -1  # (none: no task, or the task is the tail)

    # (A breakpoint already within the task stands for this one.)
    return _one_more(asm, marks, ctx, end_of_task, lambda x, k: x.item <= k, "end of task")


def edit_item(items: Sequence[Any], ctx: OptimizeContext) -> int:
    """The history item after which edit_marker's breakpoint goes, -1: none. The newest message the
    agent edited where it stood (ctx.edit_back, counted from the conversation's end: the history
    section ends with the conversation's newest items whatever was cut), when it is sent after the
    task (not behind a compaction's cut, not the task, whose breakpoint is task_marker's) and is not
    the newest item (the tail's breakpoint is there)."""
    back = ctx.edit_back
    if back <= 0 or not ctx.task_marker:
        return -1
    k = len(items) - back
    return k if task_end(items) <= k < len(items) - 1 else -1


def edit_marker(asm: Assembly, marks: tuple[Marker, ...], ctx: OptimizeContext) -> tuple[Marker, ...]:
    """`marks` with one more breakpoint after the newest message the agent edited where it stood
    (edit_item), when one is free.

    An agent that edits its history (SWE-agent's last_n_observations replaces the output that has just
    aged out with "Old environment output: (N lines omitted)", one a turn) breaks the cache at that
    message, and the provider reads only entries written at a breakpoint: with breakpoints on the task
    and the tail alone, every later turn reads the prefix through the task and writes the rest again.
    What the agent has edited it has settled (it rewrites each old output once, oldest first): the
    prefix through its newest edit is the next turn's to read. The entry costs nothing (the tail
    breakpoint writes its tokens anyway)."""

    def edited(items: Sequence[Any]) -> int:
        return edit_item(items, ctx)

    return _one_more(asm, marks, ctx, edited, lambda x, k: x.item == k, "after the agent's edit")


def _one_more(
    asm: Assembly,
    marks: tuple[Marker, ...],
    ctx: OptimizeContext,
    after: Callable[[Sequence[Any]], int],
    taken: Callable[[Marker, int], bool],
    reason: str,
) -> tuple[Marker, ...]:
    """`marks` with one more breakpoint on the history, after its item k = `after(items)` (-1: none), when
    one is free, no marker of `marks` on the history is `taken(marker, k)` (one that stands for it),
    and the prefix through item k reaches the model's minimum cacheable prefix: task_marker's and
    edit_marker's placement. A flipped latch suppresses the history's breakpoints (see apply): these too."""
    pol = ctx.policy
    if not pol.supports_markers or len(marks) >= pol.max_markers or ctx.latch_flipped:
        return marks
    m = ctx.measure
    cum = 0
    wire = wire_order(asm)
    for s in wire:
        if s.kind != SectionKind.HISTORY:
            cum += m.section(s)
            continue
        k = after(s.items)
        if k < 0 or any(x.section == s.id and taken(x, k) for x in marks):
            return marks
        cum += m.items(s.items[: k + 1])
        if cum < pol.min_cacheable_tokens:
            return marks
        pos = {x.id: n for n, x in enumerate(wire)}
        one = Marker(s.id, k, s.scope.label, reason)
        return tuple(sorted((*marks, one), key=lambda x: (pos.get(x.section, -1), x.item)))
    return marks


def task_where_it_was(items: Sequence[Any], te: int, task_fits: bool, task: Sequence[Any]) -> bool:
    """Whether the task's breakpoint is where the carried layout put it: the history's task ends at `te`
    inside it exactly when it did before, and then its items are the carried task's own objects (the
    markers rule's carry check and the express lane's tail move ask the same)."""
    if (0 < te < len(items)) != task_fits:
        return False
    if task_fits:
        if te != len(task):
            return False
        for x, y in zip(items, task, strict=False):
            if x is not y:
                return False
    return True
