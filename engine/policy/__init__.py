"""Compaction policies the engine can run: which one, its settings, its folded state and its cost model.

- `settings`: `PolicySettings` (name, trigger and target levels), part of `PipelineConfig`;
- `state`: `CompactionState`, the compacted history as folded state (cut point and its note);
- `cachecost`: a provider's cache rules and price ratios, and the pay-back of a compaction;
- `cost_aware`: the default policy (stateful, compacts only when it pays);
- "wave1" is the original per-turn planner (engine.optimize.RULES), kept so old recordings verify.
"""

from engine.policy.settings import POLICY_NAMES, PolicySettings
from engine.policy.state import CompactionState

__all__ = ["POLICY_NAMES", "PolicySettings", "CompactionState"]
