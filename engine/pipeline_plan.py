"""Plan, a Pipeline's first stage: pressure, tier and section budgets for an assembly under the config and
the session's statistics (`_plan`, pure), with the reserves it keeps for the reply, each section's
estimate remembered across turns, one build's planner that plans each distinct assembly once, and the
provider's cache rules the cost_aware policy weighs a compaction by.

A base class of Pipeline (see engine/pipeline_state.py for the chain).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.assembly import Assembly
from engine.config import PipelineConfig
from engine.pipeline_fold import Folding
from engine.plan import Plan, Reserves, SectionEstimate, budget_of, plan_of
from engine.policy.cachecost import CacheRules, for_model


class Planning(Folding):
    """A Pipeline's Plan stage (engine/plan.py's plan_of, fed from this session's state)."""

    def _reserves(self, cfg: PipelineConfig) -> Reserves:
        reserve, pct = self.stats.response_reserve(cfg.model, cfg.query_source, cfg.default_response_reserve)
        return Reserves(min(reserve, cfg.max_output_tokens), cfg.thinking_reserve, cfg.schema_reserve, pct)

    def _planner(self, cfg: PipelineConfig) -> Callable[[Assembly], tuple[Plan, Reserves, float]]:
        """`_plan` for one build, remembering its answers: the statistics do not change during a build
        and a policy asks again for an assembly its rules left unchanged (the same tuple), so a turn
        plans once per distinct assembly instead of once per question (and sorts the completion
        samples for the reserve once)."""
        reserves = self._reserves(cfg)
        memo: dict[int, tuple[Assembly, tuple[Plan, Reserves, float]]] = {}

        def plan_fn(a: Assembly) -> tuple[Plan, Reserves, float]:
            hit = memo.get(id(a))
            if hit is not None and hit[0] is a:
                return hit[1]
            out = self._plan(cfg, a, reserves)
            memo[id(a)] = (a, out)  # holds `a`, so its id cannot be reused during the build
            return out

        return plan_fn

    def _plan(
        self, cfg: PipelineConfig, asm: Assembly, reserves: Reserves | None = None
    ) -> tuple[Plan, Reserves, float]:
        """Plan (pure): pressure, tier and section budgets for `asm` under `cfg` and the statistics."""
        if reserves is None:
            reserves = self._reserves(cfg)
        estimates = tuple(map(self._estimate, asm))
        budget = budget_of(cfg.window, cfg.margin)  # cfg.budget, built once per window and margin
        # The window is in the provider's tokens, the estimates in ours: plan against the window as our
        # tokenizer sees it, using the ratio Feedback learned for this model.
        ratio = self.stats.calibration_for(cfg.model)
        the_plan = plan_of(
            int(budget.limit / ratio),
            int(budget.usable / ratio),
            cfg.thresholds,
            reserves,
            estimates,
            self.stats.recovery_turns_left > 0,
        )
        return the_plan, reserves, ratio

    def _estimate(self, s: Any) -> SectionEstimate:
        """The planner's view of a section, remembered per section object (most sections are the same
        objects turn after turn, and a frozen dataclass costs a few microseconds to build)."""
        m = self.measure
        hit = self._estimates.get(id(s))
        if hit is not None and hit[0] is s and hit[1] is m:
            return hit[2]
        est = SectionEstimate(s.id, s.name, s.kind, s.scope, s.priority, m.section(s))
        if len(self._estimates) >= 64:
            self._estimates.clear()
        self._estimates[id(s)] = (s, m, est)
        return est

    def cache_rules(self, cfg: PipelineConfig) -> CacheRules:
        """The provider's cache rules and price ratios the cost_aware policy weighs a compaction by."""
        key = (cfg.provider, cfg.model)
        got = self._cache_rules.get(key)
        if got is None:
            got = self._cache_rules[key] = for_model(cfg.provider, cfg.model)
        return got
