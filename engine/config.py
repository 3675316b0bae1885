"""Pipeline settings in one immutable value, so a what-if is just `replace(config, ...)`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from engine.errors import ConfigError
from engine.optimize.context import OptimizeLimits
from engine.plan import Thresholds
from engine.policy.settings import PolicySettings
from engine.providers import canonical_provider
from engine.tokens import Budget

DEFAULT_MAX_OUTPUT_TOKENS = 4096


@dataclass(frozen=True)
class PipelineConfig:
    """What a Pipeline is built for: the model, its provider and window, and the reserves and margins its plans keep."""
    model: str
    provider: str = "anthropic"
    window: int = 200_000
    margin: float = 0.02
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    default_response_reserve: int = 1024
    thinking_reserve: int = 0
    schema_reserve: int = 0
    query_source: str = "main"
    thresholds: Thresholds = field(default_factory=Thresholds)
    limits: OptimizeLimits = field(default_factory=OptimizeLimits)
    policy: PolicySettings = field(default_factory=PolicySettings)

    def __post_init__(self) -> None:
        object.__setattr__(self, "provider", canonical_provider(self.provider))
        # The model goes into every request body as is: a number or None there is a request the
        # provider refuses a model call later, not an error at the call that made it.
        if type(self.model) is not str or not self.model:
            raise ConfigError(
                f"model must be a non-empty string, e.g. 'claude-sonnet-4' or 'gpt-4o', got {self.model!r}"
            )
        if type(self.query_source) is not str:
            raise ConfigError(f"query_source must be a str (e.g. 'main'), got {self.query_source!r}")
        if not isinstance(self.margin, (int, float)) or isinstance(self.margin, bool):
            raise ConfigError(f"margin must be a number in [0, 0.5) (a fraction of the window), got {self.margin!r}")
        for name, cls, where in (
            ("thresholds", Thresholds, "engine.Thresholds"),
            ("limits", OptimizeLimits, "engine.OptimizeLimits"),
            ("policy", PolicySettings, "engine.policy.settings.PolicySettings, or a name such as 'cost_aware'"),
        ):
            v = getattr(self, name)
            if not isinstance(v, cls):
                raise ConfigError(f"{name} must be a {cls.__name__} ({where}), got {type(v).__name__} {v!r:.80}")
        Budget(self.window, self.margin)  # validates window and margin
        if self.window == 0:
            raise ConfigError("window is 0 tokens: give the model's context window (e.g. 200000)")
        for name in ("max_output_tokens", "default_response_reserve", "thinking_reserve", "schema_reserve"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > 10_000_000:
                raise ConfigError(f"{name}={v!r} must be an integer between 0 and 10,000,000")

    @property
    def budget(self) -> Budget:
        return Budget(self.window, self.margin)

    def to_event(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "provider": self.provider,
            "window": self.window,
            "margin": self.margin,
            "max_output_tokens": self.max_output_tokens,
            "default_response_reserve": self.default_response_reserve,
            "thinking_reserve": self.thinking_reserve,
            "schema_reserve": self.schema_reserve,
            "query_source": self.query_source,
            "thresholds": self.thresholds.to_dict(),
            "limits": self.limits.to_dict(),
            "policy": self.policy.to_dict(),
        }

    @classmethod
    def from_event(cls, ev: dict[str, Any]) -> PipelineConfig:
        return cls(
            model=ev["model"],
            provider=ev["provider"],
            window=ev["window"],
            margin=ev["margin"],
            max_output_tokens=ev["max_output_tokens"],
            default_response_reserve=ev["default_response_reserve"],
            thinking_reserve=ev["thinking_reserve"],
            schema_reserve=ev["schema_reserve"],
            query_source=ev["query_source"],
            thresholds=Thresholds(**ev["thresholds"]),
            limits=OptimizeLimits(**ev["limits"]),
            # A recording made before policies existed ran the wave-1 planner; it replays with it.
            policy=PolicySettings.from_dict(ev.get("policy")),
        )

    def with_overrides(
        self,
        window: int | None = None,
        thresholds: dict[str, float] | None = None,
        gates: dict[str, bool] | None = None,
        provider: str | None = None,
        policy: PolicySettings | str | None = None,
    ) -> PipelineConfig:
        cfg = self
        if window is not None:
            cfg = replace(cfg, window=window)
        if thresholds:
            cfg = replace(cfg, thresholds=Thresholds(**{**cfg.thresholds.to_dict(), **thresholds}))
        if gates:
            cfg = replace(cfg, limits=cfg.limits.with_gates(gates))
        if provider:
            cfg = replace(cfg, provider=provider)
        if policy:
            cfg = replace(cfg, policy=PolicySettings.parse(policy) if isinstance(policy, str) else policy)
        return cfg
