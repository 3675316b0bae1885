"""simulate's held turns of a cost_aware column, decided from the turn before (the what-if column's lane).

A cost_aware column compacts a few dozen times in a long session and holds every other turn: the
request is the last one with the new messages appended (930-turn synthetic session: 888 of 930 turns).
`Pipeline.decide` finds that out the general way each turn: it assembles the window again, runs the
policy's stable stage (its lineage extended, planned, its carried outcome checked), weighs a cut, runs
the budget guarantee and the markers rule (~165 us a turn). The engine's express lane
(engine/pipeline_express.py) answers such a turn from the last one in its live build; this is the same
proof for simulate's builds, which run each column's own chain of compaction states on one replayed
pipeline and need only the decision (no request body, no trace, no journal):

- the turn before was decided by the general path (or by this lane) and held, or compacted with
  nothing else done: the request sent is the state applied to the assembly (the stable rules and the
  budget guarantee left it as it was), no spill failed, no marker placed;
- this turn has the very config, compaction state, cache rules and Measure, the same sources (their
  version, no bound values, nothing emergent due), the same task end, no latch flip, note, rename or
  recovery, and its history is the last one with messages appended (cost_aware._extend with the
  lineage that turn left; the stable rules' outcome holds, cost_aware._stable_holds);
- the policy holds, as cost_aware.run decides it: the request within the trigger and the ceiling
  (planned from the calibration and reserves of now, as the plan computes it) and, over the target,
  no early cut (cost_aware._choose_cut with the carried memos, then early_weigh.EarlyRule, which
  answers as run's pay-back and economic size do, bit for bit);
- at a provider that caches prefixes by itself (the markers rule then places nothing and records
  nothing: markers.automatic); a provider with breakpoints goes the general path.

Anything else: None, and the caller decides through Pipeline.decide, which then finds every memo the
lane touched as a general turn would have left it (the lineage extended, the cut memo, the primed
history total). tests/test_sim_held_lane.py holds the lane's builds equal to decide's, turn by turn.

It lives among the pipeline's own modules (engine/pipeline*.py) because it reads and sets a Pipeline's
private state, as the express lane does; no other module may (tests/test_public_fold.py). The few reads
of that state simulate's gates-closed column needs are in engine/pipeline_closed_reads.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from engine.artifacts import Message
from engine.optimize import markers
from engine.pipeline_express import LaneFixed, appended_since, extendable, lane_fixed
from engine.plan import ceiling_for
from engine.policy import cost_aware
from engine.policy.cachecost import CacheRules
from engine.policy.settings import WAVE1
from engine.policy.state import CompactionState
from engine.providers.policy import cache_policy
from engine.sections import history_section

if TYPE_CHECKING:
    from engine.assembly import Assembly, Measure
    from engine.config import PipelineConfig
    from engine.pipeline import Decided, Pipeline


class Held(NamedTuple):
    """What a column's last turn leaves for its next one to extend (compared by identity)."""

    cfg: PipelineConfig
    state: CompactionState
    cache: CacheRules | None  # the cache rules the build was asked to weigh by (None: the config's)
    measure: Measure
    sources_version: int
    task_end: int | None  # Pipeline._first_assistant then
    full: Assembly  # the raw assembly the turn was decided from (the history from the state's cut)
    elided: int
    history_len: int  # len(pipe.history) then (the pending message not yet closed)
    pending: Message | None  # the pending parts' message its history ended with
    slot: int  # cost_aware's carry slot of (limits, settings)
    fixed: LaneFixed | None = None  # what the lane's turns read of the config and state (None: not yet)


def after_decide(
    pipe: Pipeline, cfg: PipelineConfig, st: CompactionState, cache: CacheRules | None, d: Decided
) -> Held | None:
    """What the next turn of this column may extend from a turn decide just decided from state `st`, or
    None (see the module doc: held or compacted, nothing else done)."""
    if cfg.policy.name == WAVE1 or d.state is None or d.spill_failures or d.res.markers:
        return None
    if d.res.asm is not d.before:
        return None  # the stable rules or the budget guarantee changed the request
    # The turns the express lane extends: held, or compacted by cost_aware's step. (Its markers step
    # comes only at a provider with breakpoints, whose turns `turn` leaves to the general path.)
    if not extendable(d.decision, d.res.actions, d.state is st):
        return None
    full, elided = pipe._decided_from
    if not full or full[-1].id != "history":
        return None
    slot = cost_aware.carried_slot(pipe._carry, cfg.limits, cfg.policy)
    if slot is None:
        return None
    return Held(
        cfg,
        d.state,
        cache,
        pipe.measure,
        pipe._sources_version,
        pipe._first_assistant,
        full,
        elided,
        len(pipe.history),
        pipe._pending_msg,
        slot,
    )


