"""The express lane: a steady append turn's request without the general path's walk (issue 12).

Between compactions most of an agent's turns only append messages (the last tool results, the reply)
to what the previous request sent, and the cost_aware policy holds: the general path then assembles,
plans, runs the policy and lays out every section again to find that nothing but the history's tail
changed. The lane starts from the previous turn's outcome instead and does only what a turn must:

- proves the turn is such a turn before it changes anything (the same config, compaction state,
  sources, Measure, serializer and task end; only messages appended; no latch flip, note, bind,
  recovery or emergent item; the stable rules left the last request as it was and the new messages
  hold no tool result over the spill threshold: cost_aware's own append-only proof, `_extend` and
  `_stable_holds`);
- counts the new content, re-plans the ceiling from the current calibration and reserves, and weighs a
  cut exactly as cost_aware.run does (`_choose_cut`, the pay-back): a turn the policy would compact,
  force or trim, or one the lane cannot prove, goes to the general path, which then decides as always;
- at a provider with cache markers (Anthropic, Bedrock), runs the markers rule as the general path
  does, which on such a turn carries the last placement with the tail marker moved to the newest
  message (markers._carried); the sections before the history keep their carried runs (their marks
  unchanged, or the general path's turn);
- appends the new messages' fragments through the serializer's append path (Serializer._section ->
  _appended, with its tool-call pairing check; with markers the message the tail marker left is
  written again unmarked, from its marked bytes) and makes the request from the last layout
  (Serializer.request_of), the body hash resumed as the general path resumes it;
- journals the same request event and keeps the trace as a TurnRecord whose inputs are made when it is
  first read, by the general policy run (cost_aware.run, nothing carried) over the turn's own assembly
  and the calibration and reserves it was planned with (engine/trace_lazy.py).

Only where the trace is deferred anyway (nothing observes the journal: Pipeline._defers_trace) and
with the cost_aware policy. `Pipeline.express = False` turns the lane off (the reference the tests
compare it with).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from engine.alerts import LOOKBACK
from engine.artifacts import Message
from engine.assembly import Assembly, Section
from engine.optimize import OptimizeContext, markers
from engine.pipeline_express_marks import _Marks, _moved_markers, _new
from engine.plan import Reserves, SectionEstimate, budget_of, ceiling_for, plan_of
from engine.policy import cost_aware
from engine.policy.early_weigh import EarlyRule
from engine.policy.lineage_carry import _Lineage
from engine.policy.settings import WAVE1
from engine.policy.state import CompactionState
from engine.providers.anthropic import sends_nothing, silent_error
from engine.providers.base import Serializer, _SectionRun
from engine.providers.lane_request import lane_request
from engine.providers.policy import cache_policy
from engine.sections import history_section
from engine.tokens import REPLY_PRIMING_TOKENS
from engine.trace import figures_of, section_shas_of
from engine.trace_lazy import TurnRecord
from engine.types import Form

if TYPE_CHECKING:
    from engine.config import PipelineConfig
    from engine.pipeline import Pipeline, Request
    from engine.policy.cachecost import CacheRules
    from engine.providers.base import SerializedRequest
    from engine.spill import SpillBackend
    from engine.tokens import Budget


# TurnRecord.later bound once (a class's attribute read through the class is the generic look-up).
_later = TurnRecord.later


class Carried(NamedTuple):
    """What a turn left for the lane's next turn (the objects it was built from, compared by identity)."""

    cfg: PipelineConfig
    state: CompactionState
    sources_version: int
    measure: Any
    serializer: Serializer
    task_end: int | None  # Pipeline._first_assistant then (None: no assistant message was seen yet)
    full: Assembly  # the raw assembly: the sources and the history as the pipeline assembled it
    hidx: int  # the history's index in it (and in `applied`)
    elided: int
    history_len: int  # len(pipe.history) when it was built (the pending message not yet closed)
    pending: Message | None  # the pending parts' message the history section ended with
    layout: list[tuple[Section, _SectionRun]]  # the serializer's layout of that request
    at: int  # the history's index in `layout`
    slot: int  # cost_aware's carry slot of (limits, settings)
    record: TurnRecord | None = None  # the lane's record of that turn (None: the general path made it)
    # The cache markers on the sections before the history in that request, when the lane made it
    # (Anthropic, Bedrock; None: not known, see _moved_markers).
    before_marks: tuple[Any, ...] | None = None
    marks: _Marks | None = None  # the markers rule's outcome on that turn, when the lane made it
    fixed: LaneFixed | None = None  # what the lane's turns read of the config and state (None: not yet)
    # What the lane's turn read of the traces before its own (Traces.views: the alert rules' look-back),
    # and its request event's short section hashes; None: the general path made that turn.
    earlier: list[dict[str, Any]] | None = None
    short: dict[str, str] | None = None
    # Sums over the sections before the history that lane turns read every turn, worked out on the first
    # lane turn after a general-path turn (None: not yet) and carried on, as `fixed` is (see _Sums).
    sums: _Sums | None = None
    # The lineage this turn left in cost_aware's carry when the lane made it (None: the general path's
    # turn). The next lane turn that finds this very object there extends it without asking _extend and
    # _stable_holds what holds by construction (see turn's streak).
    lineage: _Lineage | None = None


