"""simulate's build of a turn: the request's Blocks and the engine's decisions, nothing else.

The simulated columns need, per request, its Blocks (wire order, content hash, tokens, cache marker:
the cache simulator's input and the cache-break attribution's), the optimize steps taken, the latches
that flipped and the compaction state the next turn starts from. `Pipeline.build` also writes the
provider request's fragments (canonical JSON of every new message), hashes every section, and builds
the EXPLAIN trace; simulate read none of that but the section hashes and token totals of the
token-count check. Here the same decision (`Pipeline.decide`) is laid out by BlockLayout
(block_layout.py), which keeps only the Blocks of the serializer's section runs: a Block is a pure
function of (tokenizer, section, item hash, marked), so they are the ones `build` gives
(tests/test_sim_block_layout.py holds them to the provider serializer's); the check's section hashes
are computed only where a token total disagrees (see `SimBuilt.check_counts`).

A build with every gate cost_aware reads closed and no compaction cut (simulate's gates-closed column,
every turn) skips the policy's decision machinery: with those gates closed, cost_aware.run provably
holds the state, its stable rules only dry-run and its request is the budget guarantee and the markers
applied to the assembled conversation (see `closed_uncut`; tests/test_sim_closed_build.py holds the
two side by side). That was about a sixth of such a build (105 M of ~3,180 M instructions of a
930-turn simulate). Its history cut is carried from turn to turn (closed_cut.py): such a build then
costs what was appended and what it sends, not the whole conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from engine import pipeline_held_lane as held_lane
from engine.assembly import Assembly, Measure, Section, wire_order
from engine.config import PipelineConfig
from engine.errors import ContextPipeError
from engine.hashing import sha256_hex
from engine.optimize import RULES, OptimizeResult, optimize, trim_sections
from engine.optimize import markers as marker_rule
from engine.pipeline import Pipeline
from engine.policy import cost_aware
from engine.policy.cachecost import CacheRules
from engine.policy.settings import WAVE1
from engine.policy.state import CompactionState
from engine.providers import Serializer, make_serializer
from engine.providers.base import Block
from engine.providers.policy import cache_policy
from engine.sim.block_layout import BlockLayout
from engine.sim.closed_cut import ClosedCut
from engine.sim.wave1_lane import Wave1Lane
from engine.types import SectionKind

if TYPE_CHECKING:
    from engine.optimize.context import Marker

_SHA = attrgetter("sha")


class CountsDisagree(ContextPipeError):
    """A build under carried token counts disagrees with the recording's own trace."""


# Fragments that are not written: simulate never sends or hashes the request body. (System and tool
# blocks are typed as dicts; an empty one is as cheap, and those sections rarely change.)
def _no_block(*_args: Any) -> dict[str, Any]:
    return {}


def _no_bytes(*_args: Any) -> bytes:
    return b""


class _Unhashed:
    """Stands in for the serializer's section hasher: simulate reads no section hash (see module doc)."""

    def hexdigest(self, _text: str) -> str:
        return ""


