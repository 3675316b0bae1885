"""The cost-aware policy's builds carried over from the last one (a part of engine.policy.cost_aware): when
the history only grew by appended messages since, a build extends what the last one saw and made (its
`_Lineage`: the raw and the state-applied assembly, the stable rules' steps) instead of applying the
state and running the stable rules again (`_extend`, `_extended_stable`, `_extended_lineage`); and the
stable rules' outcome carried by its key (`_stable_key`, `_carried_stable`). Everything here gives what
a build from scratch gives: the tests compare both, byte for byte.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from engine.artifacts import Message
from engine.assembly import Assembly, Measure
from engine.optimize import (
    OptimizeContext,
    OptimizeLimits,
    OptimizeResult,
)
from engine.optimize.history_ops import history_index, task_end
from engine.policy.settings import PolicySettings
from engine.policy.state import CompactionState
from engine.types import Form, SectionKind

LINEAGE_CARRY = "append-only turn"


class _Lineage(NamedTuple):
    """What a build's stable stage saw and made, for the next build to extend when the history only
    grew by appended messages since (see _extend): the raw assembly, the state-applied one and, when
    the stable rules changed nothing, their steps."""

    slot: tuple[OptimizeLimits, PolicySettings]  # the limits and settings it was built under
    full: Assembly  # the raw assembly (the history as the pipeline assembled it)
    state: CompactionState
    elided: int
    note: str  # note_text of the state ("" for a state with no cut)
    task_end: int  # task_end of the raw history
    applied: Assembly
    applied_tokens: int  # tokens of applied's history section
    measure: Measure
    limits: OptimizeLimits  # the optimize context's
    spill_none: bool  # the optimize context had no spill backend
    stable: tuple[list[dict[str, object]], list[dict[str, object]]] | None  # steps and skipped


def _remember_lineage(
    lineages: dict[Any, _Lineage],
    slot: Any,
    owner: tuple[OptimizeLimits, PolicySettings],
    asm_full: Assembly,
    hidx: int,
    st: CompactionState,
    elided: int,
    note: str,
    applied: Assembly,
    m: Measure,
    ctx: OptimizeContext,
    stable: tuple[list[dict[str, object]], list[dict[str, object]]] | None,
    te: int | None = None,
) -> None:
    """Remember this build for the next to extend (see _Lineage). `stable`: the stable rules' steps and
    skipped steps when they changed nothing (lists no trace holds: a build that extends this one copies
    them for its own trace). `te`: the raw history's task end, when known."""
    if ctx.dry_run:
        return
    if len(lineages) >= CARRY_SLOTS and slot not in lineages:
        lineages.clear()
    lineages[slot] = _Lineage(
        owner,
        asm_full,
        st,
        elided,
        note,
        task_end(asm_full[hidx].items) if te is None else te,
        applied,
        m.section(applied[hidx]),
        m,
        ctx.limits,
        ctx.spill is None,
        stable,
    )


def _extend(
    lin: _Lineage | None,
    asm_full: Assembly,
    hidx: int,
    st: CompactionState,
    elided: int,
    note: str,
    m: Measure,
    appended: bool = False,
) -> tuple[Assembly, _Lineage, tuple[Any, ...]] | None:
    """apply_state(asm_full, st, ...) from the build `lin` remembers, when this one only appended
    messages to its raw history: the same sections otherwise (the same objects), the same state, note,
    elision and Measure. Then the applied history is the one applied then plus the appended messages
    (apply_state keeps the task, puts the note after it or on it, and sends everything from the cut on:
    with the task ending inside the old history and the cut not past it, only the tail grows). Returns
    (applied, lin, the appended messages), its history total recorded in `m`; None otherwise.
    `appended`: the caller made `asm_full` from lin.full itself, with only its history replaced by one
    that appends messages to lin.full's (both lanes do: engine/pipeline_express.py,
    engine/pipeline_held_lane.py), so neither the other sections nor the history's start are compared."""
    if (
        lin is None
        or lin.measure is not m
        or lin.elided != elided
        or lin.note != note
        or len(lin.full) != len(asm_full)
        or (lin.state is not st and lin.state != st)
    ):
        return None
    old_full = lin.full
    if not appended:
        for i, sec in enumerate(asm_full):
            if sec is not old_full[i] and i != hidx:
                return None
    hist, old_hist = asm_full[hidx], old_full[hidx]
    if hist.kind is not SectionKind.HISTORY or old_hist.kind is not SectionKind.HISTORY:
        return None
    items, old = hist.items, old_hist.items
    k = len(old)
    if (
        len(items) < k
        or (hist.id, hist.name, hist.scope, hist.priority, hist.form, hist.omitted, hist.note)
        != (
            old_hist.id,
            old_hist.name,
            old_hist.scope,
            old_hist.priority,
            old_hist.form,
            old_hist.omitted,
            old_hist.note,
        )
        or not (appended or m.starts_with(items, old))
    ):
        return None
    new = items[k:]
    if lin.applied is old_full:  # the state left the history as it was: it still does only without a cut
        return (asm_full, lin, new) if st.cut <= 0 else None
    if not lin.task_end < k or st.cut > k + elided:
        return None
    before = lin.applied[hidx]
    applied_hist = hist.with_items(before.items + new, Form.TRIMMED, st.dropped_tokens)
    m.derived(applied_hist, lin.applied_tokens + sum(map(m.item, new)))
    return asm_full[:hidx] + (applied_hist,) + asm_full[hidx + 1 :], lin, new