class _Sums(NamedTuple):
    """Sums over the sections before the history, the same on every lane turn of a streak: those sections
    are the very objects on each (each turn's assembly is the last one's with only the history replaced,
    and cost_aware._extend keeps the others; the layout likewise keeps their runs), and a section's
    count is a function of its items."""

    # The request's tokens but the history's: Measure.total's sum (the reply priming included) less its
    # last term, the history's.
    before: int
    live_other: int  # the per-item cache keys their runs hold: their share of the live keys _prune is told


class LaneFixed(NamedTuple):
    """What a lane turn reads of its config, cache rules and compaction state, worked out on the first
    lane turn after a general-path turn (`lane_fixed`) and carried on from lane turn to lane turn: each
    of those has the very config, cache rules and state objects and the same sections before the
    history (the lanes' first checks, cost_aware._extend), so these hold as they were, and the lane need
    not ask again every turn (the cache rules twice, the budget, the gate, whether the sections' ids
    are unique, whether a rewrite is served from the cache). Both lanes carry it (Carried.fixed,
    pipeline_held_lane.Held.fixed)."""

    rules: CacheRules  # the cache rules the turn is weighed by
    budget: Budget  # budget_of(cfg.window, cfg.margin)
    served: bool  # a rewrite's prefix served from the cache (revision 2: prefix_served_on_rewrite)
    rev2: bool  # the policy's revision is 2 or later
    early: EarlyRule  # the early rule's weighing under these rules, settings and state
    usable: int  # budget.usable (a property: a Python call and the generic attribute look-up a turn)


def lane_fixed(
    pipe: Pipeline, cfg: PipelineConfig, st: CompactionState, applied: Assembly, cache: CacheRules | None
) -> LaneFixed | None:
    """What the lanes' later turns read of `cfg`, the cache rules (`cache`, else the config's) and state
    `st`, or None when the lane cannot take turns under them: a closed gate (its account is the general
    path's) or a repeated section id in `applied` (the trace's section hashes are keyed by id)."""
    if not getattr(cfg.limits, cost_aware.GATE) or len({s.id for s in applied}) != len(applied):
        return None
    rules = cache or pipe.cache_rules(cfg)
    settings = cfg.policy
    rev2 = settings.revision >= 2
    served = cost_aware.prefix_served_on_rewrite(rules, st.compactions) if rev2 else True
    early = EarlyRule(rules, settings.horizon_scale, rev2, served)
    budget = budget_of(cfg.window, cfg.margin)
    return LaneFixed(rules, budget, served, rev2, early, budget.usable)


# Turns the lane stands aside after an agent read a lane turn's trace before its next request: an agent
# that reads each request's trace would pay for the lane's turn and then for the general policy run that
# makes the trace (~2-6% more a turn than the general path alone, measured); it is tried again after.
READ_PAUSE = 32