class BlockSerializer(Serializer):
    """The provider's serializer (its cache policy: where markers go, automatic prefix caching) with
    hooks that write no fragment and no section hash; serialize(..., body=False) gives its Blocks, and
    so do blocks() and blocks_apart(), laid out by BlockLayout without the rest of a section run."""

    def __init__(self, provider: str) -> None:
        super().__init__(make_serializer(provider).policy, _no_block, _no_block, _no_bytes, _no_bytes)
        self._section_hash = _Unhashed()  # type: ignore[assignment]
        self._layout = BlockLayout()

    def blocks(self, asm: Assembly, markers: tuple[Marker, ...], measure: Measure) -> list[Block]:
        """serialize(..., body=False)'s Blocks, without what only a request or a trace reads: laid out
        by BlockLayout (block_layout.py), which keeps only the Blocks of the serializer's runs."""
        out: list[Block] = []
        for _s, blocks in self._layout.sections(asm, markers, measure):
            out += blocks
        return out

    def blocks_apart(
        self,
        asm: Assembly,
        markers: tuple[Marker, ...],
        measure: Measure,
        section: str,
        whole: bool = True,
        own: tuple[object, int] | None = None,
    ) -> tuple[list[Block], tuple[Block, ...]]:
        """(blocks(asm, markers, measure), those of them not of `section`), the second taken by whole
        section runs: a run's Blocks are all of its section (each is made under its section's id), so
        a turn's system blocks are not picked out of the whole conversation's Blocks one by one.

        `whole=False`: the first is [] (not made). The build pass reads only the others of its whole
        conversation's build; the list of all its Blocks was a copy of the conversation's every turn
        (O(session) a turn: ~6,000 Blocks copied and freed a turn at the end of a 3,000-turn what-if).
        Every section is laid out all the same (the layout's runs carry to the next turn). `own`: what
        the history's first items are known to be (BlockLayout.sections)."""
        out: list[Block] = []
        others: list[Block] = []
        for s, blocks in self._layout.sections(asm, markers, measure, own):
            if whole:
                out += blocks
            if s.id != section:
                others += blocks
        return out, tuple(others)


@dataclass
class SimBuilt:
    """One turn as a simulated column needs it."""

    blocks: list[Block]  # ([] for a build(..., apart=..., whole=False): not made)
    actions: list[str]  # the optimize steps taken, by name
    latch_flips: list[str]
    ceiling: int
    state: CompactionState | None  # the compaction state after this request (cost_aware policy)
    asm: Assembly  # what is sent, by section
    measure: Measure
    # The Blocks not of the section build(..., apart=...) named (a peer's system blocks), else None.
    others: tuple[Block, ...] | None = None
    # n >= 0: the history section's first n items are pipe.history's own messages [0, n), the very
    # objects (see _log_own); -1: not known (the build took a path that does not say).
    log_own: int = -1

    def check_counts(self, turn: int, recorded: Mapping[str, tuple[str, int, int]]) -> None:
        """A section with the recorded content must have the recorded token total, whatever else the
        what-if changed: counts are a function of the content alone. A carried count that is wrong for
        any text the recorded requests sent shows up here. `recorded`: (content hash, tokens, items or
        -1) by section id. The section's hash (sha256 of its items' hashes joined, as the trace records
        it) is computed only when the totals differ and the item counts do not rule it out."""
        m = self.measure
        get = recorded.get
        bad: list[tuple[Section, int, int]] = []
        for s in self.asm:  # assembly order: no wire-order tuple per build (see below for the report)
            rec = get(s.id)
            if rec is None:
                continue
            tokens = m.section(s)
            if (
                rec[1] != tokens
                and rec[2] in (-1, len(s.items))
                and rec[0] == sha256_hex("".join(map(_SHA, s.items)))
            ):
                bad.append((s, tokens, rec[1]))
        if bad:
            # The report names the first in wire order, as it always has (ordered only on this rare path).
            rank = {id(w): i for i, w in enumerate(wire_order(self.asm))}
            s, tokens, traced = min(bad, key=lambda b: rank[id(b[0])])
            raise CountsDisagree(
                f"turn {turn}, section {s.id}: {tokens} tokens from the recording's count "
                f"table, {traced} in its trace"
            )


def _history_of(asm: Assembly) -> Section | None:
    return next((s for s in asm if s.kind == SectionKind.HISTORY), None)


