"""ContextPipe engine: deterministic, audited context assembly for LLM agents.

The public names below are imported on first use (PEP 562 module `__getattr__`): importing any
engine submodule runs this file first, and eagerly importing the pipeline here made every
`cp-inspect` command, `--help` included, pay for the whole engine before doing anything.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from engine.errors import (
    BindError,
    BudgetExceededError,
    ConfigError,
    ContentError,
    ContextPipeError,
    PipelineClosedError,
    ReentrantCallError,
    UnpairedToolResultError,
)

if TYPE_CHECKING:
    from engine.artifacts import ToolCall
    from engine.feedback import Usage, UsageFormatError
    from engine.optimize import OptimizeLimits
    from engine.pipeline import ENGINE_VERSION, Pipeline, Request
    from engine.plan import Thresholds
    from engine.types import CacheScope, Lifecycle, Priority, SectionKind, Tier

_LAZY = {
    # What an agent's loop handles: assistant()'s calls, record_usage()'s result and its error.
    "ToolCall": "engine.artifacts",
    "Usage": "engine.feedback",
    "UsageFormatError": "engine.feedback",
    "OptimizeLimits": "engine.optimize",
    "ENGINE_VERSION": "engine.pipeline",
    "Pipeline": "engine.pipeline",
    "Request": "engine.pipeline",
    "Thresholds": "engine.plan",
    "CacheScope": "engine.types",
    "Lifecycle": "engine.types",
    "Priority": "engine.types",
    "SectionKind": "engine.types",
    "Tier": "engine.types",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
    "PipelineClosedError",
    "ReentrantCallError",
    "ConfigError",
    "ContentError",
    "UnpairedToolResultError",
    "BudgetExceededError",
    "BindError",
    "ENGINE_VERSION",
    "ToolCall",
    "Usage",
    "UsageFormatError",
]
