"""ContextPipe engine: deterministic, audited context assembly for LLM agents."""

from engine.errors import (
    BindError,
    BudgetExceededError,
    ConfigError,
    ContextPipeError,
    UnpairedToolResultError,
)
from engine.optimize import OptimizeLimits
from engine.pipeline import ENGINE_VERSION, Pipeline, Request
from engine.plan import Thresholds
from engine.types import CacheScope, Lifecycle, Priority, SectionKind, Tier

__all__ = [
    "Pipeline",
    "Request",
    "OptimizeLimits",
    "Thresholds",
    "CacheScope",
    "Priority",
    "Lifecycle",
    "SectionKind",
    "Tier",
    "ContextPipeError",
    "ConfigError",
    "UnpairedToolResultError",
    "BudgetExceededError",
    "BindError",
    "ENGINE_VERSION",
]
