"""Which compaction policy a pipeline runs, with its hysteresis levels (part of PipelineConfig)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError

COST_AWARE = "cost_aware"
WAVE1 = "wave1"
POLICY_NAMES = (COST_AWARE, WAVE1)
# Revisions of cost_aware's decision rules. A recording keeps the revision it ran, so it replays (and
# verifies) byte for byte after the rules improve; a config written before revisions existed ran 1.
#   1: early compaction when the pay-back fits the horizon; the note rides on the task message.
#   2: also waits for the economic cut size (see cost_aware), counts DeepSeek's unserved prefix on a
#      first rewrite, keeps the task message byte-identical (the note follows it) and, at providers
#      with breakpoints, keeps one on the task so the stable prefix is read after a compaction.
#   3: a turn where the agent edited its own history is priced as the cache break it is (a cut at or
#      past the edit re-sends nothing more, so it is taken over the target), and at providers with
#      breakpoints one more follows the newest message the agent edited (markers.edit_marker).
REVISION = 3
REVISIONS = (1, 2, 3)


@dataclass(frozen=True)
class PolicySettings:
    """`cost_aware` (the default) keeps the compacted history as state and compacts when the request
    would exceed `trigger` x ceiling, cutting down to `target` x ceiling (hysteresis: one deep cut buys
    many turns of appending; target chosen on the in-sample trajectories); with `early` it also compacts
    sooner when a cut pays for its cache rewrite over the turns it is expected to last and is at least
    the economic cut size (revision 2; see engine.policy.cost_aware). `wave1` re-plans every turn from
    the full history (the first release's planner); recordings made before this setting existed replay
    with it."""

    name: str = COST_AWARE
    trigger: float = 1.0
    target: float = 0.25
    early: bool = True
    # How long a session is expected to go on, relative to the turns so far (early compaction). Revision
    # 2: the scale of a scale-free prior (1.0, the default: the median remaining length is the length so
    # far; smaller is more cautious). Revision 1: a fixed share of the turns so far (default 0.15).
    horizon: float | None = None
    revision: int = REVISION  # which revision of the decision rules (see REVISIONS)

    def __post_init__(self) -> None:
        if self.name not in POLICY_NAMES:
            raise ConfigError(f"unknown policy {self.name!r}; known policies: {', '.join(POLICY_NAMES)}")
        if self.revision not in REVISIONS:
            raise ConfigError(
                f"policy revision {self.revision} is not known; known: {', '.join(map(str, REVISIONS))}"
            )
        if self.horizon is not None and not 0.0 < self.horizon <= 10.0:
            raise ConfigError(
                f"policy horizon must be in (0, 10] (relative to the turns so far), got {self.horizon}"
            )
        if not 0.05 <= self.target < self.trigger <= 1.0:
            raise ConfigError(
                f"policy levels must satisfy 0.05 <= target < trigger <= 1.0 (fractions of the ceiling), "
                f"got target={self.target} trigger={self.trigger}"
            )

    @property
    def horizon_scale(self) -> float:
        if self.horizon is not None:
            return self.horizon
        return 1.0 if self.revision >= 2 else 0.15

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "trigger": self.trigger,
            "target": self.target,
            "early": self.early,
            "horizon": self.horizon,
            "revision": self.revision,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> PolicySettings:
        """A config event without a policy predates it: the session ran the wave-1 planner."""
        if d is None:
            return cls(name=WAVE1)
        try:
            return cls(**{"revision": 1, **d})
        except TypeError as exc:
            raise ConfigError(f"invalid policy settings {d}: {exc}") from exc

    @classmethod
    def parse(cls, text: str) -> PolicySettings:
        """'cost_aware', 'wave1', or 'cost_aware:target=0.4,trigger=0.9,horizon=0.5,early=off' (CLI form)."""
        name, _, rest = text.strip().partition(":")
        kw: dict[str, Any] = {}
        for item in filter(None, (x.strip() for x in rest.split(","))):
            key, eq, val = item.partition("=")
            if not eq or key not in ("trigger", "target", "early", "horizon", "revision"):
                raise ConfigError(
                    f"policy option {item!r}: use trigger=F, target=F, horizon=F, revision=N or early=on|off"
                )
            if key == "early":
                kw[key] = val.lower() in ("1", "on", "true", "yes")
            elif key == "revision":
                try:
                    kw[key] = int(val)
                except ValueError as exc:
                    raise ConfigError(f"policy option {item!r}: {val!r} is not a revision number") from exc
            else:
                try:
                    kw[key] = float(val)
                except ValueError as exc:
                    raise ConfigError(f"policy option {item!r}: {val!r} is not a number") from exc
        return cls(name=name or COST_AWARE, **kw)