def _stable_holds(
    lin: _Lineage, new: tuple[Any, ...], limits: OptimizeLimits, spill: Any, m: Measure, dry_run: bool
) -> bool:
    """Whether the stable rules' outcome remembered with `lin` holds on an append-only turn (see _extend):
    the rules changed nothing then and the appended messages hold no tool result over the spill
    threshold. What _stable_key and _carried_stable establish, read from what _extend checked: the other
    sections are the same objects, the Measure the same, the limits the same (the lineage's slot), and
    the history's messages over the threshold (none then) only those appended; whether a spill backend
    is configured (`spill`, the context's) or a dry run is compared here."""
    if (
        lin.stable is None
        or dry_run
        or lin.spill_none != (spill is None)
        or (lin.limits is not limits and lin.limits != limits)
    ):
        return False
    limit = limits.spill_threshold
    big = m.largest_result
    for it in new:
        if isinstance(it, Message) and big(it) > limit:
            return False
    return True


def _extended_stable(
    lin: _Lineage, new: tuple[Any, ...], applied: Assembly, ctx: OptimizeContext
) -> OptimizeResult | None:
    """The stable rules' outcome on an append-only turn (see _extend): the one remembered with the
    build it extends, when it holds (_stable_holds); its steps copied (a trace's steps are its own)."""
    if lin.stable is None or not _stable_holds(lin, new, ctx.limits, ctx.spill, ctx.measure, ctx.dry_run):
        return None
    r = OptimizeResult(applied)
    r.steps = list(map(dict, lin.stable[0]))  # copies (a trace's steps are its own), made in C
    r.skipped = list(map(dict, lin.stable[1]))
    return r


def _extended_lineage(
    lineages: dict[Any, _Lineage],
    slot: Any,
    owner: tuple[OptimizeLimits, PolicySettings],
    lin: _Lineage,
    asm_full: Assembly,
    hidx: int,
    st: CompactionState,
    applied: Assembly,
    m: Measure,
    limits: OptimizeLimits,
) -> None:
    """What _remember_lineage remembers of a build that extended `lin` (_extend) and whose stable rules'
    outcome held (_stable_holds) under `limits`, made from `lin`: the same elision, note, task end,
    Measure and spill backend (_extend and _stable_holds compared them), and its remembered steps
    shared, not copied. The express lane's turns never hand those steps to a trace (a lane turn's trace
    runs the policy afresh), so a copy made only to be remembered again (two lists of dicts each turn)
    is left out; a build that reads them (_extended_stable) copies them as before."""
    lineages[slot] = _Lineage(
        owner,
        asm_full,
        st,
        lin.elided,
        lin.note,
        lin.task_end,
        applied,
        m.section(applied[hidx]),
        m,
        limits,
        lin.spill_none,
        lin.stable,
    )


STABLE_CARRY = "stable rules"


# Carried outcomes kept, one per optimizer limits (part of the key, so builds under other limits never
# share one): a live agent builds under one; simulate alternates its what-if column and its gates-closed
# column (and any engine policy columns) on one pipeline, and with a single outcome each build evicted
# the other column's (the 930-turn synthetic session: 1,860 misses, 42 hits).
CARRY_SLOTS = 4


def _stable_key(applied: Assembly, ctx: OptimizeContext) -> tuple[Any, ...] | None:
    """What the stable rules' outcome depends on, when it can be carried from an earlier build; None
    when it cannot (the history holds a tool result over the spill threshold: spilling it is new work).

    Reorder reads each section's id, kind and scope and their order; spill reads the non-history
    sections (their text and size), the gates and threshold, whether a backend is configured (or a dry
    run), and in the history only the messages holding a full tool result over the threshold: with none
    (one remembered, incremental scan), the history's items do not matter to either rule. The tier is
    never below the rules' minimum (NORMAL). So an append-only turn whose history grew only by messages
    under the threshold gets the same outcome as the turn before: nothing changed, the same steps."""
    m = ctx.measure
    limits = ctx.limits
    hidx = history_index(applied)
    if hidx is not None:
        hist = applied[hidx]
        if m.first_over(hist.items, limits.spill_threshold) < len(hist.items):
            return None
        head: tuple[Any, ...] = (hidx, hist.id, hist.kind, hist.scope)
        others = applied[:hidx] + applied[hidx + 1 :]
    else:
        head, others = (), applied
    return (others, head, limits, ctx.spill is None, ctx.dry_run, m)


def _carried_stable(carry: dict[str, Any], key: tuple[Any, ...], applied: Assembly) -> OptimizeResult | None:
    """The stable rules' outcome remembered for these limits under an equal key: the assembly unchanged
    and the same steps (copied: a trace's steps are its own). Sections compare by identity first (the
    same objects turn after turn), by value otherwise; the Measure by identity (its counts)."""
    got = carry.get(STABLE_CARRY, {}).get(key[2])
    if got is None:
        return None
    prev, steps, skipped = got
    if prev[5] is not key[5] or prev[1:5] != key[1:5] or prev[0] != key[0]:
        return None
    res = OptimizeResult(applied)
    res.steps = list(map(dict, steps))
    res.skipped = list(map(dict, skipped))
    return res