def only_markers(actions: list[dict[str, Any]]) -> bool:
    """Whether a held turn's actions leave it one the lane may extend: none, or only the cache markers
    (Anthropic, Bedrock place them every turn; the lane moves the tail one)."""
    return not actions or (len(actions) == 1 and actions[0].get("step") == markers.NAME)


def extendable(decision: dict[str, Any] | None, actions: list[dict[str, Any]], same_state: bool) -> bool:
    """Whether a turn the general path decided leaves one the lane may extend: held with only the cache
    markers, or a compaction (cost_aware's step) with nothing else but the markers. After a compaction
    the next turn only appends to what it sent, as after a held turn: the lane extends the assembly
    that turn was decided from (the history from the cut before it, `elided` as then), to which
    cost_aware applied the new state and which its lineage remembers (cost_aware.run's stage1 of that
    state); apply_state leaves the same history from either cut. Without it the turn after each
    compaction took the general path (2 of 26 steady turns of a 32k trajectory that compacts twice).
    `same_state`: the decided state is the one the turn started from (a held turn's must be)."""
    got = (decision or {}).get("decision", "held")
    if got == "held":
        return same_state and only_markers(actions)
    if got != "compacted" or not actions or actions[0].get("step") != cost_aware.STEP:
        return False
    return only_markers(actions[1:])


def carry(
    pipe: Pipeline, cfg: PipelineConfig, full: Assembly, elided: int, ser: Serializer
) -> Carried | None:
    """What the turn just built leaves for the lane, or None when the next turn cannot take the lane
    from it (the caller has checked that the turn is one the lane may extend, `extendable`, and that
    nothing failed to spill)."""
    hidx = len(full) - 1
    # (Turn 0 too, before the first assistant message: the next turn's appended reply and results only
    # extend the history, which no cut has touched, so where the task ends changes nothing the lane
    # reuses: with no cut the assembly is the whole history, the markers rule is run in full after a
    # general-path turn and finds the task's end in the items, and cost_aware's lineage keeps the task
    # end it remembered, as the general path's extension of it does. See turn's task end check.)
    if hidx < 0 or full[hidx].id != "history":
        return None
    layout = ser.layout
    at = next((i for i, (s, _run) in enumerate(layout) if s.id == "history"), -1)
    if at < 0:
        return None
    slot = cost_aware.carried_slot(pipe._carry, cfg.limits, cfg.policy)
    if slot is None:
        return None
    return Carried(
        cfg,
        pipe.compaction,
        pipe._sources_version,
        pipe.measure,
        ser,
        pipe._first_assistant,
        full,
        hidx,
        elided,
        len(pipe.history),
        pipe._pending_msg,
        layout,
        at,
        slot,
    )


def eligible(pipe: Pipeline, cfg: PipelineConfig) -> Serializer | None:
    """The serializer when this pipeline's turns may take the lane at all (see the module's docstring)."""
    if not pipe.express or cfg.policy.name == WAVE1:
        return None
    if pipe._lane_pause:
        pipe._lane_pause -= 1
        return None
    return pipe._serializer(cfg.provider)


class _Steady(Protocol):
    """What a lane's last turn left that appended_since compares (Carried, pipeline_held_lane.Held)."""

    @property
    def cfg(self) -> PipelineConfig: ...
    @property
    def state(self) -> CompactionState: ...
    @property
    def measure(self) -> Any: ...
    @property
    def sources_version(self) -> int: ...
    @property
    def task_end(self) -> int | None: ...
    @property
    def history_len(self) -> int: ...
    @property
    def pending(self) -> Message | None: ...


def appended_since(
    pipe: Pipeline, c: _Steady, cfg: PipelineConfig, st: CompactionState
) -> tuple[list[Any], int, Message | None] | None:
    """The messages a steady turn appends to the history `c`'s turn was built from, the history's
    length now and the message of the pending parts (None: none pending), or None when the turn is not
    one a lane may extend: another config, compaction state, Measure, sources or task end than `c`'s
    turn, a latch flip, a note to carry (an empty or silent message, a rename, pending parts that send
    nothing or fail silently), a recovery, an emergent item due, or nothing appended. Both lanes ask it
    (the express lane's live turns, simulate's held turns in engine/pipeline_held_lane.py)."""
    return _appended(
        pipe, cfg, st, c.cfg, c.state, c.measure, c.sources_version, c.task_end, c.history_len, c.pending
    )


