"""The recording hook: every finished exchange is journaled into its session, off the forwarding path.

`Recorder.__call__` runs on the proxy's event loop and only puts the exchange on a queue; one worker
thread parses, reassembles streams and journals, so recording never delays a response. Each session
is a `ProxyTap` (the tap's journaling path, `engine.capture.tap_session.Tap`: the agent's request as the
turn's actual assembly, the response's usage, the engine's shadow plan), recorded to its own
`.cpsession` in the record directory and served on its own probe socket `<pid>.<n>.sock`, so
`cp-inspect ps` lists it as `PID.N` and `cp-inspect attach PID.N` shows it live.

Recorder is built on recorder_sessions (its sessions: made, served, parked, let go, and the limits on
them) and background_calls (background Responses calls); a session's tap is proxy_tap's. The names
those modules hold are imported from here as before.

Only the request and response bodies are recorded. Headers (and with them API keys) never reach the
recorder: the Exchange does not carry them.
"""

from __future__ import annotations

import json
import queue
import time
from typing import Any

from engine.capture.lineage import digests
from engine.capture.proxy import responses_api
from engine.capture.proxy.background_calls import RecorderBackground
from engine.capture.proxy.exchange import Exchange
from engine.capture.proxy.proxy_tap import ProxyCallError, ProxyTap, SessionInfo, client_fields
from engine.capture.proxy.recorder_sessions import (
    IDLE_PARK_S,
    MAX_KEPT_SESSIONS,
    MAX_OPEN_RECORDINGS,
    MAX_RECORD_BYTES,
    MAX_SERVED,
    log,
)
from engine.capture.proxy.retries import (
    RETRIES_KEY,
    Held,
    attempts_note,
    chains,
    holds,
    moved_on,
    retried_event,
)
from engine.capture.proxy.routes import session_key
from engine.capture.proxy.sse import REASSEMBLERS
from engine.capture.tap_call import cut_short
from engine.capture.tap_request import parse_request, server_of
from engine.errors import ContextPipeError
from engine.importers.model import MessageRec
from engine.wording import counted

__all__ = [
    "IDLE_PARK_S",
    "MAX_KEPT_SESSIONS",
    "MAX_OPEN_RECORDINGS",
    "MAX_RECORD_BYTES",
    "MAX_SERVED",
    "ProxyCallError",
    "ProxyTap",
    "Recorder",
    "SessionInfo",
    "client_fields",
]


def _looks_like_sse(raw: bytes) -> bool:
    """An event stream served under another Content-Type (some OpenAI-compatible servers and gateways
    send `text/plain` or `application/octet-stream`): the agent's SDK reads it as a stream all the same,
    and it was recorded as a reply that is not JSON."""
    head = raw.lstrip()[:16]
    return head.startswith((b"data:", b"event:", b"id:", b":"))


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