def _log_own(pipe: Pipeline, whole: Assembly, sent: Assembly) -> int:
    """len(pipe.history) when `sent`'s history is `whole`'s, `whole` being pipe.assembled(bound) (no cut),
    and the log keeps its messages in one list it only appends to (chunk None: it never writes any to
    disk, so release, park and unpark leave it as it is; no message replaced by an agent's edit,
    Pipeline.edit_text); else -1.

    Why its first len(log) items are then the log's own messages: Pipeline._assemble_from with no cut
    takes the conversation as HistoryLog.since(0) (task_and_window(te, 0) is None: te < 0 never holds),
    a copy of the log's list; history_section makes its items a tuple of those objects, with the
    pending parts, if any, closed into one new message after them; a note is added by replace, which
    keeps the items. A rule that changed the history would have made another Section (frozen), so the
    same items tuple in what is sent says none did. The peers' views take it (TurnViews.add_items) to
    check only what a turn appended, not the whole conversation's identity every turn."""
    log = pipe.history
    if log.chunk is not None or log.edits:  # (an agent's edit replaced a message: not appends only)
        return -1
    h, w = _history_of(sent), _history_of(whole)
    n = len(log)
    if h is None or w is None or h.items is not w.items or len(h.items) < n:
        return -1
    if n and h.items[n - 1] is not log.newest():  # (cheap: what the reasoning above says, at its end)
        return -1
    return n


# The gates cost_aware.run reads before its budget guarantee: its stable rules' and the compaction's.
# A stable rule with no gate (always on) would change the request: then no build is a closed one.
_POLICY_GATES: tuple[str, ...] | None = (
    None
    if any(r.gate is None for r in cost_aware.STABLE_RULES)
    else tuple(str(r.gate) for r in cost_aware.STABLE_RULES) + (cost_aware.GATE,)
)


# The rules optimize runs whatever the gates say (the budget guarantee, the markers): with every other
# gate closed, a wave-1 build's request is what these make of the assembly (see closed_wave1).
_ALWAYS_ON = tuple(r for r in RULES if r.gate is None)


def closed_wave1(cfg: PipelineConfig) -> bool:
    """Whether a wave-1 build under `cfg` has every gated rule closed, so `SimBuilder` may run only the
    always-on rules. Read from Pipeline.decide and optimize: wave 1 plans the whole conversation and
    runs `optimize` over it; a closed gate's rule only dry-runs (on a copy of the context, with no side
    effects: it measures what it would have saved for the trace's skipped steps) and the assembly goes
    on unchanged, with no action and no marker. What is left is the always-on rules over the same
    assembly in the same context: the same request, markers and actions, without a walk per closed rule
    over the whole conversation (the peers' uncompacted view of a session-wide what-if, every turn:
    about a quarter of that build on a 930-turn session, and more as it grows)."""
    if cfg.policy.name != WAVE1:
        return False
    lim = cfg.limits
    return not any(getattr(lim, r.gate) for r in RULES if r.gate is not None)


def closed_uncut(cfg: PipelineConfig, st: CompactionState) -> bool:
    """Whether cost_aware.run's request under `cfg` from state `st` is the budget guarantee and the
    markers applied to the assembled conversation, its state `st` (so `SimBuilder` may build it so).

    Read from cost_aware.run: with no cut (st.cut <= 0) the state applies nothing (apply_state and the
    lineage's extension hand back the assembly itself) and the note is empty; with the stable rules'
    gates closed, `optimize` only dry-runs them (a closed gate's rule measures what it would have
    saved, without side effects) and the assembly goes on unchanged, with no action; with the
    drop_rounds gate closed no cut is chosen, or one is only reported ("skipped"), so the state is
    held and no action is taken. What is left is run's tail: the plan of that assembly, the budget
    guarantee (trim_sections, skipped as run skips it when the plan fits) and the markers, plus, at
    revision 2, a breakpoint on the task (with no note: the assembly is the raw one). The wave-1
    policy plans and optimizes otherwise (no task breakpoint): not covered."""
    if cfg.policy.name == WAVE1 or st.cut > 0 or _POLICY_GATES is None:
        return False
    lim = cfg.limits
    return not any(getattr(lim, g) for g in _POLICY_GATES)