def turn(
    pipe: Pipeline,
    c: Held,
    bound: dict[str, dict[str, Any]],
    cfg: PipelineConfig,
    st: CompactionState,
    cache: CacheRules | None,
) -> tuple[Assembly, int, Held] | None:
    """This turn's request (the state applied to the assembly, nothing else done), its plan's ceiling
    and what the next turn extends, when the policy holds and the lane can prove it; else None."""
    m = pipe.measure
    if cache is not c.cache or bound or not pipe.fast_path:
        return None
    since = appended_since(pipe, c, cfg, st)  # the express lane's checks and appended messages
    if since is None:
        return None
    appended, history_len, new_pending = since
    hidx = len(c.full) - 1
    hist = history_section((*c.full[hidx].items, *appended), ())  # type: ignore[arg-type]
    full = (*c.full[:hidx], hist)
    # The raw history's total, as _assemble_from primes it: the whole conversation's running sum.
    n_raw = pipe.history_tokens() + (m.item(new_pending) if new_pending is not None else 0)
    m.prime(hist, n_raw)
    lineages = pipe._carry.get(cost_aware.LINEAGE_CARRY)
    lin = lineages.get(c.slot) if lineages is not None else None
    settings, limits = cfg.policy, cfg.limits
    if lin is None or lin.full is not c.full or lin.slot != (limits, settings):
        return None
    ext = cost_aware._extend(lin, full, hidx, st, c.elided, lin.note, m, True)
    if ext is None:
        return None
    applied, _lin, new = ext
    if not cost_aware._stable_holds(lin, new, limits, pipe.spill, m, False):
        return None
    fixed = c.fixed
    if fixed is None:
        # Markers to place (a provider with breakpoints): the general path's, as are lane_fixed's Nones.
        if markers.automatic(cache_policy(cfg.provider, cfg.model)) is None:
            return None
        fixed = lane_fixed(pipe, cfg, st, applied, cache)
        if fixed is None:
            return None
    # The ceiling as the plan computes it from the calibration and reserves of now.
    reserves = pipe._reserves(cfg)
    ratio = pipe.stats.calibration_for(cfg.model)
    ceiling = ceiling_for(
        int(fixed.usable / ratio), reserves.response + reserves.thinking + reserves.schema
    )
    t1 = m.total(applied)
    trigger_tokens = int(settings.trigger * ceiling)
    target_tokens = int(settings.target * ceiling)
    # Forced, or over the ceiling (the budget guarantee's turn: Measure.total counts the reply priming
    # that trim_sections.fits_as_planned adds to the plan's estimate): the general path's.
    if t1 > trigger_tokens or t1 > ceiling:
        return None
    if t1 > target_tokens:
        full_len = len(hist.items) + c.elided
        cand = cost_aware._choose_cut(
            applied, st, target_tokens, m, full_len, pipe._carry, c.slot, (hidx, t1), lin.applied[hidx].items
        )
        if cand is not None and settings.early:
            stable = t1 - m.section(applied[hidx])
            if fixed.early.compacts(
                pipe.turn, t1, trigger_tokens, n_raw, t1 - cand.after, cand.after, stable
            ):
                return None  # the early rule compacts: the general path's turn
    cost_aware._extended_lineage(
        lineages,  # type: ignore[arg-type]
        c.slot,
        (limits, settings),
        lin,
        full,
        hidx,
        st,
        applied,
        m,
        limits,
    )
    pipe._pending_msg = new_pending  # the message the request's fold closes into the history
    # (The constructor, not _replace: a NamedTuple's _replace is a Python call through _make, every turn.)
    nxt = Held(
        cfg,
        st,
        cache,
        m,
        c.sources_version,
        c.task_end,
        full,
        c.elided,
        history_len,
        new_pending,
        c.slot,
        fixed,
    )
    return applied, ceiling, nxt