def _appended(
    pipe: Pipeline,
    cfg: PipelineConfig,
    st: CompactionState,
    c_cfg: PipelineConfig,
    c_state: CompactionState,
    c_measure: Any,
    sources_version: int,
    task_end: int | None,
    c_history_len: int,
    c_pending: Message | None,
) -> tuple[list[Any], int, Message | None] | None:
    """appended_since's answer from the fields of the last lane turn it reads (the express lane's turn
    has them unpacked already: see turn)."""
    if (
        cfg is not c_cfg
        or st is not c_state
        or pipe.measure is not c_measure
        or pipe._sources_version != sources_version
        or (pipe._first_assistant != task_end and (task_end is not None or st.cut > 0))
        or pipe.flipped
        or pipe._empty_msgs
        or pipe._silent_errors
        or pipe._renamed
        or pipe.stats.recovery_turns_left > 0
        or (pipe.emergent.items and pipe.emergent.due(pipe.turn))  # (due()'s frame only when any wait)
        or pipe._sources_carry is None
        or pipe._sources_carry[0] != sources_version
    ):
        return None
    pending = pipe.pending
    if pending and (sends_nothing(pending) or silent_error(pending)):
        return None  # the history section would carry a note
    # The messages appended since: the last build's pending message (closed into the history as that
    # very object) first, when there was one.
    appended: list[Any] = pipe.history.since(c_history_len)  # (one read of the log: a list of the tail)
    history_len = c_history_len + len(appended)
    if c_pending is not None:
        if not appended or appended[0] is not c_pending:
            return None
        del appended[0]
    new_pending = Message("user", tuple(pending)) if pending else None
    if new_pending is not None:
        appended.append(new_pending)
    if not appended:
        return None
    return appended, history_len, new_pending