class SimBuilder:
    """Builds turns of one folded pipeline as `Pipeline.build(..., body=False, lean=True)` would, for
    simulate: the same decisions and Blocks, without the request body, the section hashes or the trace.
    `closed_fast=False` builds every turn through Pipeline.decide (the reference the tests hold the
    closed builds against)."""

    def __init__(
        self,
        pipe: Pipeline,
        closed_fast: bool = True,
        carry_cut: bool = True,
        held: bool = True,
        wave1_lane: bool = True,
    ) -> None:
        self.pipe = pipe
        self._serializers: dict[str, BlockSerializer] = {}
        self.closed_fast = closed_fast
        # closed_uncut's answer for a config with a state that has no cut, by config (simulate derives a
        # column's config once and builds every turn with it; held, so its id is not reused).
        self._uncut: dict[int, tuple[PipelineConfig, bool]] = {}
        self._wave1: dict[int, tuple[PipelineConfig, bool]] = {}  # closed_wave1's answers, likewise
        # The closed builds' history cut from carried running sums (closed_cut.py); False: through
        # trim_sections over the whole conversation every build (the reference the tests hold it to).
        self._cut = ClosedCut() if carry_cut else None
        # Per cost_aware column (by config): what its last turn leaves for a held turn to extend
        # (engine/pipeline_held_lane.py); None when `held` is False (every such turn through Pipeline.decide).
        self._held: dict[int, held_lane.Held] | None = {} if held else None
        # The wave-1 column's builds from the conversation's running sums (wave1_lane.py); None: every
        # such build through Pipeline.decide (the reference the tests hold it to).
        self._wave1_lane = Wave1Lane() if wave1_lane and closed_fast else None

    def build(
        self,
        bound: dict[str, dict[str, Any]],
        cfg: PipelineConfig,
        state: CompactionState | None = None,
        cache: CacheRules | None = None,
        apart: str | None = None,
        whole: bool = True,
    ) -> SimBuilt:
        """The turn under `cfg` from `state`; with `apart`, its Blocks not of that section too (others),
        and with `whole=False` as well, only those: its `blocks` are [] (see BlockSerializer.blocks_apart)."""
        pipe = self.pipe
        ser = self._serializers.get(cfg.provider)
        if ser is None:
            ser = self._serializers[cfg.provider] = BlockSerializer(cfg.provider)
        m = pipe.measure
        st = pipe.compaction if state is None else state
        if self.closed_fast and st.cut <= 0 and self._uncut_cfg(cfg):
            asm, marks, actions, ceiling = self._closed(bound, cfg)
            if apart is not None:
                blocks, others = ser.blocks_apart(asm, marks, m, apart, whole)
                return SimBuilt(blocks, actions, list(pipe.flipped), ceiling, st, asm, m, others)
            return SimBuilt(ser.blocks(asm, marks, m), actions, list(pipe.flipped), ceiling, st, asm, m)
        if self.closed_fast and self._wave1_cfg(cfg):
            asm = pipe.assembled(bound)  # as decide assembles for wave 1: the whole conversation
            the_plan = pipe.planned(cfg, asm)
            res = optimize(asm, pipe.optimize_context(cfg, the_plan), _ALWAYS_ON)
            own = _log_own(pipe, asm, res.asm)
            rest: tuple[Block, ...] | None = None  # the Blocks not of `apart`
            if apart is not None:
                known = (pipe.history, own) if own >= 0 else None
                blocks, rest = ser.blocks_apart(res.asm, res.markers, m, apart, whole, known)
            else:
                blocks = ser.blocks(res.asm, res.markers, m)
            actions = [str(a["step"]) for a in res.actions]
            # Wave 1 keeps no compaction state (decide hands back None).
            return SimBuilt(
                blocks, actions, list(pipe.flipped), the_plan.ceiling, None, res.asm, m, rest, own
            )
        if self._wave1_lane is not None and apart is None and cfg.policy.name == WAVE1:
            lane = self._wave1_lane.build(pipe, bound, cfg)
            if lane is not None:
                sent, marks, steps, ceiling = lane
                # Wave 1 keeps no compaction state (decide hands back None).
                return SimBuilt(ser.blocks(sent, marks, m), steps, list(pipe.flipped), ceiling, None, sent, m)
        lanes = self._held if apart is None else None
        if lanes is not None:
            carried = lanes.pop(id(cfg), None)
            if carried is not None:
                got = held_lane.turn(pipe, carried, bound, cfg, st, cache)
                if got is not None:  # held: the state applied to the assembly, nothing else done
                    sent, ceiling, lanes[id(cfg)] = got
                    return SimBuilt(ser.blocks(sent, (), m), [], list(pipe.flipped), ceiling, st, sent, m)
        # defer_texts: a held turn's pay-back and reason texts are only the trace's (Decided.finish, never
        # called here): simulate reads the steps taken, the state and the request, not why a cut waited.
        d = pipe.decide(bound, cfg, state, cache, lean=True, defer_texts=True)
        if lanes is not None:
            nxt = held_lane.after_decide(pipe, cfg, st, cache, d)
            if nxt is not None:
                if len(lanes) >= 16:
                    lanes.clear()
                lanes[id(cfg)] = nxt
        if apart is not None:
            blocks, apart_blocks = ser.blocks_apart(d.res.asm, d.res.markers, m, apart, whole)
        else:
            blocks, apart_blocks = ser.blocks(d.res.asm, d.res.markers, m), None
        return SimBuilt(
            blocks,
            [str(a["step"]) for a in d.res.actions],
            list(pipe.flipped),
            d.plan.ceiling,
            d.state,
            d.res.asm,
            m,
            apart_blocks,
        )

    def view_apart(
        self, bound: dict[str, dict[str, Any]], cfg: PipelineConfig
    ) -> tuple[tuple[Block, ...], int] | None:
        """What build(bound, cfg, apart="history", whole=False) gives the peers' view (`cfg`: wave 1 with
        every gate closed at a window nothing outgrows; simulate_pass): its Blocks not of the history
        (`others`) and how many of the history's first items are the log's own (`log_own`: all of it,
        the conversation as it is), without a tuple of the whole conversation. None when that is not
        certain (pending parts, a log that writes to disk, no round after the task's): build then.

        The build plans the whole conversation and runs only the always-on rules (closed_wave1): at
        such a window the budget guarantee leaves every section as it is, and the markers rule places
        the system's breakpoints by the sections before the history (the conversation's own go on its
        newest message), so the same Blocks come of the task and the newest round alone, assembled
        with the whole conversation's total (Pipeline.assembled(bound, cut)), as the plan reads it.
        Its history must be left as it is (else None). The whole conversation's tuple was the one pass
        over every message a build-pass turn still made (6,000 turns: the peers' view 75 -> 245 us a
        turn over the session once the wave-1 column stopped making it; tests/test_sim_view_apart.py)."""
        lane = self._wave1_lane
        pipe = self.pipe
        log = pipe.history
        if lane is None or pipe.pending or log.chunk is not None or log.edits or not self._wave1_cfg(cfg):
            return None  # (an agent's edit replaced a message: the log is not appends only, see _log_own)
        m = pipe.measure
        lane.extend(log, m)
        starts = lane.starts
        if len(starts) < 2 or starts[0] == 0 or lane.cum[-1] != pipe.history_tokens():
            return None
        te, cut, n = starts[0], starts[-1], len(log)
        asm = pipe.assembled(bound, cut)
        hist = asm[-1] if asm else None
        if hist is None or hist.kind is not SectionKind.HISTORY or len(hist.items) != te + n - cut:
            return None
        the_plan = pipe.planned(cfg, asm)
        res = optimize(asm, pipe.optimize_context(cfg, the_plan), _ALWAYS_ON)
        if res.asm[-1] is not hist:
            return None
        ser = self._serializers.get(cfg.provider)
        if ser is None:
            ser = self._serializers[cfg.provider] = BlockSerializer(cfg.provider)
        _, others = ser.blocks_apart(res.asm, res.markers, m, hist.id, False)
        return others, n

    def _wave1_cfg(self, cfg: PipelineConfig) -> bool:
        """closed_wave1(cfg), remembered by config (as _uncut_cfg)."""
        hit = self._wave1.get(id(cfg))
        if hit is None or hit[0] is not cfg:
            if len(self._wave1) >= 16:
                self._wave1.clear()
            hit = self._wave1[id(cfg)] = (cfg, closed_wave1(cfg))
        return hit[1]

    def _uncut_cfg(self, cfg: PipelineConfig) -> bool:
        """closed_uncut(cfg, st) for any state `st` with no cut (what it reads of the config), remembered."""
        hit = self._uncut.get(id(cfg))
        if hit is None or hit[0] is not cfg:
            if len(self._uncut) >= 16:
                self._uncut.clear()
            hit = self._uncut[id(cfg)] = (cfg, closed_uncut(cfg, CompactionState()))
        return hit[1]

    def _closed(
        self, bound: dict[str, dict[str, Any]], cfg: PipelineConfig
    ) -> tuple[Assembly, tuple[Marker, ...], list[str], int]:
        """(request, markers, actions, ceiling) of a closed_uncut build: Pipeline.decide's assembly and
        context, then cost_aware.run's tail, step for step (see closed_uncut)."""
        pipe = self.pipe
        cut = self._cut
        if cut is not None:
            auto = marker_rule.automatic(cache_policy(cfg.provider, cfg.model))
            got = cut.carried(pipe, bound, cfg, auto is None)
            if got is not None:
                # The rule's outcome (closed_cut.ClosedCut.carried), then the markers over it, as below.
                sent, ceiling, ctx = got
                if auto is not None:
                    return sent, (), [trim_sections.NAME], ceiling
                assert ctx is not None
                res = optimize(sent, ctx, cost_aware.GUARANTEE_RULES[1:])
                return (
                    res.asm,
                    res.markers,
                    [trim_sections.NAME, *(str(a["step"]) for a in res.actions)],
                    ceiling,
                )
        # decide assembles from the state's cut, 0: the whole conversation. Planned from an assembly
        # with less of it when the carried cut is likely to take the turn (the same plan: the history's
        # total is the whole conversation's); the whole conversation only for the rule itself.
        first = cut.first_cut(pipe, cfg) if cut is not None else 0
        asm = pipe.assembled(bound, first)
        the_plan = pipe.planned(cfg, asm)
        ctx = pipe.optimize_context(cfg, the_plan)
        # As cost_aware.run: revision 2's markers rule also places the task's breakpoint (no note: uncut).
        ctx.task_marker = cfg.policy.revision >= 2
        # A provider that caches prefixes by itself gets no marker whatever the request: then the
        # markers rule (GUARANTEE_RULES[1:]) changes nothing, places nothing and records no action, nor
        # the task's breakpoint (markers.task_marker needs a free breakpoint; such a policy has none),
        # so it is not run. tests/test_sim_closed_build.py holds this path to decide.
        auto = marker_rule.automatic(ctx.policy)
        if pipe.fast_path and trim_sections.fits_as_planned(the_plan, asm):
            if first:
                asm = pipe.assembled(bound)
            res = (
                OptimizeResult(asm)
                if auto is not None
                else optimize(asm, ctx, cost_aware.GUARANTEE_RULES[1:])
            )
        else:
            out = cut.trim(pipe, bound, cfg, ctx, asm, first) if cut is not None else None
            if out is not None:
                # The rule's outcome, recorded as optimize records an applied rule; the markers after it.
                res = (
                    OptimizeResult(out.asm)
                    if auto is not None
                    else optimize(out.asm, ctx, cost_aware.GUARANTEE_RULES[1:])
                )
                rec = {"step": trim_sections.NAME, "detail": out.detail, "tokens_saved": out.tokens_saved}
                res.actions.insert(0, rec)
                res.steps.insert(0, {**rec, "status": "applied"})
            else:
                if first:
                    asm = pipe.assembled(bound)
                res = optimize(asm, ctx, cost_aware.GUARANTEE_RULES)
        return res.asm, res.markers, [str(a["step"]) for a in res.actions], the_plan.ceiling
