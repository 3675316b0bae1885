"""Per-call sequencing (`TapSequencing`, a part of `engine.capture.tap_session.Tap`): the calls of
concurrent threads and tasks journaled in the order they started, each outcome with its own turn (or
late, under it), and tap failures counted and journaled, never raised into the agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.capture.proxy.retries import RETRIES_KEY, retried_event
from engine.capture.tap_call import CutShort, TapCall, TapError, _caller
from engine.capture.tap_retries import attempts_before
from engine.capture.tap_steps import TapSteps
from engine.capture.tap_streams import plain
from engine.errors import ContextPipeError
from engine.feedback import normalize_usage, reply_diagnostics

DIAG_KIND = "tap_error"
# Finished calls held behind an open one before the open one is given up on (closed without its
# outcome, journaled late if it comes): an agent thread that leaves a stream open and unread must not
# hold every other thread's turns out of the live view for long.
MAX_HELD = 8


def _kind_and_message(text: str) -> tuple[str, str]:
    """A failed call's (kind, message): the message without the kind it starts with. The trace says a
    failure as "{kind}: {message}" (explain's "call failed: ...", the inspector's error line, the span's
    status), and said it twice ("incomplete_stream: incomplete_stream: the agent disconnected ...")."""
    kind = _error_kind(text)
    return kind, text[len(kind) + 2 :] if text.startswith(kind + ": ") else text


def _error_kind(text: str) -> str:
    low = text.lower()
    if "too long" in low or "context_length" in low:
        return "prompt_too_long"
    if text.startswith("incomplete_stream"):
        return "incomplete_stream"
    if text.startswith("unobserved"):  # a call that went through but whose response the tap could not see
        return "unobserved"
    return "error"


class TapSequencing(TapSteps):
    """Calls begun and ended by any thread or task, journaled one turn at a time in start order."""

    def begin(self, body_of: Callable[[], dict[str, Any]]) -> TapCall | None:
        """A call starts: read its request (None if the tap cannot: counted, the call goes on untapped)
        and journal it now, or as soon as the call whose turn is open has its outcome."""
        try:
            call = TapCall(body_of(), _caller(), self.clock())
        except Exception as exc:
            self.note_error(f"before: {type(exc).__name__}: {exc}")
            return None
        try:
            with self.lock:
                cur = self._open_call
                if cur is not None and cur.caller == call.caller:
                    # The same thread/task calls again while its own call is unfinished: that stream
                    # was abandoned (or is read interleaved); waiting for it would stall the journal.
                    cur.state = "superseded"
                    self._open_call = None
                self._waiting.append(call)
                self._drain()
        except Exception as exc:
            self.note_error(f"begin: {type(exc).__name__}: {exc}")
        return call

    def end(self, call: TapCall | None, response: Any = None, problem: Any = None) -> None:
        """A call's outcome: its response, or `problem` (an exception or text) when it failed."""
        if call is None:
            return
        try:
            with self.lock:
                if call.outcome is not None or call.state in ("done", "dropped"):
                    return
                call.outcome = ("after", response) if problem is None else ("failed", problem)
                call.ended_at = self.clock()
                if call.state == "open":
                    self._settle(call)
                    self._open_call = None
                    self._drain()
                elif call.state == "superseded":
                    call.state = "done"
                    self.guard(self.late, call)
                else:  # waiting behind the open call: journaled in turn by _drain
                    held = sum(1 for c in self._waiting if c.outcome is not None)
                    if held >= MAX_HELD and self._open_call is not None:
                        self._open_call.state = "superseded"
                        self._open_call = None
                        self._drain()
        except Exception as exc:
            self.note_error(f"end: {type(exc).__name__}: {exc}")

    def _drain(self) -> None:
        """Journal waiting calls in start order until one is still in flight (its turn stays open)."""
        while self._open_call is None and self._waiting:
            c = self._waiting.popleft()
            if not self.guard(self.before, c.body, c.sent_at) or self.pipe is None:
                c.state = "dropped"
                continue
            c.turn, c.state, c.conversation = self.pipe.turn - 1, "open", self._conv.number
            self._open_call = c
            if c.outcome is not None:
                self._settle(c)
                self._open_call = None

    def _settle(self, c: TapCall) -> None:
        assert c.outcome is not None
        kind, payload = c.outcome
        c.state = "done"
        self._enter_number(c.conversation)
        if len(c.tries) > 1:  # the SDK retried it: the attempts before its last on the turn (tap_retries)
            self.guard(self._retried, attempts_before(c.tries))
        # Stamped when the outcome came: a call held behind another's turn is journaled only when that
        # one ends, and its span (the OpenTelemetry export) ended there, after its own answer.
        with self.journal_at(c.ended_at):
            self.guard(self.after if kind == "after" else self.failed, payload)

    def _retried(self, attempts: list[dict[str, Any]]) -> None:
        """The failed attempts the SDK sent again before the open turn's call got its outcome: on its
        trace (explain, the probe) and as the `retried` diag simulate's index reads, as the proxy has them."""
        assert self.pipe is not None
        self.stats.retried += len(attempts)
        self.pipe.annotate(RETRIES_KEY, attempts)
        self.pipe.journal.append(retried_event(self.pipe.turn - 1, attempts))  # (the open turn: the call's)

    def late(self, call: TapCall) -> None:
        """The outcome of a call whose turn is already closed: a `usage` (or `error`) event under the
        call's own turn number, folded like the pipeline's own. The reply is not fed to the shadow
        history (later requests of that conversation carry it anyway)."""
        self._enter_number(call.conversation)
        assert self.pipe is not None and call.outcome is not None and call.turn is not None
        kind, payload = call.outcome
        evs: list[dict[str, Any]] = []
        if kind == "failed":
            text = str(payload)
            if isinstance(payload, CutShort):
                try:
                    evs.append(self._late_usage(call, payload.usage, {}))
                except ContextPipeError as exc:  # usage the journal cannot read: the failure still said
                    self.note_error(f"late: {type(exc).__name__}: {exc}")
            kind, message = _kind_and_message(text)
            ev = {
                "k": "error",
                "turn": call.turn,
                "kind": kind,
                "message": message[:2000],
                "time": self.clock(),
            }
        else:
            data = plain(payload) if not isinstance(payload, dict) else payload
            if not isinstance(data, dict):
                raise TapError(f"response is {type(data).__name__}, not an object")
            if self.actual is not None:
                self.actual.served_by(call.turn, data.get("system_fingerprint"))
            if data.get("usage") is None:
                self.stats.streams_without_usage += 1
                return
            ev = self._late_usage(call, data["usage"], data)
        for e in [ev, *evs]:  # (the error, then the usage its stream reported: as failed() has them)
            self.pipe.fold(e)
            self.pipe.journal.append(e)

    def _late_usage(self, call: TapCall, usage: Any, data: dict[str, Any]) -> dict[str, Any]:
        """The `usage` event of a call whose turn is already closed (see late)."""
        key = call.body.get("prompt_cache_key")
        u = normalize_usage(usage).with_extra(
            prompt_cache_key=key if isinstance(key, str) else None, **reply_diagnostics(data)
        )
        return {"k": "usage", "turn": call.turn, "usage": u.to_dict(), "estimated": 0, "time": self.clock()}

    def failed(self, exc: BaseException | str) -> None:
        assert self.pipe is not None
        self.pipe.record_error(*_kind_and_message(str(exc)))
        if isinstance(exc, CutShort):  # and what the stream said the call used
            # After the error: the turn's trace takes the first outcome it is told (explain's "call
            # failed", the inspector's error line); the usage event after it is the turn's all the same
            # (cost, cache figures, the span), as a late outcome's is. Guarded on its own: usage the
            # journal cannot read is a tap error, the failure already said.
            self.guard(self._usage, exc.usage, {})

    def guard(self, step: Callable[..., None], *args: Any) -> bool:
        """Run one tap step; a failure is counted and journaled, never raised. True if it worked."""
        try:
            with self.lock:
                step(*args)
            return True
        except Exception as exc:
            self.note_error(f"{getattr(step, '__name__', 'step')}: {type(exc).__name__}: {exc}")
            return False

    def note_error(self, text: str) -> None:
        try:
            self.stats.errors += 1
            self.stats.last_error = text[:500]
            if self.pipe is not None:
                with self.lock:
                    self.pipe.annotate("tap_errors", self.stats.errors)
                    self.pipe.journal.append(
                        {
                            "k": "diag",
                            "kind": DIAG_KIND,
                            "turn": max(0, self.pipe.turn - 1),
                            "message": text[:500],
                            "count": self.stats.errors,
                        }
                    )
        except Exception:  # the diagnostic itself must not fail the agent either
            pass
