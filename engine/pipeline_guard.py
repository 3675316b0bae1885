"""The guards of a Pipeline's public calls: the lock threads sharing one pipeline take turns on
(`_CallGuard`), the pipeline whose binder or summarizer is running (`_CALLBACK`: a call back into it is
refused), and the errors a call from there or after close() raises. pipeline.py's `_journals` decorators
hold them on every journaling call.
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from engine.errors import PipelineClosedError, ReentrantCallError

if TYPE_CHECKING:
    from engine.pipeline_state import PipelineState


class _CallGuard:
    """The lock every public call that journals holds (see _journals), so threads sharing one Pipeline
    (tool results recorded from a pool of workers) take turns instead of interleaving inside a fold: two
    threads appending to `pending` and the journal at once could journal a part the state never folded,
    and a request built while another thread folds reads half of a change. Re-entrant: a public call
    makes others (identity() calls add_source()). A copy of a pipeline (replay's snapshots deep-copy
    its state) gets a lock of its own."""

    __slots__ = ("lock",)

    def __init__(self) -> None:
        self.lock = threading.RLock()

    def __deepcopy__(self, memo: dict[int, Any]) -> _CallGuard:
        return _CallGuard()


# The pipeline whose callback (a binder, the summarizer) is running in this context. asyncio.to_thread
# and tasks copy the context, so a binder's thread sees it too: a call back into that pipeline would
# otherwise wait for the lock its own request holds (a binder's thread), or fold into a request half
# built (the summarizer, or an async binder on the loop's thread).
_CALLBACK: contextvars.ContextVar[PipelineState | None] = contextvars.ContextVar(
    "contextpipe_callback", default=None
)


def _raise_reentrant(name: str) -> None:
    raise ReentrantCallError(
        f"{name}() called from a binder or summarizer of the same pipeline while it builds a request: "
        "the request would change under its own construction. Return the text from the binder (or "
        "the summary from the summarizer), and make the call after next_request() returns"
    )


def _raise_closed(name: str) -> None:
    raise PipelineClosedError(
        f"{name}() after close(): the pipeline's recording and live probe are closed, so this call "
        "would be lost from both; make a new Pipeline (or fork one) for another session, or close it "
        "only when the agent is done (`with Pipeline(...) as pipe:` closes it on leaving the block)"
    )


_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S", bound="PipelineState")  # a Pipeline, or one of its stages: engine/pipeline_state.py


def _journals(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """A public call that may journal events. With a live probe, the outermost such call brackets them:
    its events are sent when it returns (`ProbeServer.hold`/`flush`), on this thread when that is cheap
    and safe, so an agent waiting on its model between turns wakes no probe thread (engine.probe.agent_send)."""

    name = method.__name__

    @functools.wraps(method)
    def call(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if _CALLBACK.get() is self:
            _raise_reentrant(name)
        # One public call at a time (see _CallGuard): another thread's call waits here for this one.
        with self._guard.lock:
            if self._after_close:
                _raise_closed(name)
            probe = self.probe
            # (probe.bracket is False while every client attached reads the quiet stream, or none is:
            # its publish() then sends by itself, and the two calls would only run cold after a model
            # call.)
            if probe is None or self._in_call or not probe.bracket:
                return method(self, *args, **kwargs)
            self._in_call = True
            probe.hold()
            try:
                return method(self, *args, **kwargs)
            finally:
                self._in_call = False
                probe.flush()

    return call


def _journals_async(
    method: Callable[Concatenate[_S, _P], Coroutine[Any, Any, _R]],
) -> Callable[Concatenate[_S, _P], Coroutine[Any, Any, _R]]:
    """`_journals` for a coroutine method: the events of the whole call (its awaits too) go at its end."""

    name = method.__name__

    @functools.wraps(method)
    async def call(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if _CALLBACK.get() is self:
            _raise_reentrant(name)
        # Held across the awaits: a thread's call waits for the whole request (binders included). The
        # lock is re-entrant, so other coroutines on this loop's thread are not blocked by it.
        with self._guard.lock:
            if self._after_close:
                _raise_closed(name)
            probe = self.probe
            if probe is None or self._in_call or not probe.bracket:
                return await method(self, *args, **kwargs)
            self._in_call = True
            probe.hold()
            try:
                return await method(self, *args, **kwargs)
            finally:
                self._in_call = False
                probe.flush()

    return call
