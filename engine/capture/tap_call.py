"""One agent call as the tap follows it (`TapCall`, made by `Tap.begin`), what a failed call journals
(`gave_up`), what the tap saw (`TapStats`) and what it could not journal (`TapError`).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ContextPipeError


class TapError(ContextPipeError):
    """Something the tap could not journal (never raised into the agent: counted and journaled)."""


@dataclass
class TapStats:
    """What the tap saw, public: `client.contextpipe_stats` (also `Tap.stats`)."""

    calls: int = 0  # requests the agent made through the tapped client
    journaled: int = 0  # of them, journaled as a turn's actual request
    errors: int = 0  # tap failures (each journaled as a `diag` event); the agent never saw them
    last_error: str | None = None
    streams_without_usage: int = 0  # streams that ended without usage (chat without include_usage)
    unobserved: int = 0  # responses the tap could not see (with_streaming_response, raw streams)
    retried: int = 0  # failed attempts the SDK sent again, on the turn of the call (tap_retries)
    notes: list[str] = field(default_factory=list)


def _caller() -> object:
    """Who made a call: the asyncio task (the calls of one `gather` are separate tasks), else the thread."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop: a sync client
        task = None
    return task if task is not None else threading.get_ident()


@dataclass(eq=False)
class TapCall:
    """One agent call as the tap follows it: its request body (read when the call started, so later
    edits of the agent's message list do not leak in), its turn once journaled, its outcome once known."""

    body: dict[str, Any]
    caller: object
    sent_at: float | None = None  # when the agent made the call (it may be journaled later)
    turn: int | None = None
    outcome: tuple[str, Any] | None = None  # ("after", response) or ("failed", problem)
    ended_at: float | None = None  # when its outcome came (it may be journaled later, held behind another)
    # waiting -> open -> done; superseded: its turn was closed before its outcome came (journaled late);
    # dropped: its request could not be journaled (the tap error is counted), so neither is its outcome
    state: str = "waiting"
    conversation: int = 1  # which of the tap's conversations its turn is in (Tap._route)
    # Each HTTP attempt the SDK sent for it (engine.capture.tap_retries): the last is the call's own,
    # the ones before it failed and were retried by the SDK
    tries: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class CutShort:
    """A failed call whose stream had already said what the call used: Anthropic's `message_start` gives
    the input side (uncached, cache reads and writes) before the reply's first word, `message_delta` the
    output so far. Cut after it (the agent stopped reading, the connection broke, an `error` event), the
    call is journaled with that usage, then why it failed: the recording's usage and cache figures are
    the upstream's own, not a turn with none. Its str is the problem, as a failed call's payload is."""

    problem: str
    usage: dict[str, Any]  # in the API's shape, as the stream reported it

    def __str__(self) -> str:
        return self.problem


def cut_short(problem: str, partial: Any) -> CutShort | str:
    """The failed outcome of a call whose reply came in part (`partial`: what its stream reassembled to,
    or None): with the usage the stream reported, if it reported any."""
    usage = partial.get("usage") if isinstance(partial, dict) else None
    return CutShort(problem, usage) if isinstance(usage, dict) and usage else problem


def gave_up(exc: BaseException) -> BaseException | str:
    """What a failed call journals: its exception; for a cancellation (a task's, asyncio.wait_for's
    timeout) or an interrupt, which say nothing themselves, that the agent stopped waiting. Either way
    the call ends, so the calls of other threads and tasks held behind it are journaled at once."""
    if isinstance(exc, Exception):
        # An API error's Retry-After (429, 529): how long the SDK was told to wait, as the proxy records it
        headers = getattr(getattr(exc, "response", None), "headers", None)
        try:
            wait = headers.get("retry-after") if headers is not None else None
        except Exception:  # a response object of another shape: the exception alone
            wait = None
        return f"{exc} (retry-after: {str(wait)[:100]})" if wait else exc
    return f"cancelled: the agent stopped waiting for the call ({type(exc).__name__})"
