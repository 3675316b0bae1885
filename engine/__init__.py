"""ContextPipe engine: deterministic, audited context assembly for LLM agents."""

from .errors import BindError, BudgetExceededError, ConfigError, ContextPipeError, UnpairedToolResultError
from .optimize import OptimizeLimits
from .pipeline import ENGINE_VERSION, Pipeline, Request
from .plan import Thresholds
from .types import CacheScope, Lifecycle, Priority, SectionKind, Tier

__all__ = [
    "Pipeline", "Request", "OptimizeLimits", "Thresholds", "CacheScope", "Priority", "Lifecycle", "SectionKind",
    "Tier", "ContextPipeError", "ConfigError", "UnpairedToolResultError", "BudgetExceededError", "BindError",
    "ENGINE_VERSION",
]
