"""The one pass over a recording's journal that builds every turn's request for every column
(`_build_pass`): the what-if, gates-closed and recorded settings, each engine policy asked for, and the
uncompacted view the peer policies start from; the builds held against the recorded traces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from engine.artifacts import Message
from engine.assembly import Measure
from engine.config import PipelineConfig
from engine.optimize.context import OptimizeLimits
from engine.policy.cachecost import CacheRules
from engine.policy.settings import WAVE1, PolicySettings
from engine.policy.state import CompactionState
from engine.providers.base import Block
from engine.recording.journal import Event, trace_of
from engine.recording.replay import Replayer
from engine.sim.blocks import SimBuilder, SimBuilt
from engine.sim.simulate_requests import _Req
from engine.sim.turn_views import TurnViews
from engine.types import SectionKind

# Turns checked with an extra recorded-settings build when carried counts are in use and no column
# runs the recorded settings (an import simulated under a what-if): about this many, evenly spread.
CHECK_SAMPLE = 16


UNBOUNDED = 100_000_000  # a window nothing outgrows: the uncompacted view the peers start from


WAVE1_SETTINGS = PolicySettings(name=WAVE1)


@dataclass
class _Pass:
    """The requests of one pass over a recording, by column, and the conversation views the peers build from."""

    pipeline: list[_Req]
    gates_closed: list[_Req]
    recorded: list[_Req] | None
    engine: dict[str, list[_Req]]  # engine policy columns by name
    views: TurnViews  # the uncompacted conversation per turn, for the peers
    calibration: float  # provider tokens per engine token, learned from the recorded usage
    recorded_is_pipeline: bool = False  # every turn's recorded-settings request is the pipeline one
    closed_is_pipeline: bool = False  # likewise the gates-closed request
    # Each turn's recorded reply (its text, tool calls and reasoning), whose engine tokens are the output
    # tokens of a turn the source kept no usage for; counted (`reply_tokens`) only for such a turn.
    replies: dict[int, Message] = field(default_factory=dict)
    measure: Measure | None = None

    def reply_tokens(self, turn: int) -> int:
        assert self.measure is not None
        return sum(map(self.measure.part, self.replies[turn].parts))


def _build_pass(
    events: Iterable[Event],
    replayer: Replayer,
    pipe_overrides: dict[str, Any],
    need_recorded: bool,
    engine_policies: Sequence[str] = (),
    peers: bool = False,
    markers: bool = False,
    cache: CacheRules | None = None,
    check: bool = False,
) -> _Pass:
    """Fold the journal once; at every request build it under the what-if, gates-closed and (when
    needed) recorded settings, each engine policy asked for, and the uncompacted view the peers
    start from. Mirrors Replayer.verify so the fold cannot drift from replay. `events` are read once,
    in order, and none is kept (a recording read from disk: see simulate_stream).

    `check`: when the token counts come from the recording's table, every build is held against the
    recorded trace of its turn (section content hash and tokens; see `SimBuilt.check_counts`), when that
    turn's `turn` event comes (right after its request and usage); turns where no column runs the
    recorded settings get a recorded-settings build for the check on a sample of turns."""
    if peers:
        from engine.sim.policies.base import HistoryBlocks

        history_blocks = HistoryBlocks()  # one for every turn's view: each message's Block made once
    pipe = replayer.new_pipeline()
    builder = SimBuilder(pipe)
    every = max(1, replayer.turns // CHECK_SAMPLE) if check else 0
    last_turn = max(replayer.request_index, default=0)
    same = closed_same = True
    closed = OptimizeLimits.all_closed()
    out_p: list[_Req] = []
    out_c: list[_Req] = []
    out_r: list[_Req] | None = [] if need_recorded else None
    out_e: dict[str, list[_Req]] = {n: [] for n in engine_policies}
    st_e: dict[str, CompactionState] = {n: CompactionState() for n in engine_policies}
    views = TurnViews()
    st_p = st_c = st_r = CompactionState()
    cfgs: _Configs | None = None
    replies: dict[int, Message] = {}
    awaiting: int | None = None  # the turn whose reply is the next `msg` event
    # The builds of the last request still to be held against its turn's recorded trace: (turn, builds).
    # The trace comes two events later; the builds are immutable, so checking them then is checking them
    # now (the whole journal was held before, to look each turn's trace up at its request).
    to_check: tuple[int, list[SimBuilt]] | None = None
    for ev in events:
        k = ev.get("k")
        if k == "turn" and to_check is not None and ev.get("turn") == to_check[0]:
            _check_builds(to_check, _sections_of(trace_of(ev)))
            to_check = None
        if k == "request":
            if to_check is not None:  # a turn with no trace of its own: nothing recorded to hold it to
                to_check = None
            pipe.begin_request(ev["turn"])
            bound = ev.get("bound", {})
            base: PipelineConfig = pipe.config
            if cfgs is None or cfgs.base is not base:
                # Derived once per recorded config (configs are frozen; a fold replaces, never edits).
                cfgs = _Configs(base, pipe_overrides, closed, engine_policies)
            pcfg, ccfg = cfgs.pcfg, cfgs.ccfg
            t = float(ev.get("time") or 0.0)
            # Each column runs its own chain of compaction states: the folded (recorded) state belongs
            # to the recorded settings, not to a what-if window.
            # What-if columns weigh compactions by the simulated cache rules and the named model's
            # prices; the recorded column keeps the recorded ones (it is what the engine did).
            bp = builder.build(bound, pcfg, st_p, cache)
            # A what-if with every gate closed already (or a recording made so) is its own gates-closed
            # column: the same build of the same inputs, so it is not built twice. The two state chains
            # start equal and stay equal for as long as this holds.
            closed_is_pipeline = cfgs.closed_is_pipeline and st_c == st_p
            closed_same = closed_same and closed_is_pipeline
            bc = bp if closed_is_pipeline else builder.build(bound, ccfg, st_c, cache)
            st_p, st_c = bp.state or st_p, bc.state or st_c
            rp = _req(ev["turn"], t, bp)
            out_p.append(rp)
            out_c.append(rp if closed_is_pipeline else _req(ev["turn"], t, bc))
            same = same and cfgs.recorded_is_pipeline
            if out_r is not None:
                br = bp if cfgs.recorded_is_pipeline else builder.build(bound, base, st_r)
                st_r = br.state or st_r
                # The recorded-settings request is the pipeline's own when the settings are the same.
                out_r.append(rp if br is bp else _req(ev["turn"], t, br))
            if check:
                todo = [bp]
                if bc is not bp:  # a column that is the pipeline's own build is checked once
                    todo.append(bc)
                if out_r is not None:
                    if br is not bp:
                        todo.append(br)
                elif not cfgs.recorded_is_pipeline and (ev["turn"] % every == 0 or ev["turn"] == last_turn):
                    todo.append(builder.build(bound, base))
                to_check = (ev["turn"], todo)
            for name in engine_policies:
                b = builder.build(bound, cfgs.engine[name], st_e[name], cache)
                st_e[name] = b.state or st_e[name]
                out_e[name].append(_req(ev["turn"], t, b))
            if peers:
                # The whole conversation, never compacted, laid out as the engine would send it.
                # Its system blocks (every Block not of the history section) taken by section runs.
                items: Sequence[Any]
                view = builder.view_apart(bound, cfgs.full)
                if view is not None:  # (the same, without a tuple of the conversation)
                    system, own = view
                    items = pipe.history.whole()
                else:
                    full = builder.build(bound, cfgs.full, apart="history", whole=False)
                    hist = next((s for s in full.asm if s.kind == SectionKind.HISTORY), None)
                    items = hist.items if hist is not None else ()
                    system, own = cast("tuple[Block, ...]", full.others), full.log_own
                # The history's messages (only the items past the last turn's conversation checked; the
                # first `own` of them, when known, the log's own: see blocks._log_own).
                views.add_items(
                    ev["turn"],
                    system,
                    items,
                    pcfg.window,
                    bp.ceiling,
                    markers,
                    pipe.measure,
                    history_blocks,
                    pipe.history,
                    own,
                )
        pipe.fold(ev)
        if k == "request":
            awaiting = ev["turn"]
        elif k == "msg" and awaiting is not None:
            # The model's reply to that request (a failed call has none: the next request comes first).
            replies[awaiting] = pipe.history[-1]
            awaiting = None
    ratio = pipe.stats.calibration_for(pipe.config.model)
    return _Pass(
        out_p,
        out_c,
        out_r,
        out_e,
        views,
        ratio,
        same and out_r is not None,
        closed_same,
        replies,
        pipe.measure,
    )


class _Configs:
    """The configs one recorded config gives every column, and how they compare."""

    def __init__(
        self,
        base: PipelineConfig,
        overrides: dict[str, Any],
        closed: OptimizeLimits,
        engine_policies: Sequence[str],
    ) -> None:
        self.base = base
        self.pcfg = base.with_overrides(**overrides)
        self.ccfg = replace(self.pcfg, limits=closed)
        self.closed_is_pipeline = self.ccfg == self.pcfg
        self.recorded_is_pipeline = base == self.pcfg
        self.engine = {n: self.pcfg.with_overrides(policy=n) for n in engine_policies}
        # The whole conversation, never compacted, laid out as the engine would send it (the peers' view).
        self.full = replace(self.pcfg, window=UNBOUNDED, limits=closed, policy=WAVE1_SETTINGS)


def _sections_of(trace: Mapping[str, Any]) -> dict[str, tuple[str, int, int]]:
    """(content hash, tokens, items; -1: not recorded) of each section a recorded trace lists, by id."""
    return {
        str(s["id"]): (str(s["sha256"]), int(s["tokens"]), int(s.get("items", -1)))
        for s in trace.get("sections", ())
    }


def _check_builds(todo: tuple[int, list[SimBuilt]], recorded: Mapping[str, tuple[str, int, int]]) -> None:
    turn, builds = todo
    for b in builds:
        b.check_counts(turn, recorded)


def _req(turn: int, t: float, b: SimBuilt) -> _Req:
    return _Req(turn, t, b.blocks, b.actions, b.latch_flips)  # a list of its own (SimBuilder's)
