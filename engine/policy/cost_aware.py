"""The default compaction policy: stateful, with hysteresis, and only when it pays.

Each turn the history is sent as the folded `CompactionState` leaves it (the cut part replaced by one
note, everything after the cut appended as it came), so between compactions each request extends the
previous one and the provider's prefix cache serves all of it. Then:

1. Stable rules first: cache alignment, and spilling of large tool outputs (decided by content alone,
   so an output is spilled the same way from the turn it first appears: no later rewrite).
2. The compaction decision, over what will be sent (not the raw history):
   - forced: the request exceeds `trigger` x ceiling. Cut whole oldest rounds (never the task, never
     the newest round) until the request is at most `target` x ceiling: one deep cut buys many turns.
   - early (optional): below the trigger, compact anyway when it pays. Revision 2 (the default) asks
     two things of a cut: (a) its expected saving over the turns it is expected to last (a scale-free
     prior on the session's remaining length, capped where the trigger would force a cut anyway)
     exceeds the cache rewrite at the provider's prices and rules, less the share a forced cut would
     pay anyway; (b) it saves at least the economic cut size sqrt(2 x rewrite x growth / read price),
     below which cutting again and again costs more than waiting (cachecost.economic_saving). A short
     run is never cut early (a saving is not expected to last), a long one is cut about once per
     economic cycle. Revision 1 (recordings made before) compares the pay-back with a fixed share of
     the turns so far.
   - otherwise hold; the trace says why, with the pay-back a compaction would have had.
3. The budget guarantee (trim_sections) and the cache markers, as in every policy. Tool schemas and
   global/session sections are only ever touched by that guarantee (forced), never by compaction.
   Revision 2 leaves the task message as it was (the note is its own message after it) and, at
   providers with breakpoints, keeps one on the task when one is free, so after a compaction the
   prefix through the task is still read from the cache.

Everything here is a pure function of its inputs: the same state and assembly give the same request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

from engine.artifacts import Message, Text
from engine.assembly import Assembly, Measure, omission_marker
from engine.hashing import content_hash
from engine.optimize import (
    OptimizeContext,
    OptimizeLimits,
    OptimizeResult,
    Rule,
    align,
    markers,
    not_needed,
    optimize,
    spill_large,
    trim_sections,
)
from engine.optimize.history_ops import history_index, task_end
from engine.plan import Plan, Reserves
from engine.policy.cachecost import (
    CacheRules,
    Payback,
    economic_saving,
    payback,
    prefix_served_on_rewrite,
    remaining_turns,
)
from engine.policy.cut_choice import CUT_CARRY as CUT_CARRY  # (re-exported: tests read it here)
from engine.policy.cut_choice import _choose_cut
from engine.policy.lineage_carry import (
    CARRY_SLOTS,
    LINEAGE_CARRY,
    STABLE_CARRY,
    _carried_stable,
    _extend,
    _extended_lineage,
    _extended_stable,
    _remember_lineage,
    _stable_key,
)
from engine.policy.lineage_carry import _stable_holds as _stable_holds  # (re-exported: the express lane)
from engine.policy.settings import PolicySettings
from engine.policy.state import CompactionState
from engine.types import Form
from engine.wording import counted

STEP = "compact_history"
GATE = "drop_rounds"  # compaction drops whole rounds: the same gate as wave 1's drop_rounds
SUMMARY_GATE = "llm_summary"
# An early candidate is only worth writing down when it would save this share of the ceiling.
REPORT_SHARE = 0.05

STABLE_RULES: tuple[Rule, ...] = (
    Rule(align.NAME, align.apply, "reorder"),
    Rule(spill_large.NAME, spill_large.apply, "spill"),
)
GUARANTEE_RULES: tuple[Rule, ...] = (
    Rule(trim_sections.NAME, trim_sections.apply, None),
    Rule(markers.NAME, markers.apply, None),
)
STEP_NAMES = tuple(r.name for r in STABLE_RULES) + (STEP,) + tuple(r.name for r in GUARANTEE_RULES)
_Planned = tuple[Plan, Reserves, float]  # what a build's plan_fn hands back


@dataclass
class Outcome:
    """One cost-aware decision: the plan, the optimized assembly, the compaction state after it and the
    journaled decision."""

    plan: Plan
    reserves: Reserves
    ratio: float
    before: Assembly  # the state-applied assembly the plan measured ("planned" in the trace)
    res: OptimizeResult
    state: CompactionState
    decision: dict[str, Any]
    spill_failures: list[str] = field(default_factory=list)
    # run(defer_texts=True) on a held turn: what completes `decision` and the compaction step (their
    # texts and pay-back fields) for the trace, called once before either is read; None: complete.
    finish: Callable[[], None] | None = None


def _turns(horizon: float) -> str:
    """A horizon in turns as a reason quotes it ("1 turn", "12 turns"; an unbounded one as "inf turns")."""
    return counted(round(horizon), "turn") if math.isfinite(horizon) else f"{horizon:.0f} turns"


def note_text(st: CompactionState, summary_text: Callable[[str], str | None]) -> str:
    text = summary_text(st.summary) if st.summary else None
    if text is not None:
        return f"[summary of {st.dropped_rounds} earlier rounds, {st.dropped_tokens} tokens]\n{text}"
    return omission_marker(st.dropped_tokens, f"{st.dropped_rounds} earlier rounds dropped")


def apply_state(
    asm: Assembly,
    st: CompactionState,
    summary_text: Callable[[str], str | None],
    revision: int = 1,
    elided: int = 0,
) -> Assembly:
    """The assembly with the history as the state leaves it (the cut part replaced by its note).

    Revision 1 appends the note to the task message; revision 2 sends it as its own message right after
    the task, so the task stays byte-identical and the prefix through it (tools, system, task) is still
    the cached prefix of every request after a compaction.

    `elided`: the history section already lacks that many items right after the task (the pipeline
    assembles a compacted session's history from the cut on, so a turn never copies the whole
    conversation); `st.cut` is still an index into the whole history and must not be shallower."""
    idx = history_index(asm)
    if idx is None or st.cut <= 0:
        return asm
    hist = asm[idx]
    items = hist.items
    te = task_end(items)
    cut = min(st.cut, len(items) + elided)
    if cut <= te:
        return asm
    first = items[0]
    kept = items[cut - elided :]
    if revision >= 2 and isinstance(first, Message) and first.role == "user":
        note = _note_message(note_text(st, summary_text))
        new_items = items[:te] + (note,) + kept
    elif isinstance(first, Message) and first.role == "user":
        # The note rides on the task message, so the conversation still starts with a user turn.
        new_first = Message("user", first.parts + (Text(note_text(st, summary_text)),))
        new_items = (new_first,) + items[1:te] + kept
    else:
        new_items = items[:te] + kept
    return asm[:idx] + (hist.with_items(new_items, Form.TRIMMED, st.dropped_tokens),) + asm[idx + 1 :]


@lru_cache(maxsize=8)
def _note_message(text: str) -> Message:
    """The note as a message, the same object every turn the state holds (a message is immutable and
    hashes its parts when made): identity-keyed memos downstream then hit instead of comparing it."""
    return Message("user", (Text(text),))


SLOT_CARRY = "slot"


def _slot_key(carry: dict[str, Any], limits: OptimizeLimits, settings: PolicySettings) -> int:
    """The key a build's remembered cut and lineage are kept under in `carry`: hash((limits, settings)).

    Both are frozen dataclasses, whose generated __hash__ is a Python call hashing every field, and a
    held turn looked its memos up by the pair four times (eight such calls, ~3 us). Hashed once here,
    and not again while the build is under the very same objects (a pipeline's config). The memos are
    keyed by the number: a remembered cut holds only when its own checks pass, whatever slot it came
    from (see _carried_cut, _counted_on), and a lineage keeps the pair and is used only under an
    equal one (see run), so two pairs that hash alike share a slot but never a wrong answer."""
    key = carried_slot(carry, limits, settings)
    if key is None:
        key = hash((limits, settings))
        carry[SLOT_CARRY] = (limits, settings, key)
    return key


def carried_slot(carry: dict[str, Any], limits: OptimizeLimits, settings: PolicySettings) -> int | None:
    """The slot key `carry` holds when the last build hashed these very objects (a config's limits and
    settings, by identity), else None: its memos then were kept for another pair, or for none yet. The
    express lanes (engine/pipeline_express.py, pipeline_held_lane.py) take a turn only under the slot
    the general path's run last worked out (see _slot_key)."""
    got = carry.get(SLOT_CARRY)
    if got is not None and got[0] is limits and got[1] is settings:
        return got[2]  # type: ignore[no-any-return]
    return None


def run(
    asm_full: Assembly,
    st: CompactionState,
    *,
    settings: PolicySettings,
    limits: OptimizeLimits,
    cache: CacheRules,
    measure: Measure,
    plan_fn: Callable[[Assembly], tuple[Plan, Reserves, float]],
    make_ctx: Callable[[Plan], OptimizeContext],
    turn: int,
    summary_text: Callable[[str], str | None],
    summarize: Callable[[list[str]], str] | None = None,
    elided: int = 0,
    full_history: Sequence[Any] | None = None,
    carry: dict[str, Any] | None = None,
    weigh_closed: bool = True,
    defer_texts: bool = False,
    edited: int | None = None,
) -> Outcome:
    """One turn's decision and request. `asm_full` holds the raw history, or with `elided` > 0 the raw
    history without that many items after the task (those `st` already cut; see apply_state), its
    section total still the raw one; `full_history` is then the whole conversation, which only a
    summary of a new cut reads. `carry`: a dict the caller keeps from build to build, where the stable
    rules' outcome is carried to the next turn (see _stable_key); None computes everything afresh.
    weigh_closed=False: with the drop_rounds gate closed, no cut is chosen and weighed only to be
    reported (the request and state are the same; the trace's step says "not weighed").
    defer_texts=True: on a held turn, what only the trace reads of the decision (the pay-back's fields,
    the reason texts) is left to Outcome.finish (a trace built when read, engine/trace_lazy.py).
    edited: the first history index (of the whole conversation) the agent edited this turn: its request
    breaks the cache there whatever is decided, and from revision 3 a cut weighed this turn is priced
    for that (cachecost.payback's `broken_at`; see _break_at)."""
    m = measure
    hidx = history_index(asm_full)
    full_len = len(asm_full[hidx].items) + elided if hidx is not None else 0
    raw_total = m.total(asm_full)

    lineages = carry.setdefault(LINEAGE_CARRY, {}) if carry is not None else None
    lin_slot = (limits, settings)
    slot = _slot_key(carry, limits, settings) if carry is not None else 0

    def stage1(
        s: CompactionState,
    ) -> tuple[Assembly, Assembly, OptimizeContext, OptimizeResult, list[str], _Planned]:
        """The state applied and the stable rules run: (applied, their result's assembly, the context,
        the result, spill failures, the plan of `applied`)."""
        lin = lineages.get(slot) if lineages is not None and hidx is not None else None
        # (The tuples compare their members by identity first: the same config's objects.)
        if lin is not None and lin.slot != lin_slot:
            lin = None
        if s.cut <= 0:
            note = ""
        elif lin is not None and lin.state is s and not s.summary:
            note = lin.note  # note_text of this very state, which without a summary is a function of it
        else:
            note = note_text(s, summary_text)
        ext = (
            _extend(lin, asm_full, hidx, s, elided, note, m) if lin is not None and hidx is not None else None
        )
        applied = (
            ext[0] if ext is not None else apply_state(asm_full, s, summary_text, settings.revision, elided)
        )
        planned = plan_fn(applied)
        p = planned[0]
        ctx = make_ctx(p)
        if ext is not None:
            r = _extended_stable(ext[1], ext[2], applied, ctx)
            if r is not None:
                assert lineages is not None and hidx is not None
                _extended_lineage(lineages, slot, lin_slot, ext[1], asm_full, hidx, s, applied, m, ctx.limits)
                return applied, applied, ctx, r, [], planned
        key = _stable_key(applied, ctx) if carry is not None else None
        if carry is not None and key is not None:
            carried = _carried_stable(carry, key, applied)
            if carried is not None:
                if lineages is not None and hidx is not None:
                    kept = carry[STABLE_CARRY][key[2]][1:]  # (the steps the memo holds: never a trace's)
                    _remember_lineage(
                        lineages, slot, lin_slot, asm_full, hidx, s, elided, note, applied, m, ctx, kept
                    )
                return applied, applied, ctx, carried, [], planned
        r = optimize(applied, ctx, STABLE_RULES)
        unchanged = r.asm is applied and not ctx.spill_failures
        # What is remembered of the steps is a copy: r's are the trace's, and a reader may change them.
        kept_steps = (list(map(dict, r.steps)), list(map(dict, r.skipped))) if key and unchanged else None
        if carry is not None and key is not None and kept_steps is not None:
            # Nothing changed: the outcome holds for the next build with an equal key.
            slots = carry.setdefault(STABLE_CARRY, {})
            if len(slots) >= CARRY_SLOTS and key[2] not in slots:
                slots.clear()
            slots[key[2]] = (key, *kept_steps)
        if lineages is not None and hidx is not None:
            _remember_lineage(
                lineages,
                slot,
                lin_slot,
                asm_full,
                hidx,
                s,
                elided,
                note,
                applied,
                m,
                ctx,
                kept_steps,
            )
        return applied, r.asm, ctx, r, list(ctx.spill_failures), planned

    applied, asm1, ctx1, res1, failures, planned = stage1(st)
    # The plan of what the stable rules left: the one stage1 made when they left the assembly as it was
    # (plan_fn would hand the same back from its memo; two calls a turn fewer).
    if asm1 is not applied:
        planned = plan_fn(asm1)
    ceiling = planned[0].ceiling
    t1 = m.total(asm1)
    trigger_tokens = int(settings.trigger * ceiling)
    target_tokens = int(settings.target * ceiling)
    rev2 = settings.revision >= 2
    forced = t1 > trigger_tokens
    decision: dict[str, Any] = {
        "policy": settings.name,
        "tokens": t1,
        "raw_tokens": raw_total,
        "trigger_tokens": trigger_tokens,
        "target_tokens": target_tokens,
        "forced": forced,
        "cut": st.cut,
        "cache_rules": cache.rules,
    }
    step: dict[str, Any]
    new_st = st
    gate_open = bool(getattr(limits, GATE))
    # A closed gate never compacts: a candidate would only be weighed for the trace's account of what
    # the closed gate costs. simulate's builds (weigh_closed=False) never read that account, and on a
    # long session's gates-closed column the walk over the uncompacted history was ~4% of simulate.
    unweighed = not gate_open and not weigh_closed and (forced or t1 > target_tokens)
    wanted = (forced or t1 > target_tokens) and not unweighed
    # The stable stage keeps the history where it was, unless a stable rule moved the sections.
    h1 = hidx if asm1 is applied else history_index(asm1)
    # The remembered cut is looked up per limits and settings, not per target: the learned calibration
    # moves the target every turn, and every check on a remembered cut reads the tokens to drop, which
    # hold the target (keyed by it, the cut was found in fewer than half the turns).
    cand = _choose_cut(asm1, st, target_tokens, m, full_len, carry, slot, (h1, t1)) if wanted else None
    pb: Payback | None = None
    economic = 0.0
    horizon = 0.0  # read only where a cut was weighed
    if cand is not None:
        # What only weighing a cut reads (the gates-closed column of a simulate weighs none a turn).
        hist_tokens = m.section(asm1[h1]) if h1 is not None else 0
        stable_prefix = t1 - hist_tokens
        growth = (m.section(asm_full[hidx]) if hidx is not None else 0) / max(1, turn)
        to_trigger = math.inf if growth <= 0 else max(0.0, (trigger_tokens - t1) / growth)
        if rev2:
            # The expected turns a saving lasts under a scale-free prior on the session's remaining
            # length, and the chance the session reaches the trigger, where a forced cut would rewrite
            # anyway.
            horizon, reach = remaining_turns(turn, settings.horizon_scale, to_trigger)
        else:
            # Revision 1: a cautious share of the turns so far, at most until the trigger forces a cut.
            horizon, reach = min(float(max(1, turn)) * settings.horizon_scale, to_trigger), 0.0
        served = prefix_served_on_rewrite(cache, st.compactions) if rev2 else True
        broken = None
        if edited is not None and h1 is not None and settings.revision >= 3:
            broken = _break_at(asm1[h1].items, full_len, edited, st.cut, t1, m)
        pb = payback(
            cache, t1 - cand.after, cand.after, stable_prefix, horizon, forced, served, reach, broken
        )
        if rev2:
            # Paying back within the horizon is not enough: a cut smaller than the economic size would
            # be repeated so often that waiting for a deeper one costs less (see economic_saving).
            economic = economic_saving(pb, growth)
    deferred = False  # a held turn's texts left to Outcome.finish
    if unweighed:
        why = f"gate {GATE} is off (not weighed)"
        decision.update(decision="skipped", reason=why)
        step = {"step": STEP, "status": "skipped", "reason": why, "tokens_saved": 0}
    elif cand is None:
        why = (
            "request within the trigger"
            if not forced
            else "nothing droppable (only the task and newest round)"
        )
        decision.update(decision="held", reason=why)
        step = {"step": STEP, "status": "not_needed", "reason": why}
    elif not gate_open:
        assert pb is not None
        _paid(decision, pb, rev2, economic)
        why = f"gate {GATE} is off ({pb.text()})"
        decision.update(decision="skipped", reason=why)
        step = {"step": STEP, "status": "skipped", "reason": why, "tokens_saved": pb.saves_per_turn}
    elif forced or (settings.early and pb is not None and pb.worth and pb.saves_per_turn >= economic):
        assert pb is not None
        _paid(decision, pb, rev2, economic)
        summary_key = ""
        if summarize is not None and getattr(limits, SUMMARY_GATE):
            idx = history_index(applied)
            assert idx is not None
            full_hist: Sequence[Any] = (
                full_history
                if full_history is not None
                else (asm_full[hidx].items if hidx is not None else ())
            )
            old = full_hist[task_end(full_hist) : cand.cut]
            texts = [i.text() for i in old if isinstance(i, Message)]
            summary_key = content_hash(texts)
            summarize(texts)
        new_st = CompactionState(
            cut=cand.cut,
            dropped_tokens=st.dropped_tokens + cand.dropped_tokens,
            dropped_rounds=st.dropped_rounds + cand.dropped_rounds,
            compactions=st.compactions + 1,
            turn=turn,
            summary=summary_key,
        )
        why = (
            f"request {t1} > trigger {trigger_tokens}: cut {counted(cand.dropped_rounds, 'round')} to about {target_tokens}"
            if forced
            else (
                "the agent's own edit breaks the cache this turn: the cut re-sends nothing else"
                if pb.agent_resends is not None and pb.resend_uncached == 0
                else f"pays back within the {_turns(horizon)} it is expected to last"
            )
        )
        decision.update(decision="compacted", reason=why, cut=new_st.cut)
        step = {
            "step": STEP,
            "status": "applied",
            "detail": f"{why}; {pb.text()}",
            "tokens_saved": pb.saves_per_turn,
            "payback": pb.text(),
        }
        applied, asm1, ctx1, res1, failures, planned = stage1(new_st)
        if asm1 is not applied:
            planned = plan_fn(asm1)
    else:
        assert pb is not None
        # Written down as a skipped optimization only when the saving would be substantial.
        step = {
            "step": STEP,
            "status": "skipped" if pb.saves_per_turn >= REPORT_SHARE * ceiling else "not_needed",
        }
        deferred = defer_texts
        if not deferred:
            _paid(decision, pb, rev2, economic)
            _held(decision, step, pb, settings, horizon, economic)
    the_plan, reserves, ratio = planned
    # The stable stage's context when it was made for this very plan and nothing was written to it (no
    # spill failed): make_ctx would build an equal one.
    ctx2 = (
        ctx1 if ctx1.plan is the_plan and not ctx1.spill_failures and not ctx1.dry_run else make_ctx(the_plan)
    )
    # Revision 2: the markers rule also places the task's breakpoint (markers.task_marker), counted in
    # its step. Set on every run: a make_ctx may hand the same context back build after build.
    ctx2.task_marker = rev2
    if rev2:
        # apply_state put a note after the task (only when the history starts with the user's task).
        full_items = asm_full[hidx].items if hidx is not None else ()
        ctx2.task_noted = (
            applied is not asm_full and bool(full_items) and getattr(full_items[0], "role", "") == "user"
        )
    auto = None
    if carry is not None and trim_sections.fits_as_planned(the_plan, asm1):
        # The budget guarantee has nothing to trim: what trim_sections would say, without walking the
        # sections; the markers as always, or at a provider that caches prefixes by itself what the
        # rule says there whatever the sections (markers.automatic).
        auto = markers.automatic(ctx2.policy)
        if auto is not None:
            res2 = OptimizeResult(asm1)
            # not_needed's two steps, written here (two calls every held turn).
            res2.steps = [
                {"step": trim_sections.NAME, "status": "not_needed", "reason": trim_sections.FITS},
                {"step": markers.NAME, "status": "not_needed", "reason": auto},
            ]
        else:
            res2 = optimize(asm1, ctx2, GUARANTEE_RULES[1:])
            res2.steps.insert(0, not_needed(trim_sections.NAME, trim_sections.FITS))
    else:
        res2 = optimize(asm1, ctx2, GUARANTEE_RULES)
    res = res2  # (its steps, actions and skipped are replaced below, each built from its own first)
    res.steps = res1.steps + [step] + res2.steps
    res.actions = res1.actions + ([_action(step)] if step["status"] == "applied" else []) + res2.actions
    skipped: dict[str, Any] | None = None
    if step["status"] == "skipped":
        # _action(step): the step less its status, in its order (copied in C, not a comprehension's frame).
        skipped = dict(step)
        del skipped["status"]
    res.skipped = res1.skipped + ([skipped] if skipped is not None else []) + res2.skipped
    # t1 is asm1's total until a compaction rebuilt asm1; the guarantee nearly always leaves it as it is.
    sent = t1 if res.asm is asm1 and new_st is st else m.total(res.asm)
    finish = None
    if not deferred:
        decision["sent_tokens"] = sent
    else:  # a held turn's texts, deferred: the same keys in the same order once finish() runs
        assert pb is not None
        # A partial of a module function, not a closure: a closure's nine variables would be cells made
        # on every run, and the trace that holds `finish` keeps them (~9 objects a turn more for the
        # garbage collector to count and traverse).
        finish = partial(_held_texts, decision, step, pb, settings, horizon, economic, rev2, skipped, sent)

    return Outcome(
        the_plan, reserves, ratio, applied, res, new_st, decision, failures + ctx2.spill_failures, finish
    )


def _break_at(items: Sequence[Any], full_len: int, edited: int, cut: int, t1: int, m: Measure) -> int | None:
    """Where the agent's edit of history item `edited` (an index into the whole conversation of
    `full_len` items) breaks the request `t1` tokens long whose history section holds `items` (the
    state applied: the task, the compaction note, the items from `cut` on): the tokens before the
    edited item, or None when the item is not sent (it lies in the cut part, which the note stands
    for). The history is the last section (wire order), so the tokens from the edited item on are the
    request's tail."""
    te = task_end(items)
    if edited < te:
        k = edited  # the task: the same items at the front, cut or not
    elif cut > 0 and edited < cut:
        return None
    else:
        k = len(items) - (full_len - edited)  # the kept items are the history's tail
    if not 0 <= k < len(items):
        return None
    return max(0, t1 - m.items(items[k:]))


def _held_texts(
    decision: dict[str, Any],
    step: dict[str, Any],
    pb: Payback,
    settings: PolicySettings,
    horizon: float,
    economic: float,
    rev2: bool,
    skipped: dict[str, Any] | None,
    sent: int,
) -> None:
    """A held turn's decision texts, deferred by run (defer_texts=True): the keys and order the eager
    path writes."""
    _paid(decision, pb, rev2, economic)
    _held(decision, step, pb, settings, horizon, economic)
    if skipped is not None:
        skipped.update((k, v) for k, v in step.items() if k != "status")
    decision["sent_tokens"] = sent


def _paid(decision: dict[str, Any], pb: Payback, rev2: bool, economic: float) -> None:
    """A weighed cut's pay-back on the decision record."""
    decision.update(pb.to_dict())
    if rev2:
        decision["economic_saving"] = round(economic)


def _held(
    decision: dict[str, Any],
    step: dict[str, Any],
    pb: Payback,
    settings: PolicySettings,
    horizon: float,
    economic: float,
) -> None:
    """Why a weighed cut was not made, on the decision record and the compaction step."""
    why = f"not worth it: {pb.text()}, expected to last {_turns(horizon)}"
    if pb.worth and settings.early and settings.revision >= 2:
        why = (
            f"not yet: {pb.text()}, but a cut saving under {economic / 1000:.1f}k/turn costs more "
            "than waiting for a deeper one"
        )
    decision.update(decision="held", reason=why)
    step["reason"] = why
    if step["status"] == "skipped":
        step["tokens_saved"] = pb.saves_per_turn


def _action(step: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in step.items() if k != "status"}
