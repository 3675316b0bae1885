"""The shadow session behind a tapped client (`Tap`; also the proxy's journaling path): each call the
agent makes (`TapCall`) journaled as a turn's actual request, in the order the calls started; the
shadow engine fed the same messages; a history the agent rewrote itself (`rewritten`); conversations
that share an opening recorded apart; and what the tap saw (`TapStats`). Wrapping an SDK client so its
calls reach a Tap is `tap`'s.

Tap is built in parts, a module each, each class on the one before: tap_state (its state, the
journal's clock), tap_conversations (which conversation a request is in), tap_steps (journaling a
request and its outcome), tap_sequencing (concurrent calls in start order), and here background
Responses calls and closing. The names those modules hold are imported from here as before.
"""

from __future__ import annotations

from typing import Any

from engine.capture.tap_call import TapCall, TapError, TapStats, cut_short, gave_up
from engine.capture.tap_rewrite import rewritten
from engine.capture.tap_sequencing import DIAG_KIND, MAX_HELD, TapSequencing
from engine.capture.tap_state import CONVERSATION_STATE, MAX_CONVERSATIONS
from engine.capture.tap_steps import REQUEST_PARAMS_KEY, RESPONSE_KEY, SERVER_KEY
from engine.capture.tap_streams import Accumulator, plain
from engine.importers.history_edits import REWRITE_KEY
from engine.wording import counted

__all__ = [
    "CONVERSATION_STATE",
    "DIAG_KIND",
    "MAX_CONVERSATIONS",
    "MAX_HELD",
    "REQUEST_PARAMS_KEY",
    "RESPONSE_KEY",
    "REWRITE_KEY",
    "SERVER_KEY",
    "Tap",
    "TapCall",
    "TapError",
    "TapStats",
    "gave_up",
    "rewritten",
]


class Tap(TapSequencing):
    """The shadow session behind a tapped client (also the proxy's journaling path)."""

    def finish_stream(
        self, call: TapCall | None, acc: Accumulator, problem: str | None, background: bool = False
    ) -> None:
        """A streamed call ended (or was abandoned): journal its message and usage, or why not. A
        background call's stream that ended before the response did (it broke off, or the agent stopped
        reading) is not the call's end: the response goes on on the server and the agent resumes it
        (responses.retrieve with stream=True and starting_after) or polls it, so its call waits for that."""
        rid = getattr(acc, "rid", None)
        if (
            background
            and call is not None
            and isinstance(rid, str)
            and acc.result() is None
            and getattr(acc, "failure", None) is None
        ):
            with self.lock:
                self.background[rid] = (call, "in_progress")
                self.last_response_id = rid  # what a next request's previous_response_id names
            return
        if problem is None and not acc.complete:
            failure = getattr(acc, "failure", None)  # the API ended it (Responses: response.failed, error)
            stopped = f"the agent stopped reading after {counted(acc.events, 'event')}"
            problem = f"incomplete_stream: {failure or stopped}"
        elif problem is not None and not problem.startswith("incomplete_stream"):
            problem = f"incomplete_stream: {problem}"
        result = acc.result()
        if problem is None and result is not None:
            self.end(call, result)
        else:
            # (with the usage its stream reported before it ended, if any: Anthropic's message_start)
            self.end(call, problem=cut_short(problem or "incomplete_stream: no message", result))

    def defer(self, call: TapCall, resp: Any, kwargs: dict[str, Any]) -> bool:
        """A background call's `queued` reply: not its outcome, which a later retrieve brings (follow).
        True if the call is left waiting for it."""
        if kwargs.get("background") is not True:
            return False
        data = plain(resp) if not isinstance(resp, dict) else resp
        if not isinstance(data, dict) or data.get("status") not in ("queued", "in_progress"):
            return False
        rid = data.get("id")
        if not isinstance(rid, str):
            return False
        with self.lock:
            self.background[rid] = (call, str(data["status"]))
            self.last_response_id = rid
        return True

    def follow(self, resp: Any) -> None:
        """A responses.retrieve or cancel result: the outcome of a background call, if it is one's and
        it has ended (completed, incomplete, failed, cancelled)."""
        data = plain(resp) if not isinstance(resp, dict) else resp
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            return
        rid, status = data["id"], data.get("status")
        with self.lock:
            pending = self.background.get(rid)
            if pending is None:
                return
            if status in ("queued", "in_progress"):
                self.background[rid] = (pending[0], str(status))
                return
            del self.background[rid]
        if status == "cancelled":
            self.end(pending[0], problem=f"the background response {rid} was cancelled")
        else:
            self.end(pending[0], data)

    def follow_stream(self, rid: str, acc: Accumulator, problem: str | None) -> None:
        """A resumed background stream (responses.retrieve with stream=True) ended: its final event's
        response is the call's outcome; an `error` event ends the call as an incomplete stream; a stream
        that broke off again, or that the agent stopped reading, leaves the call pending (the agent may
        resume or poll again; if it never does, close() says so)."""
        with self.lock:
            pending = self.background.get(rid)
        if pending is None:
            return
        result = acc.result()
        if result is not None:
            self.follow(result)  # completed, incomplete, failed: as a polled retrieve's outcome
            return
        failure = getattr(acc, "failure", None)
        if failure is not None:
            with self.lock:
                self.background.pop(rid, None)
            self.end(pending[0], problem=f"incomplete_stream: {failure}")
        elif problem is not None:
            self.stats.notes.append(f"background response {rid}: a resumed stream ended early ({problem})")

    def close(self) -> None:
        """Finish the recording (idempotent; also run at interpreter exit). Calls still in flight are
        journaled as such: the recording says what it does not know."""
        try:
            with self.lock:
                for rid, (c, status) in list(self.background.items()):
                    self.end(
                        c,
                        problem=f"unobserved: the background response {rid} was still {status} when the "
                        "recording closed (its outcome was not fetched with responses.retrieve)",
                    )
                self.background.clear()
                unfinished = "unobserved: still in flight when the recording was closed"
                for c in self._waiting:
                    if c.outcome is None:
                        c.outcome = ("failed", unfinished)
                if self._open_call is not None:
                    self.end(self._open_call, problem=unfinished)
                self._drain()
                for conv in list(self._convs.values()):
                    self._enter(conv)
                    if self.pipe is not None:
                        self.pipe.close()
        except Exception as exc:
            self.stats.errors += 1
            self.stats.last_error = f"close: {type(exc).__name__}: {exc}"