def turn(pipe: Pipeline, c: Carried) -> Request | None:
    """This turn's request through the lane, its request event journaled and its record kept (what
    Pipeline._finish_unobserved does after the general path), or None: the general path decides, and
    nothing was changed but memos (token counts, remembered cuts) the general path would make alike."""
    # The fields this turn reads, in one unpacking: Python 3.11 specializes no read of a named tuple's
    # field by name (each of the ~30 was the generic attribute look-up: the type's method cache and the
    # field's descriptor, two more places a cold turn reads from memory).
    (
        c_cfg, c_st, sources_version, c_m, ser_obj, task_end, c_full, hidx, elided, c_history_len, c_pending,
        c_layout, at, slot, was, c_before_marks, c_marks, fixed, c_earlier, c_short, sums, c_lineage,
    ) = c  # fmt: skip
    if was is not None and was.read():
        pipe._lane_pause = READ_PAUSE  # the agent reads the traces (see READ_PAUSE)
        return None
    cfg = pipe.config
    m = pipe.measure
    st = pipe.compaction
    if pipe._serializers.get(cfg.provider) is not ser_obj:
        return None
    since = _appended(pipe, cfg, st, c_cfg, c_st, c_m, sources_version, task_end, c_history_len, c_pending)
    if since is None:
        return None
    appended, history_len, new_pending = since
    old_hist = c_full[hidx]
    # (A type: ignore, not typing.cast: that is a Python call every turn. Two tuples joined, not
    # (*items, *appended), which builds a list of the whole history first and copies it into the tuple:
    # 107 -> 75 ns at 41 messages, 546 -> 330 ns at 300, measured.)
    hist = history_section(old_hist.items + tuple(appended), ())  # type: ignore[arg-type]
    full = c_full[:hidx] + (hist,)
    # The raw history's total, as _assemble_from primes it: the whole conversation's running sum.
    n_raw = pipe.history_tokens() + (m.item(new_pending) if new_pending is not None else 0)
    m.prime(hist, n_raw)
    lineages = pipe._carry.get(cost_aware.LINEAGE_CARRY)
    lin = lineages.get(slot) if lineages is not None else None
    if lin is None:
        return None
    # (One unpacking, as c's: a named tuple's fields read by name are generic look-ups.)
    (
        l_slot, l_full, l_state, l_elided, l_note, l_task_end, l_applied, l_tokens, l_measure, l_limits,
        l_spill_none, l_stable,
    ) = lin  # fmt: skip
    limits = cfg.limits
    settings = cfg.policy
    if l_full is not c_full or l_slot != (limits, settings):
        return None
    spill = pipe.spill
    if lin is c_lineage:
        # A streak: the lineage is the very one the lane's last turn left, made from this config (cfg is
        # c.cfg: _appended), state, Measure, elision and note, over a raw history the lane built with
        # history_section as it built `hist`, whose items this one's start with; its task end was before
        # that history's end and the state's cut within it (that turn's _extend proved both, and the
        # history has only grown since), its stable rules' outcome held under these limits. So _extend
        # would answer the applied history plus the appended messages, and _stable_holds would ask only
        # the spill backend and the new messages' results.
        new = tuple(appended)
        if l_spill_none != (spill is None):
            return None
        if l_applied is l_full:
            applied = full
        else:
            applied_hist = hist.with_items(l_applied[hidx].items + new, Form.TRIMMED, st.dropped_tokens)
            m.derived(applied_hist, l_tokens + sum(map(m.item, new)))
            applied = full[:hidx] + (applied_hist,)  # (the history is the assembly's last section)
        limit = limits.spill_threshold
        big = m.largest_result
        for it in new:
            if isinstance(it, Message) and big(it) > limit:
                return None
    else:
        # (`hist` is the lineage's raw history plus `appended`: lin.full is c.full.)
        ext = cost_aware._extend(lin, full, hidx, st, elided, l_note, m, True)
        if ext is None:
            return None
        applied, _lin, new = ext
        # The stable rules' proof reads only the context's limits, spill backend, Measure and dry run.
        if not cost_aware._stable_holds(lin, new, limits, spill, m, False):
            return None
    if fixed is None:
        fixed = lane_fixed(pipe, cfg, st, applied, None)
        if fixed is None:
            return None
    if sums is None:
        before = REPLY_PRIMING_TOKENS
        for s in applied[:hidx]:  # (the history is the assembly's last section: see carry)
            before += m.section(s)
        live_other = 0
        for i, (_s, run) in enumerate(c_layout):
            if i != at:
                live_other += len(run.keys)
        sums = _Sums(before, live_other)
    else:
        before, live_other = sums
    rules, budget, _served, rev2, early, usable = fixed
    # The ceiling, planned from the calibration and reserves of now (both move with every usage).
    reserves = pipe._reserves(cfg)
    ratio = pipe.stats.calibration_for(cfg.model)
    ceiling = ceiling_for(int(usable / ratio), reserves.response + reserves.thinking + reserves.schema)
    # m.total(applied), from the sum carried for the sections before the history (_Sums.before).
    # Exact, not an upper bound (a text's UTF-8 bytes bound its cl100k tokens) deciding the turn with
    # the count made later: this total is the record's final_tokens, which record_usage journals as the
    # usage event's `estimated` in this same agent turn and which calibration learns from (the next
    # turn's ceiling; replay folds that field to learn the same ratio). So every new text is tokenized
    # before the next model call whichever step asks first: a bound would move the count, not save it.
    h_tokens = m.section(applied[hidx])
    t1 = before + h_tokens
    trigger_tokens = int(settings.trigger * ceiling)
    target_tokens = int(settings.target * ceiling)
    if t1 > trigger_tokens or t1 + REPLY_PRIMING_TOKENS > ceiling:
        return None  # forced or trimmed: the general path's
    if t1 > target_tokens:
        # Weighed as cost_aware.run weighs it: a cut the early rule would make goes to the general path.
        full_len = history_len + (1 if new_pending is not None else 0)
        # (Its history is the lineage's plus the appended messages, so a cut remembered in that one is
        # followed without comparing the two.)
        cand = cost_aware._choose_cut(
            applied,
            st,
            target_tokens,
            m,
            full_len,
            pipe._carry,
            slot,
            (hidx, t1),
            l_applied[hidx].items,
        )
        # The pay-back and economic size, as cost_aware.run weighs them (the horizon from the turn, the
        # growth from the raw history), by the rule worked out on the first lane turn (early_weigh).
        if cand is not None and settings.early:
            *_, after = cand  # (_Cut.after, its last field, unpacked: by name it is the generic look-up)
            if early.compacts(pipe.turn, t1, trigger_tokens, n_raw, t1 - after, after, before):
                return None  # the early rule compacts: the general path's turn
    # Held. The request: the history's run extended by the appended messages, the rest as laid out.
    actions: list[dict[str, Any]] = []
    hmarks: frozenset[int] = frozenset()
    before_marks: tuple[Any, ...] | None = None
    marks_kept: _Marks | None = None
    if ser_obj.policy.supports_markers:
        moved = _moved_markers(cfg, rev2, full, applied, hidx, c_marks, c_before_marks, c_layout, m, lin)
        if moved is None:
            return None
        hmarks, actions, before_marks, marks_kept = moved
    tok = m.counter.tokenizer.name
    # The lane's own pass when its last turn was built by it or by the general steps below as a lane
    # turn (engine/providers/lane_request.py); else those steps: the history's run grown, the request
    # made from the last layout with it.
    made = lane_request(
        ser_obj, applied[hidx], c_layout[at][1], hmarks, tok, m, c_layout, at, cfg.model,
        cfg.max_output_tokens, live_other,
    )  # fmt: skip
    if made is not None:
        layout, ser = made
    else:
        hrun = ser_obj.grown(applied[hidx], c_layout[at][1], hmarks, tok, m)
        layout = list(c_layout)
        layout[at] = (applied[hidx], hrun)
        ser_obj._prune(live_other + len(hrun.keys))
        ser = ser_obj.request_of(layout, cfg.model, cfg.max_output_tokens, True, False, at)
    # What the turn and the next read at once; the rest of the trace when it is read.
    traces = pipe.traces
    last = traces.raw(-1) if traces else None
    prev_sections = last.section_shas if isinstance(last, TurnRecord) else section_shas_of(last)
    # The trace's section hashes: request_of's, one for each section of the layout, in its (wire) order
    # (the lane's sections have distinct ids: see lane_fixed). The request event's short ones: after a lane
    # turn, that turn's with the history's changed (the other sections' runs are the very ones it laid
    # out, so their hashes are the same), else each cut from the full one.
    shas = ser.section_shas.copy()
    hist_id = applied[hidx].id
    short = c_short
    if short is not None:
        short = short.copy()
        short[hist_id] = shas[hist_id][:16]
    else:
        short = {}
        for sid, sha in shas.items():
            short[sid] = sha[:16]
    # What the alert rules read of the traces before this one: when the last entry is the last lane
    # turn's record (the traces are only appended to), that turn's look-back moved on by its record.
    if was is not None and last is was and c_earlier is not None:
        earlier = [*c_earlier[1 - LOOKBACK :], was.alert_view]
    else:
        earlier = traces.views(len(traces), LOOKBACK)
    this_turn = pipe.turn
    make = _new(_LaneInputs, (
        pipe, cfg, st, m, full, hidx, n_raw, elided, budget, ratio, reserves, rules, ser, prev_sections,
        pipe._prev, earlier, this_turn, pipe.summaries, spill,
    ))  # fmt: skip
    view = {"actions": actions, "cacheable_prefix_tokens": ser.cacheable_prefix_tokens, "latch_flips": []}
    rec = _later(this_turn, t1, ceiling, shas, view, earlier, make)
    # The lineage the next turn (either path) extends: this one, what cost_aware._extended_lineage
    # remembers (its fields from the unpacked `lin`; the history's total is t1's).
    kept = _new(_Lineage, (
        l_slot, full, st, l_elided, l_note, l_task_end, applied, h_tokens, m, limits, l_spill_none, l_stable,
    ))  # fmt: skip
    lineages[slot] = kept  # type: ignore[index]
    # Before the request event is folded (it closes the pending parts into the history).
    pipe._express = _new(Carried, (
        cfg, st, sources_version, m, ser_obj, pipe._first_assistant, full, hidx, elided, history_len, new_pending,
        layout, at, slot, rec, before_marks, marks_kept, fixed, earlier, short, sums, kept,
    ))  # fmt: skip
    pipe._pending_msg = new_pending  # the message _close_pending files (see Pipeline._assemble_from)
    return pipe._lane_record(rec, ser, short)