class Recorder(RecorderBackground):
    """The proxy's recording hook. `on_session(info)` is called (from the worker) when a session starts.
    Made with RecorderSessions' arguments (the record directory, serve, window, on_session, hello and the
    limits); its worker thread runs `_run`."""

    # ---------------------------------------------------------------- event-loop side

    def __call__(self, ex: Exchange) -> None:
        if ex.ended is None:
            ex.ended = time.time()
        with self._lock:
            self._pending += 1
            self._idle.clear()
        self._q.put(ex)

    def note(self, text: str, warn: bool = False) -> None:
        """Something the proxy answered itself and did not record (a refused WebSocket upgrade or CONNECT),
        or forwarded unrecorded (`warn`: also a warning as it happens, on stderr unless logging is set up).
        Once each: an agent that does it on every call would push every other note out of view."""
        if text not in self.skipped:
            self.skipped.append(text)
            if warn:
                log.warning("cp-inspect proxy: %s", text)
            else:
                log.info("proxy: %s", text)

    # ---------------------------------------------------------------- worker side

    def _run(self) -> None:
        while True:
            try:
                # Woken at least this often while idle, to park the files of sessions gone quiet, and
                # when a held attempt's wait for its retry runs out.
                ex = self._q.get(timeout=self._wake_in())
            except queue.Empty:
                self._release_due()
                self._park_idle()
                continue
            if ex is None:
                return
            try:
                self._record(ex)
            except Exception as exc:  # the recorder must outlive any one bad exchange
                self.skipped.append(f"{type(exc).__name__}: {exc}")
                log.warning("proxy recorder: %s: %s", type(exc).__name__, exc)
            finally:
                try:
                    self._release_due()
                    self._park_idle()
                finally:
                    with self._lock:
                        self._pending -= 1
                        if self._pending == 0:
                            self._idle.set()

    def _record(self, ex: Exchange) -> None:
        wire = ex.route.wire
        if wire is None:
            self._follow(ex)
            return
        try:
            raw = ex.request_body()  # the agent may have compressed it; it was forwarded as sent
        except ValueError as exc:
            self.skipped.append(f"a {wire} request was forwarded but not recorded: {exc}")
            return
        if len(raw) > self.max_record_bytes:
            self.skipped.append(
                f"a {_size(len(raw))} request was forwarded but not recorded "
                f"(above {_size(self.max_record_bytes)})"
            )
            return
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self.skipped.append(f"a {wire} request body that is not JSON ({len(raw)} bytes)")
            return
        if not isinstance(body, dict):
            self.skipped.append(f"a {wire} request body that is not a JSON object")
            return
        if ex.status is not None and 300 <= ex.status < 400:
            # Not a call's outcome: the agent sends the request again where it is pointed, and that is
            # the call (recorded when it comes back through the proxy; see forward.through_proxy).
            self.note(  # once: a gateway may redirect every call alike
                f"a request to {ex.route.upstream_path} was redirected (HTTP {ex.status} to "
                f"{ex.location or 'no Location'}); "
                "the call is recorded where the agent re-sent it, if through the proxy"
            )
            return
        try:
            key = session_key(wire, body, ex.session_header)
        except (TypeError, AttributeError, ValueError, KeyError) as exc:
            # A body of the API's kind with values of another type that the conversion to Chat's shape
            # cannot read (benchmarks/fuzz_proxy.py): said as what it is, not as the worker's bare error.
            self.skipped.append(
                f"a {wire} request whose body is not shaped as the API takes it was forwarded but not "
                f"recorded ({type(exc).__name__}: {exc})"
            )
            return
        found = self._continued(body) if ex.session_header is None else None
        placed: tuple[list[MessageRec], list[int]] | None = None
        if found is not None:
            info, tap = found
        elif ex.session_header is not None:
            info, tap = self._session(key, wire, body)  # the agent named it
        else:
            info, tap, placed = self._place(key, wire, body)
        background = wire == "openai-responses" and body.get("background") is True
        outcome = None if background else self._response(ex, wire, body.get("stream") is True)
        # The attempts this request sends again (none for a background call: its outcome comes later),
        # held here or, when a concurrent call was journaled first and the lineage filed it elsewhere (a
        # branch of its own), in another session: they go with it
        chain = self._retried(ex, body, info, tap) if outcome is not None else []
        for gone in chains(tap.held):
            if gone[0] not in chain and moved_on(gone[-1], body):  # (Held compares by identity)
                self._release(info, tap, gone)  # the agent went on from it: nobody sends it again
        if outcome is not None and holds(ex, *outcome):
            # A failed attempt an SDK retries: a later request says whether it was (retries.py)
            tap.held.append(Held(ex, wire, body, key, placed, tap.parsed, outcome[0], str(outcome[1])))
            tap.parsed = None
            self._holding[info.number] = (info, tap)
            return
        self._drop_held(info, tap, chain)
        self._file(ex, wire, body, key, info, tap, placed, outcome, attempts_note(chain))

    def _retried(self, ex: Exchange, body: dict[str, Any], info: SessionInfo, tap: ProxyTap) -> list[Held]:
        """The held attempts `ex` sends again, oldest first, moved to `tap` (its session) if held in
        another; [] when it is no retry."""
        for other_info, other in [(info, tap), *self._holding.values()]:
            for chain in chains(other.held):
                if chain[-1].retried_by(ex, body):
                    if other is not tap:
                        self._drop_held(other_info, other, chain)
                        tap.held.extend(chain)
                    return chain
        return []

    def _drop_held(self, info: SessionInfo, tap: ProxyTap, chain: list[Held]) -> None:
        """Take `chain` out of what `tap` holds (journaled, or moved to another session)."""
        tap.held = [h for h in tap.held if all(h is not c for c in chain)]
        if not tap.held:
            self._holding.pop(info.number, None)

    def _file(
        self,
        ex: Exchange,
        wire: str,
        body: dict[str, Any],
        key: str,
        info: SessionInfo,
        tap: ProxyTap,
        placed: tuple[list[MessageRec], list[int]] | None,
        outcome: tuple[dict[str, Any] | None, str | None] | None,
        attempts: list[dict[str, Any]],
    ) -> None:
        """Journal an exchange placed in its session (with the failed attempts before it, if any)."""
        turn = None
        try:
            turn = self._journal(ex, wire, body, info, tap, outcome, attempts)
        finally:
            if tap.pipe is not None:  # its file is open now (a parked one reopened on its first append)
                self._opened(info, tap)
            tap.parsed = None
        if placed is not None and turn is not None and info.number in self._by_number:
            msgs, chain = placed
            self.lineage.journaled(info.number, key, turn, msgs, chain, tap.fed, tap.reply_fed)

    def _release(self, info: SessionInfo, tap: ProxyTap, chain: list[Held]) -> None:
        """Nobody sent the held attempts of one call (`chain`, oldest first) again: the last one is the
        failed turn it is, the ones before it its retries (the parse of the request being filed now, if
        any, is set aside meanwhile)."""
        self._drop_held(info, tap, chain)
        if not chain:
            return
        last, saved = chain[-1], tap.parsed
        tap.parsed = last.parsed
        try:
            self._file(
                last.ex, last.wire, last.body, last.key, info, tap, last.placed,
                (last.response, last.problem), attempts_note(chain[:-1]),
            )
        finally:
            tap.parsed = saved

    def _release_due(self, every: bool = False) -> None:
        """Release the held attempts whose wait for a retry ran out (`every`: all of them, at close)."""
        now = time.time()
        for info, tap in list(self._holding.values()):
            for chain in chains(tap.held):
                if every or chain[-1].deadline <= now:
                    try:
                        self._release(info, tap, chain)
                    except Exception as exc:  # as _run's: the recorder outlives one bad exchange
                        self.skipped.append(f"{type(exc).__name__}: {exc}")
                        log.warning("proxy recorder: %s: %s", type(exc).__name__, exc)

    def _wake_in(self) -> float:
        """How long the worker may sleep: to the next park check, or the first held attempt's deadline."""
        wait = self.idle_park / 2
        for _info, tap in self._holding.values():
            for chain in chains(tap.held):
                wait = min(wait, chain[-1].deadline - time.time())
        return max(0.05, wait)

    def _place(
        self, key: str, wire: str, body: dict[str, Any]
    ) -> tuple[SessionInfo, ProxyTap, tuple[list[MessageRec], list[int]] | None]:
        """The session of a request with no session header, among those that share its opening (`key`):
        by the messages each already holds (engine.capture.lineage). (Its parsed messages and their
        digests, for the index once it is journaled; None when the request cannot be parsed: the tap
        says why.)"""
        tap_wire = "anthropic" if wire == "anthropic" else "openai"
        chat_body = responses_api.request_to_chat(body) if wire == "openai-responses" else body
        try:
            parsed = parse_request(tap_wire, chat_body)
        except (ContextPipeError, ValueError, TypeError, KeyError, AttributeError):
            return (*self._session(key, wire, body), None)
        msgs = parsed[0]
        chain = digests(key, msgs)
        where = self.lineage.place(key, msgs, chain)
        if where.session is not None:
            info, tap = self._by_number[where.session]
            if where.ambiguous:
                tap.ambiguous = tap.filed_ambiguously(where, info.number, info.notes)
        else:
            family = [n for n in self._families.get(key, ()) if n in self._by_number]
            if where.branch is None and where.continues is None and family:
                # Shares the opening but nothing else the index knows: the agent's own version of its
                # history (as before sessions were told apart by it), in the most recently active one
                recent = next((n for n in reversed(self._kept) if n in family), family[-1])
                info, tap = self._by_number[recent]
            else:
                info, tap = self._session(key, wire, body, where.branch, where.continues, fresh=True)
        tap.parsed = (chat_body, parsed)
        return info, tap, (msgs, chain)

    def _journal(
        self,
        ex: Exchange,
        wire: str,
        body: dict[str, Any],
        info: SessionInfo,
        tap: ProxyTap,
        outcome: tuple[dict[str, Any] | None, str | None] | None = None,
        attempts: list[dict[str, Any]] | None = None,
    ) -> int | None:
        """Journal one exchange; the turn its request became, or None if it was not journaled. `outcome`:
        its `_response`, when worked out already; `attempts`: the failed attempts the agent sent it after."""
        given = tap.parsed
        chat_body = responses_api.request_to_chat(body) if wire == "openai-responses" else body
        if given is not None and wire == "openai-responses":
            chat_body = given[0]  # (the converted body _place parsed: the tap takes the parse by identity)
        before_errors = tap.tap_errors
        if tap.client_hello is None:  # the conversation's first call: who makes it (its probe's header)
            tap.client_hello = client_fields(ex, wire, body)
        # Where it went (the upstream, behind this proxy: what the conventions' server.address means)
        tap.server = server_of(ex.upstream) if ex.upstream else None
        # stamped when the agent sent it: the exchange is journaled only once its answer has ended
        tap.guard(tap.before, chat_body, ex.started)
        if tap.tap_errors != before_errors:
            info.tap_errors += 1
            info.notes.append(f"request not journaled: {tap.last_error}")
            return None
        turn = tap.pipe.turn - 1 if tap.pipe is not None else None
        info.calls += 1
        if attempts and tap.pipe is not None:  # on the turn's trace (explain, the probe)
            info.retried += len(attempts)
            tap.guard(tap.pipe.annotate, RETRIES_KEY, attempts)
            # and as an event simulate's index reads without inflating traces (a `diag`, as tap errors are)
            tap.guard(tap.pipe.journal.append, retried_event(turn, attempts))
        self._active(info, tap)
        if (
            wire == "openai-responses"
            and body.get("background") is True
            and self._deferred(ex, info, tap, body)
        ):
            return turn
        response, problem = outcome or self._response(ex, wire, body.get("stream") is True)
        with tap.journal_at(ex.ended):  # the outcome came when the answer ended, not when it is journaled
            if response is not None and problem is None:
                tap.guard(tap.after, response)
            else:
                info.errors += 1
                # (with the usage a stream reported before it was cut, if any: Anthropic's message_start)
                tap.guard(tap.failed, cut_short(problem or "no response", response))
        return turn

    def _response(
        self, ex: Exchange, wire: str, asked_stream: bool = False
    ) -> tuple[dict[str, Any] | None, str | None]:
        """(the response body in the non-streamed chat/messages shape, what went wrong or None). A stream
        that did not end whole: (what it reassembled to, as far as it came, or None; why)."""
        if ex.status is None:
            return None, ex.error or "the upstream was not reached"
        try:
            raw = ex.body()
        except ValueError as exc:  # every decoding failure, as exchange.decode reports it
            return None, f"response not decodable: {exc}"
        if ex.status >= 400:
            wait = f" (retry-after: {ex.retry_after})" if ex.retry_after else ""
            return None, f"HTTP {ex.status}{wait}: {raw[:2000].decode('utf-8', 'replace')}"
        if ex.streamed or (asked_stream and _looks_like_sse(raw)):
            r = REASSEMBLERS[wire](raw).settle(cut=bool(ex.error))
            if r.body is None or not r.complete:
                why = r.reason or "incomplete"
                if ex.error:
                    why = f"{ex.error}; {why}"
                return r.body, f"incomplete_stream: {why} ({counted(r.events, 'event')})"
            resp = r.body
        else:
            if ex.error:
                return None, ex.error
            try:
                resp = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return None, f"response is not JSON ({len(raw)} bytes)"
            if not isinstance(resp, dict):
                return None, "response is not a JSON object"
        if wire == "openai-responses" and resp.get("status") != "failed":
            # (a failed one goes to the tap as the API sent it: Tap.after journals its error's words)
            resp = responses_api.response_to_chat(resp)
        return resp, None

    # ---------------------------------------------------------------- shutdown

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every exchange handed over so far is journaled. False on timeout."""
        return self._idle.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Journal what is queued, then finish every recording (readable and verifiable after this)."""
        self.flush(timeout)
        self._q.put(None)
        self._thread.join(timeout)
        self._release_due(every=True)  # attempts nobody retried before the proxy closed: failed turns
        for rid, bg in list(self._background.items()):
            # Its outcome never came through the proxy (the agent gave up, or fetched it another way)
            self._resolve(
                rid,
                bg,
                None,
                f"unobserved: the background response {rid} was still {bg.status} when the recording "
                "closed (its outcome was not fetched through the proxy)",
            )
        for _info, tap in self.sessions.values():
            try:
                tap.close()
            except Exception as exc:
                log.warning("proxy recorder: closing a session failed: %s", exc)
