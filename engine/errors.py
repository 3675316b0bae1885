"""Typed errors. Each message says what was wrong and what to do about it."""

from __future__ import annotations


class ContextPipeError(Exception):
    """Base class for every error the engine raises on purpose."""


class ConfigError(ContextPipeError, ValueError):
    """A setting is out of range (zero or absurd budget, thresholds out of order, ...)."""


class ContentError(ContextPipeError, ValueError):
    """Text handed to the pipeline that it cannot journal or send: not a str, or not encodable as UTF-8."""


class PipelineClosedError(ContextPipeError, RuntimeError):
    """A pipeline was used after close(): its recording and probe are gone, so nothing would be kept."""


class UnpairedToolResultError(ContextPipeError):
    """A tool result has no matching tool call (or a call has no result) where the provider requires one."""

    def __init__(self, call_id: str, detail: str) -> None:
        self.call_id = call_id
        super().__init__(f"tool call/result pairing broken for id {call_id!r}: {detail}")


class BudgetExceededError(ContextPipeError):
    """Protected content alone (identity, constraints, goal) does not fit the window."""


class BindError(ContextPipeError):
    """A Never-priority section could not be bound; the turn cannot be assembled without it."""


class ReentrantCallError(ContextPipeError, RuntimeError):
    """A pipeline's own binder or summarizer called back into it while it was building a request."""
