"""What every Optimize rule receives: the plan, the gates, the provider policy and helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from engine.assembly import Assembly, Measure
from engine.errors import ConfigError
from engine.plan import Plan
from engine.providers.policy import ProviderCachePolicy
from engine.spill import SpillBackend
from engine.types import Tier
from engine.wording import nouned

# A summary callback: (texts of the rounds to summarize) -> summary text. The application owns the model.
Summarizer = Callable[[list[str]], str]


@dataclass(frozen=True)
class OptimizeLimits:
    """Gates for each optimization, plus the circuit breakers. A closed gate is logged, never silent."""

    reorder: bool = True
    trim_schemas: bool = True
    clear_tool_results: bool = True
    spill: bool = True
    llm_summary: bool = True
    drop_rounds: bool = True
    max_reorder_moves: int = 8
    max_clear_tokens: int = 60_000
    spill_threshold: int = 10_000
    keep_recent_results: int = 3

    GATES = ("reorder", "trim_schemas", "clear_tool_results", "spill", "llm_summary", "drop_rounds")

    def __post_init__(self) -> None:
        if self.max_reorder_moves < 0 or self.max_clear_tokens < 0 or self.keep_recent_results < 0:
            raise ConfigError("OptimizeLimits counts must be >= 0")
        if self.spill_threshold < 1:
            raise ConfigError("spill_threshold must be at least 1 token")

    def with_gates(self, gates: dict[str, bool]) -> OptimizeLimits:
        unknown = sorted(set(gates) - set(self.GATES))
        if unknown:
            raise ConfigError(
                f"unknown optimizer {nouned(len(unknown), 'gate')} {unknown}; known gates: {', '.join(self.GATES)}"
            )
        return replace(self, **gates)

    @classmethod
    def all_closed(cls) -> OptimizeLimits:
        return cls(**{g: False for g in cls.GATES})

    def to_dict(self) -> dict[str, Any]:
        return {
            "reorder": self.reorder,
            "trim_schemas": self.trim_schemas,
            "clear_tool_results": self.clear_tool_results,
            "spill": self.spill,
            "llm_summary": self.llm_summary,
            "drop_rounds": self.drop_rounds,
            "max_reorder_moves": self.max_reorder_moves,
            "max_clear_tokens": self.max_clear_tokens,
            "spill_threshold": self.spill_threshold,
            "keep_recent_results": self.keep_recent_results,
        }


@dataclass
class OptimizeContext:
    """What every rule of one Optimize pass reads: the plan, the limits, the provider's cache policy and the
    token measure."""
    plan: Plan
    limits: OptimizeLimits
    policy: ProviderCachePolicy
    measure: Measure
    spill: SpillBackend | None = None
    summarizer: Summarizer | None = None
    latch_flipped: bool = False
    dry_run: bool = False  # set while measuring what a closed gate would have saved: no side effects
    # The markers rule also puts a breakpoint on the task message when one is free (cost_aware's
    # revision 2; see markers.task_marker), and `task_noted`: the history carries a compaction note
    # right after the task (the last message of round 0, which the breakpoint must not include).
    task_marker: bool = False
    task_noted: bool = False
    # With task_marker: the newest message the agent edited where it stood, counted from the history's
    # end (1: its last item; 0: none), for one more breakpoint after it (markers.edit_marker).
    edit_back: int = 0
    spill_failures: list[str] = field(default_factory=list)

    @property
    def tier(self) -> Tier:
        return self.plan.tier

    def total(self, asm: Assembly) -> int:
        return self.measure.total(asm)


@dataclass(frozen=True)
class Marker:
    """A cache breakpoint after item `item` of section `section` (wire order is the provider's)."""

    section: str
    item: int
    scope: str
    reason: str


@dataclass(frozen=True)
class RuleOutcome:
    """What one rule did to the assembly (or why it did not act), and the tokens it saved."""
    asm: Assembly
    changed: bool
    detail: str
    tokens_saved: int = 0
    reason_not_applied: str = ""  # when the rule decided on its own not to act (circuit breaker, limits)
    markers: tuple[Marker, ...] = ()