class _LaneInputs(NamedTuple):
    """What a lane turn's record is made from when its trace is first read (TurnRecord.later): called,
    the general policy run over the turn's assembly, planned with the turn's calibration and reserves,
    gives the plan, result and decision the general path made or would make, in TurnRecord's order.

    One named tuple, not a closure: a closure kept ~20 cells, a function and its tuple alive per turn
    (until the journal lets the record go), each tracked by the garbage collector, so young collections
    ran more often inside lane turns; and its cell of the turn's Carried held that Carried (its layout
    list, assembly) alive through the record. It holds no Carried: whether the pipeline still carries
    this turn is asked of the carried record (TurnRecord.made_by, by identity). A tuple made by
    tuple.__new__ (`_new`, in C) rather than a slotted object whose __init__ sets each field: ~40 of the
    interpreter's steps fewer every lane turn, and one object, not two. (Callable, which a made record's
    plain tuple of inputs is not: TurnRecord tells the two apart so.)"""

    pipe: Pipeline
    cfg: PipelineConfig
    state: CompactionState
    measure: Any
    full: Assembly
    hidx: int
    n_raw: int
    elided: int
    budget: Budget
    ratio: float
    reserves: Reserves
    rules: CacheRules  # LaneFixed.rules
    ser: SerializedRequest  # the turn's request (request_of's)
    prev_sections: dict[str, str]  # the trace's section hashes before this turn's
    prev: tuple[Any, ...] | None  # Pipeline._prev then
    earlier: list[dict[str, Any]]  # the alert rules' look-back
    turn: int
    summaries: dict[str, str]  # Pipeline.summaries
    spill: SpillBackend | None  # Pipeline.spill

    def __call__(self) -> tuple[Any, ...]:
        # Read before the next turn (an agent reading each request's trace), with the pipeline's carried
        # memos, which then hold this very turn (the same answers, without re-applying the state); later,
        # afresh.
        (
            pipe, cfg, state, m, full, hidx, n_raw, elided, budget, ratio, reserves, rules, ser, prev_sections,
            prev, earlier, turn, summaries, spill,
        ) = self  # fmt: skip
        m.prime(full[hidx], n_raw)
        now = pipe._express
        live = (
            pipe._carry if now is not None and now.record is not None and now.record.made_by(self) else None
        )

        def plan_fn(a: Assembly) -> tuple[Any, Reserves, float]:
            est = tuple(SectionEstimate(s.id, s.name, s.kind, s.scope, s.priority, m.section(s)) for s in a)
            p = plan_of(
                int(budget.limit / ratio), int(budget.usable / ratio), cfg.thresholds, reserves, est, False
            )
            return p, reserves, ratio

        def make_ctx(p: Any) -> OptimizeContext:
            return OptimizeContext(
                p, cfg.limits, cache_policy(cfg.provider, cfg.model), m, spill, None, False
            )

        out = cost_aware.run(
            full,
            state,
            settings=cfg.policy,
            limits=cfg.limits,
            cache=rules,
            measure=m,
            plan_fn=plan_fn,
            make_ctx=make_ctx,
            turn=turn,
            summary_text=summaries.get,
            elided=elided,
            carry=live,
        )
        fig = figures_of(out.before, out.res, ser, m)
        return (
            cfg,
            out.plan,
            out.reserves,
            out.res,
            fig,
            prev_sections,
            [],
            list(out.spill_failures),
            out.ratio,
            out.decision,
            None,
            (prev[0], prev[1]) if prev else None,
            bool(prev and prev[2] != cfg.model),
            earlier,
        )
