"""The guards of a Pipeline's public calls: the lock threads sharing one pipeline take turns on
(`_CallGuard`), the pipeline whose binder or summarizer is running (`_CALLBACK`: a call back into it is
refused), and the errors a call from there or after close() raises. pipeline.py's `_journals` decorators
hold them on every journaling call.
"""

from __future__ import annotations

import contextvars
import threading
from typing import TYPE_CHECKING, Any

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
