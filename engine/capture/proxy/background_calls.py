"""The proxy recorder's background Responses calls (`background: true`; `RecorderBackground`, a part of
engine.capture.proxy.recording.Recorder): journaled as a turn whose outcome comes with a later retrieve
(GET /responses/{id}) or a resumed stream, or, when the recording closes, never did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.capture.proxy import responses_api
from engine.capture.proxy.exchange import Exchange
from engine.capture.proxy.proxy_tap import ProxyCallError, ProxyTap, SessionInfo
from engine.capture.proxy.recorder_sessions import RecorderSessions
from engine.capture.proxy.sse import REASSEMBLERS
from engine.capture.tap_session import TapCall
from engine.wording import counted

# A background Responses call's statuses before its outcome (the reply to `background: true` is `queued`)
_UNDECIDED = ("queued", "in_progress")


@dataclass
class _Background:
    """A background Responses call journaled as a turn whose outcome has not come yet: it comes with a
    later retrieve (GET /responses/{id}) or a resumed stream (`?stream=true&starting_after=N`), or the
    recording says, when it closes, that it never did."""

    info: SessionInfo
    tap: ProxyTap
    turn: int  # the turn its request was journaled as
    body: dict[str, Any]  # its request (the late usage's prompt_cache_key)
    status: str  # the last status seen
    events: bytes = b""  # a streamed call's events so far (whole events only), resumed streams appended


_UNENDED = "the stream ended before response.completed"  # sse.reassemble_responses' reason for a cut


def _whole_events(raw: bytes) -> bytes:
    """`raw` up to its last complete SSE event: a stream that broke off mid-event, resumed after the last
    event the agent read (`starting_after`), continues with the next whole event."""
    ends = [raw.rfind(sep) + len(sep) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r") if raw.rfind(sep) >= 0]
    return raw[: max(ends)] if ends else b""


class RecorderBackground(RecorderSessions):
    """Background calls journaled as their outcomes come (see Recorder)."""

    def _deferred(self, ex: Exchange, info: SessionInfo, tap: ProxyTap, body: dict[str, Any]) -> bool:
        """A background call whose reply is not its outcome yet (`queued`, or a stream that broke off
        before its final event, which the agent may resume): its turn is left open for the outcome a
        later retrieve brings (_follow). True if so; False when the reply is the outcome already."""
        if ex.status is None or ex.status >= 400 or tap.pipe is None:
            return False
        try:
            raw = ex.body()
        except ValueError:
            return False
        if ex.streamed:
            events = _whole_events(raw)
            r = REASSEMBLERS["openai-responses"](events)
            if r.complete or r.body is None or r.reason != _UNENDED:
                return False  # ended (completed, failed, an error event): journaled as any stream is
            resp, status = r.body, str(r.body.get("status") or "in_progress")
        else:
            events = b""
            try:
                resp = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return False
            status = str(resp.get("status")) if isinstance(resp, dict) else ""
            if status not in _UNDECIDED:
                return False
        rid = resp.get("id")
        if not isinstance(rid, str):
            return False
        tap.last_response_id = rid  # what a next request's previous_response_id names
        self._background[rid] = _Background(info, tap, tap.pipe.turn - 1, body, status, events)
        return True

    def _follow(self, ex: Exchange) -> None:
        """A retrieve or cancel of a Responses call: the outcome of a background call, if it is one."""
        rid = ex.route.follows
        bg = self._background.get(rid or "")
        if rid is None or bg is None or ex.status is None or ex.status >= 400:
            return  # not a call made through this proxy, or nothing learned: it stays pending
        try:
            raw = ex.body()
        except ValueError:
            return
        resp: Any
        if ex.streamed:
            bg.events += _whole_events(raw)
            r = REASSEMBLERS["openai-responses"](bg.events)
            if r.body is None or r.reason == _UNENDED:
                if ex.error:  # the resumed stream broke off too: resumable again, still pending
                    bg.info.notes.append(
                        f"background response {rid}: a resumed stream broke off ({ex.error})"
                    )
                return
            resp = r.body
            if not r.complete and r.body.get("status") != "failed":
                self._resolve(rid, bg, None, f"incomplete_stream: {r.reason} ({counted(r.events, 'event')})")
                return
        else:
            try:
                resp = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return
            if not isinstance(resp, dict):
                return
        status = str(resp.get("status") or "")
        if status in _UNDECIDED:
            bg.status = status
            return
        if status == "cancelled":
            self._resolve(rid, bg, None, f"the background response {rid} was cancelled")
        elif status == "failed":
            self._resolve(rid, bg, resp, None)  # Tap.after journals its error in the API's words
        else:
            self._resolve(rid, bg, responses_api.response_to_chat(resp), None)

    def _resolve(
        self, rid: str, bg: _Background, response: dict[str, Any] | None, problem: str | None
    ) -> None:
        """A background call's outcome, journaled under its own turn: as that turn's reply while it is the
        session's open turn (the reply is fed to the shadow history), else late (usage or error only)."""
        del self._background[rid]
        tap, info = bg.tap, bg.info
        if problem is not None or (response is not None and response.get("status") == "failed"):
            info.errors += 1
        try:
            if tap.pipe is not None and tap.pipe.turn - 1 == bg.turn:
                if problem is None:
                    tap.guard(tap.after, response)
                else:
                    tap.guard(tap.failed, ProxyCallError(problem))
            else:
                if response is not None and response.get("status") == "failed":
                    problem, response = responses_api.why_failed(response), None
                call = TapCall(bg.body, None, turn=bg.turn, state="done")
                call.outcome = ("after", response) if problem is None else ("failed", problem)
                tap.guard(tap.late, call)
        finally:
            if tap.pipe is not None:  # its file may have been parked meanwhile: it reopened
                self._opened(info, tap)
