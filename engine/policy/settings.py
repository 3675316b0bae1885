"""Which compaction policy a pipeline runs, with its hysteresis levels (part of PipelineConfig)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError

COST_AWARE = "cost_aware"
WAVE1 = "wave1"
POLICY_NAMES = (COST_AWARE, WAVE1)


@dataclass(frozen=True)
class PolicySettings:
    """`cost_aware` (the default) keeps the compacted history as state and compacts when the request
    would exceed `trigger` x ceiling, cutting down to `target` x ceiling (hysteresis: one deep cut, chosen on the in-sample trajectories, buys
    many turns of appending); with `early` it also compacts sooner when the expected saving over the
    expected remaining turns pays for the cache rewrite. `wave1` re-plans every turn from the full
    history (the first release's planner); recordings made before this setting existed replay with it."""

    name: str = COST_AWARE
    trigger: float = 1.0
    target: float = 0.25
    early: bool = True
    horizon: float = 0.15  # expected remaining turns, as a share of the turns so far (early compaction)

    def __post_init__(self) -> None:
        if self.name not in POLICY_NAMES:
            raise ConfigError(f"unknown policy {self.name!r}; known policies: {', '.join(POLICY_NAMES)}")
        if not 0.0 < self.horizon <= 10.0:
            raise ConfigError(
                f"policy horizon must be in (0, 10] (a share of the turns so far), got {self.horizon}"
            )
        if not 0.05 <= self.target < self.trigger <= 1.0:
            raise ConfigError(
                f"policy levels must satisfy 0.05 <= target < trigger <= 1.0 (fractions of the ceiling), "
                f"got target={self.target} trigger={self.trigger}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "trigger": self.trigger,
            "target": self.target,
            "early": self.early,
            "horizon": self.horizon,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> PolicySettings:
        """A config event without a policy predates it: the session ran the wave-1 planner."""
        if d is None:
            return cls(name=WAVE1)
        try:
            return cls(**d)
        except TypeError as exc:
            raise ConfigError(f"invalid policy settings {d}: {exc}") from exc

    @classmethod
    def parse(cls, text: str) -> PolicySettings:
        """'cost_aware', 'wave1', or 'cost_aware:target=0.4,trigger=0.9,horizon=0.5,early=off' (CLI form)."""
        name, _, rest = text.strip().partition(":")
        kw: dict[str, Any] = {}
        for item in filter(None, (x.strip() for x in rest.split(","))):
            key, eq, val = item.partition("=")
            if not eq or key not in ("trigger", "target", "early", "horizon"):
                raise ConfigError(
                    f"policy option {item!r}: use trigger=F, target=F, horizon=F or early=on|off"
                )
            if key == "early":
                kw[key] = val.lower() in ("1", "on", "true", "yes")
            else:
                try:
                    kw[key] = float(val)
                except ValueError as exc:
                    raise ConfigError(f"policy option {item!r}: {val!r} is not a number") from exc
        return cls(name=name or COST_AWARE, **kw)
