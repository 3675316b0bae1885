"""Store settings: scoring weights and window shaping, as a dataclass that round-trips a TOML-able dict.

The weights live here, not in the scoring code, so a project can tune them in configuration
(`StoreConfig.from_dict(tomllib.load(f)["store"])`) without touching the solver.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from engine.errors import ConfigError


@dataclass(frozen=True)
class StoreConfig:
    """The context store's scoring weights, and when it offers a summary or stub instead of a full body."""
    # Score = w_recency*recency + w_refs*refs + w_relevance*bm25 + w_importance*importance + base.
    # Defaults were tuned once on the real trajectories (`cp-inspect eval`), the same for all of them.
    w_recency: float = 1.0
    w_refs: float = 0.35
    w_relevance: float = 1.0
    w_importance: float = 1.0
    base: float = 0.05  # every item is worth something, so leftover budget is never wasted
    half_life_turns: float = 3.0  # recency halves every this many turns
    stale_factor: float = 0.3  # a read of a file that changed since is worth this fraction

    # Value of the cheaper forms relative to the full body (their cost is their own token count).
    summary_value: float = 0.55
    stub_value: float = 0.02
    # Bigger bodies carry more information: value scales with tokens**size_exponent (0 = flat).
    size_exponent: float = 0.35
    # A summary form is only offered when it saves at least this fraction of the full body.
    summary_min_saving: float = 0.4
    # Bodies at or below this many tokens are never summarised (the stub/full choice is enough).
    summary_min_tokens: int = 160
    summary_target_tokens: int = 120  # head+tail excerpt size for the rule-based summary

    # The last this-many turns go in at full size before the knapsack runs (newest first, while they
    # fit): the agent is almost always about to act on what it just saw, and a verbatim tail is also
    # what keeps a sticky window's appended region byte-stable.
    keep_recent_turns: int = 4

    # Sticky windows: after an overflow, re-solve to this fraction of the usable budget so that
    # the next few turns can append without breaking the provider's prefix cache again.
    resolve_fill: float = 0.9  # at most 1 - resolve_fill of the budget is kept as headroom
    # Adaptive headroom: the average tokens added per turn over the last growth_window_turns, times
    # headroom_turns (capped as above; none at all when the cap cannot hold one turn's growth).
    headroom_turns: float = 2.0
    growth_window_turns: int = 4

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ConfigError(f"store setting {f.name} must be a number, got {v!r}")
            if not math.isfinite(v):  # NaN passed every comparison below and made every score NaN
                raise ConfigError(f"store setting {f.name} must be a finite number, got {v!r}")
            if v < 0:
                raise ConfigError(f"store setting {f.name} must not be negative, got {v!r}")
            if f.type in (int, "int") and not isinstance(v, int):
                raise ConfigError(f"store setting {f.name} is a count: give a whole number, got {v!r}")
        if self.half_life_turns <= 0:
            raise ConfigError("store setting half_life_turns must be positive")
        if not 0.1 <= self.resolve_fill <= 1.0:
            raise ConfigError(f"store setting resolve_fill must be in [0.1, 1], got {self.resolve_fill}")
        if not 0.0 <= self.summary_min_saving < 1.0:
            raise ConfigError("store setting summary_min_saving must be in [0, 1)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StoreConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"unknown store settings: {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        return cls(**data)
