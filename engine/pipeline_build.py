"""Optimize and serialize: a turn's decision (`decide`: the window assembled, planned and optimized, by the
wave-1 rules or the cost_aware policy with its compaction state) and its request (`build`: the decision
serialized for the provider and traced), what a caller running rules of its own reads of them
(`assembled`, `planned`, `optimize_context`), a shadow candidate's build, the summarizer a compaction
calls, and the caches a pipeline carries from turn to turn to go faster (forgotten by Folding's
`drop_caches`, a stage below, when the history is edited).

A base class of Pipeline (see engine/pipeline_state.py for the chain).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from engine.assembly import Assembly
from engine.config import PipelineConfig
from engine.hashing import content_hash
from engine.optimize import OptimizeContext, optimize
from engine.pipeline_guard import _CALLBACK
from engine.pipeline_plan import Planning
from engine.pipeline_request import Built, Decided
from engine.plan import Plan, history_pressure
from engine.policy import cost_aware
from engine.policy.cachecost import CacheRules
from engine.policy.settings import WAVE1
from engine.policy.state import CompactionState
from engine.providers import Serializer, make_serializer
from engine.providers.policy import cache_policy
from engine.spill import MemorySpill
from engine.trace import build_trace


class Building(Planning):
    """A Pipeline's Optimize stage and the request it serializes (public: `build`, `decide`)."""

    def _serializer(self, provider: str) -> Serializer:
        s = self._serializers.get(provider)
        if s is None:
            s = self._serializers[provider] = make_serializer(provider)
        return s

    def _summarize(self, texts: list[str]) -> str:
        key = content_hash(texts)
        if key in self.summaries:
            return self.summaries[key]
        if self.summarizer is None or self._replay:
            return "[summary unavailable in replay]"
        if self._explaining:  # EXPLAIN must not call the application's model
            return "[summary not computed in EXPLAIN]"
        token = _CALLBACK.set(self)
        try:
            out = self.summarizer(texts)
        finally:
            _CALLBACK.reset(token)
        self._emit({"k": "summary", "in": key, "h": self._blob(out)})
        return out

    def cache_sizes(self) -> dict[str, int]:
        """Entries in the caches a pipeline carries from turn to turn to go faster. They follow what
        recent requests sent, not the length of the session (tests/test_turn_cost.py holds that)."""
        out = {f"measure {k}": v for k, v in self.measure.cache_sizes().items()}
        for provider, ser in sorted(self._serializers.items()):
            out.update({f"serializer {provider} {k}": v for k, v in ser.cache_sizes().items()})
        out["source sections"] = len(self._sections)
        out["planner estimates"] = len(self._estimates)
        out["recent traces"] = len(self.traces)
        return out

    def build(
        self,
        bound: dict[str, dict[str, Any]],
        config: PipelineConfig | None = None,
        state: CompactionState | None = None,
        cache: CacheRules | None = None,
        body: bool = True,
        lean: bool = False,
    ) -> Built:
        """Plan + Optimize + serialize from the current state. Pure given state, bound values and config.
        `state` replaces the folded compaction state (a what-if that runs its own chain of states);
        `cache` the cache rules and prices compactions are weighed by (a what-if priced as another model
        or provider than the recorded one), else those of the config's provider and model. body=False:
        no request body and no request or prefix hash (see Serializer.serialize; simulate's builds).
        lean=True: with the drop_rounds gate closed, no compaction is weighed only for the trace to report
        (cost_aware.run's weigh_closed; the same request and state; simulate's builds)."""
        cfg = config or self.config
        d = self.decide(bound, cfg, state, cache, lean)
        if d.finish is not None:
            d.finish()
        if cfg.provider != self.config.provider:  # a what-if at another provider: its rule for call ids
            d = d._replace(res=self._ids_at(cfg.provider, d.res))
        m = self.measure
        ser = self._serializer(cfg.provider).serialize(
            d.res.asm, d.res.markers, cfg.model, cfg.max_output_tokens, m, body
        )
        trace = build_trace(
            self.turn,
            cfg,
            d.plan,
            d.reserves,
            d.before,
            d.res,
            ser,
            m,
            self.traces[-1] if self.traces else None,
            self.flipped,
            d.spill_failures,
        )
        trace["calibration"] = round(d.ratio, 4)
        if d.decision is not None:
            # Pressure over what is sent (the compacted state); the raw history's figure beside it.
            trace["pressure"]["raw_history"] = history_pressure(d.decision["raw_tokens"], cfg.window, d.ratio)
            trace["compaction"] = d.decision
        # Built from the typed definition; downstream (journal, msgpack, replay) it travels as a plain dict.
        return Built(d.plan, d.res.asm, ser, cast(dict[str, Any], trace), d.state)

    def decide(
        self,
        bound: dict[str, dict[str, Any]],
        cfg: PipelineConfig,
        state: CompactionState | None = None,
        cache: CacheRules | None = None,
        lean: bool = False,
        defer_texts: bool = False,
    ) -> Decided:
        """build's Plan + Optimize: what is sent and why, before it is serialized and traced (simulate
        lays out only the blocks of what this decides; see engine/sim/blocks.py). defer_texts=True: a
        held turn's decision texts are left to `Decided.finish` (a trace built when read)."""
        st = self.compaction if state is None else state
        # The wave-1 policy decides from the whole history every turn; cost_aware sends the task and
        # what follows its state's cut, so it is handed only that (see _assemble_from).
        asm, elided = self._assemble_from(bound, 0 if cfg.policy.name == WAVE1 else st.cut)
        self._decided_from = (asm, elided)  # what the express lane carries (engine/pipeline_express.py)
        m = self.measure
        summarizer = self._summarize if (self.summarizer is not None or self.summaries) else None

        back = self._edit_back(cfg)

        def make_ctx(p: Plan) -> OptimizeContext:
            # Positional, in field order (plan, limits, policy, measure, spill, summarizer, latch_flipped):
            # a build makes one or two, and keywords are matched by name.
            ctx = OptimizeContext(
                p,
                cfg.limits,
                cache_policy(cfg.provider, cfg.model),
                m,
                self.spill,
                summarizer,
                bool(self.flipped),
            )
            if back:
                ctx.edit_back = back
            return ctx

        new_state: CompactionState | None = None
        decision: dict[str, Any] | None = None
        finish: Callable[[], None] | None = None
        plan_fn = self._planner(cfg)
        if cfg.policy.name == WAVE1:
            the_plan, reserves, ratio = plan_fn(asm)
            ctx = make_ctx(the_plan)
            res = optimize(asm, ctx)
            before, failures = asm, ctx.spill_failures
        else:
            out = cost_aware.run(
                asm,
                st,
                settings=cfg.policy,
                limits=cfg.limits,
                cache=cache or self.cache_rules(cfg),
                measure=m,
                plan_fn=plan_fn,
                make_ctx=make_ctx,
                turn=self.turn,
                summary_text=self.summaries.get,
                summarize=summarizer,
                elided=elided,
                full_history=self.history,
                carry=self._carry if self.fast_path else None,
                weigh_closed=not lean,
                defer_texts=defer_texts,
                edited=ed[1] if (ed := self._edited) is not None and ed[0] == self.turn else None,
            )
            the_plan, reserves, ratio, res = out.plan, out.reserves, out.ratio, out.res
            before, failures, new_state, decision = out.before, out.spill_failures, out.state, out.decision
            finish = out.finish
        return Decided(the_plan, reserves, ratio, before, res, failures, new_state, decision, finish)

    # What decide assembles, plans and optimizes in, for a caller that runs rules of its own over them
    # (simulate's gates-closed builds, engine/sim/blocks.py): the same objects decide would use.
    def assembled(self, bound: dict[str, dict[str, Any]], cut: int = 0) -> Assembly:
        """The assembly with the whole conversation: decide's for a state with no cut. With `cut`, the
        history holds the task and what follows `cut` (as for a state cut there; see _assemble_from),
        its total still the whole conversation's."""
        return self._assemble_from(bound, cut)[0]

    def planned(self, cfg: PipelineConfig, asm: Assembly) -> Plan:
        """decide's plan of `asm` under `cfg` and the statistics (pure)."""
        return self._plan(cfg, asm)[0]

    def optimize_context(self, cfg: PipelineConfig, the_plan: Plan) -> OptimizeContext:
        """The context decide runs its rules in under `the_plan` (its make_ctx)."""
        return OptimizeContext(
            plan=the_plan,
            limits=cfg.limits,
            policy=cache_policy(cfg.provider, cfg.model),
            measure=self.measure,
            spill=self.spill,
            summarizer=self._summarize if (self.summarizer is not None or self.summaries) else None,
            latch_flipped=bool(self.flipped),
            edit_back=self._edit_back(cfg),
        )

    def _edit_back(self, cfg: PipelineConfig) -> int:
        """OptimizeContext.edit_back: the newest message the agent edited, counted from the end of the
        conversation this turn sends (the pending parts close into its last message), 0: none (or a
        policy before cost_aware's revision 3, which places no breakpoint after it)."""
        f = self._edit_frontier
        if f < 0 or cfg.policy.revision < 3:
            return 0
        return len(self.history) + (1 if self.pending else 0) - f

    def _plan_shadow(self, bound: dict[str, dict[str, Any]], live: Built) -> dict[str, Any]:
        """The candidate's plan of this turn, as a `shadow` event. Built before the request event folds
        (the state must be the one this turn was planned from); a failure is recorded, never raised."""
        assert self._shadow is not None
        try:
            return self._shadow.plan(self, bound, live)
        except Exception as exc:  # the shadow must never break the agent's turn
            return self._shadow.failed(live, self.turn, exc)

    def shadow_build(
        self, bound: dict[str, dict[str, Any]], config: PipelineConfig, state: CompactionState
    ) -> Built:
        """Build under another configuration with no side effects: a scratch spill, no summarizer call
        (what EXPLAIN does), so a candidate never costs the agent a model call or a file."""
        saved_spill, self.spill = self.spill, MemorySpill()
        saved_explaining, self._explaining = self._explaining, True
        try:
            return self.build(bound, config, state)
        finally:
            self.spill, self._explaining = saved_spill, saved_explaining
