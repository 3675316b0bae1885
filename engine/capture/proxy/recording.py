"""The recording hook: every finished exchange is journaled into its session, off the forwarding path.

`Recorder.__call__` runs on the proxy's event loop and only puts the exchange on a queue; one worker
thread parses, reassembles streams and journals, so recording never delays a response. Each session
is a `ProxyTap` (the tap's journaling path, `engine.capture.tap_session.Tap`: the agent's request as the
turn's actual assembly, the response's usage, the engine's shadow plan), recorded to its own
`.cpsession` in the record directory and served on its own probe socket `<pid>.<n>.sock`, so
`cp-inspect ps` lists it as `PID.N` and `cp-inspect attach PID.N` shows it live.

Only the request and response bodies are recorded. Headers (and with them API keys) never reach the
recorder: the Exchange does not carry them.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.capture.lineage import Lineage, branch_note, digests
from engine.capture.proxy import responses_api
from engine.capture.proxy.exchange import Exchange
from engine.capture.proxy.routes import opening_text, session_key
from engine.capture.proxy.sse import REASSEMBLERS
from engine.capture.tap_request import parse_request, server_of
from engine.capture.tap_session import Tap, TapCall
from engine.errors import ContextPipeError
from engine.importers._common import guess_provider
from engine.importers.ingest import DEFAULT_WINDOW, ActualRecorder, IngestReport, _Feeder
from engine.importers.model import MessageRec
from engine.pipeline import ENGINE_VERSION, Pipeline
from engine.wording import counted

log = logging.getLogger("contextpipe.proxy")

# Requests above this are forwarded but not recorded. Large requests are images and documents (base64:
# a computer-use agent's screenshots pass 16 MiB in a few dozen turns), which the journal keeps as
# placeholders, so they cost little to record (three 27 MiB requests of screenshots: 0.2 s); even text
# records at about 1.5 s per 50 MiB. The ceiling guards the recorder's memory against the absurd only:
# at 16 MiB it dropped a screenshot-heavy session's every later turn.
MAX_RECORD_BYTES = 256 * 1024 * 1024
# Sessions served live at once (each on its own probe socket: a listening socket, a wake-up socket pair,
# a selector, a reserve descriptor and a thread). Past this, the least recently active session stops
# being served (it is still recorded). Unbounded, a harness running many tasks through one proxy (each
# task a session) used five descriptors a session and ran out (1024 is a common soft limit, macOS has
# 256): then new calls could not even be accepted.
MAX_SERVED = 16
# Recording files held open at once. Past this the least recently active session's file is parked
# (RecordingWriter.park: finished with its footer and closed; its next call reopens it and appends).
# Each session held its file open for the life of the proxy: a harness running hundreds of tasks through
# one proxy ran the process out of descriptors with them alone.
# Measured (2026-12-04, 2 cores, a Recorder fed 200 sessions round-robin, 30 calls each): one descriptor
# per open recording (200 unbounded); the recorder's time per call 1.07 ms never parking, 1.18 ms with
# every call reopening a parked file (max_open=1), 1.23 ms at 64: within the noise. Alone, park() takes
# 0.01-0.07 ms (4 to 260 KiB recordings; with the pipeline's pending chunk 0.1-0.8 ms) and the reopen on
# the next append 0.01-0.02 ms, against a model call of seconds. So a file held open buys nothing, and
# descriptors are what a proxy runs short of: its agents' connections and their upstream ones (two a
# call in flight) and the served probes (MAX_SERVED, about five each) share macOS's default limit of
# 256. 32 (halved from 64) leaves those the room; a session that calls again reopens in microseconds.
MAX_OPEN_RECORDINGS = 32
# A session with no call for this long has its file parked too: an agent that went away (finished,
# killed, its harness moved on) leaves a complete, closed recording behind while the proxy runs on,
# not one that only the proxy's exit finishes. Kept at 30 s: an agent between calls (a model call, a
# tool run) is often idle longer, but parking and reopening cost it about a millisecond (above), while a
# longer wait leaves a finished agent's file without its footer for longer.
IDLE_PARK_S = 30.0
# Sessions whose engine state (the shadow pipeline, its history and caches) is kept. Past this, the least
# recently active session is let go: its recording finished (as parking does) and its state dropped; if
# its agent calls again, the call opens a new session (a new recording, which names the one it continues).
# Kept, every conversation a proxy had ever seen stayed in memory: ~0.35 MB each (measured, 2026-12-04,
# sessions of 5 calls: +17 MB over 48 sessions once their files were parked), so a harness running
# thousands of tasks through one proxy grew without bound. 256 such sessions are ~90 MB at most.
MAX_KEPT_SESSIONS = 256


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


class ProxyCallError(ContextPipeError):
    """An upstream error or a cut stream, as the tap's `failed` step takes it."""


@dataclass
class SessionInfo:
    """A conversation the proxy records: its number, key, wire format, model, file and attach target."""
    number: int
    key: str
    wire: str
    model: str
    provider: str
    path: Path
    target: str  # what `cp-inspect attach` takes
    calls: int = 0
    errors: int = 0  # upstream errors and incomplete streams, journaled as errors
    tap_errors: int = 0  # requests the journal could not take (a format the tap does not parse)
    notes: list[str] = field(default_factory=list)
    slot: str = ""  # its place in Recorder.sessions (the key, or key~N for a later one with its opening)
    branch: dict[str, Any] | None = None  # the session it branched from (engine.capture.lineage)


class ProxyTap(Tap):
    """The tap's journaling with the proxy's sinks: a recording per session and a probe socket per session."""

    def __init__(self, wire: str, info: SessionInfo, serve: bool, window: int, hello: dict[str, Any]) -> None:
        super().__init__(wire, record=info.path, serve=False, window=window)
        self.info, self.serve_probe, self.hello = info, serve, hello
        # Who the conversation is (client_fields): worked out at its first call, before its probe serves.
        self.client_hello: dict[str, Any] | None = None
        self.routes = False  # the recorder files each request into its session (Recorder._place)

    def before(self, body: dict[str, Any], sent_at: float | None = None) -> None:
        if self.pipe is None:
            self._open(str(body.get("model", "unknown")))
        super().before(body, sent_at)

    def _open(self, model: str) -> None:
        pipe = Pipeline(
            model, self.info.provider, self.window, record=self.record, serve=False, clock=self.now
        )
        self.pipe = pipe
        self.feeder = _Feeder(pipe, IngestReport())
        self.actual = ActualRecorder(pipe)
        if self.serve_probe:
            from engine.probe.server import ProbeServer

            header = {
                "model": model,
                "provider": self.info.provider,
                "engine_version": ENGINE_VERSION,
                "start_time": self.clock(),
                "session": self.info.number,
                # The key an agent's own probe header uses (Pipeline's hello): an inspector attached to a
                # conversation that ended says where it is kept ("press s to save" saved a second copy).
                "recording": os.path.abspath(self.info.path),
                # the process that made its calls and its opening; a `run`'s agent argv (self.hello) wins
                **(self.client_hello or {}),
                **self.hello,
            }
            events = pipe.journal.events  # append-only: clients read it by index, no copy per client
            probe = ProbeServer(header, lambda: events, session=self.info.number)
            try:
                probe.start()
            except (ContextPipeError, OSError) as exc:  # the session is still recorded, only not served
                probe.close()
                logging.getLogger("contextpipe.probe").warning(
                    "contextpipe: session %s is recorded but not served live: %s", self.info.number, exc
                )
                return
            # The pipeline publishes every journal event to `pipe.probe` (it already subscribed for the
            # recording); setting it here serves this session on its own socket, not the process's.
            pipe.probe = probe


_UNENDED = "the stream ended before response.completed"  # sse.reassemble_responses' reason for a cut


def _looks_like_sse(raw: bytes) -> bool:
    """An event stream served under another Content-Type (some OpenAI-compatible servers and gateways
    send `text/plain` or `application/octet-stream`): the agent's SDK reads it as a stream all the same,
    and it was recorded as a reply that is not JSON."""
    head = raw.lstrip()[:16]
    return head.startswith((b"data:", b"event:", b"id:", b":"))


def _whole_events(raw: bytes) -> bytes:
    """`raw` up to its last complete SSE event: a stream that broke off mid-event, resumed after the last
    event the agent read (`starting_after`), continues with the next whole event."""
    ends = [raw.rfind(sep) + len(sep) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r") if raw.rfind(sep) >= 0]
    return raw[: max(ends)] if ends else b""


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:40] or "model"


def client_fields(ex: Exchange, wire: str, body: dict[str, Any]) -> dict[str, Any]:
    """What `ps` and `top` show a conversation as (its probe's header): "client", "pid N" of the local
    process that holds the connection its first call came on, with its "argv" and "client_pid", or
    "unknown" (not a local process of this user's, or the connection already closed: peer.py); and
    "opening", the start of its first message. Every conversation of a standalone proxy was listed under
    the proxy's own command line: a person could not tell which agent each one was."""
    from engine.capture.proxy.peer import peer_process

    out: dict[str, Any] = {"client": "unknown"}
    peer = None
    if ex.peer_lookup is not None:  # started when the call arrived (the connection open then)
        try:
            peer = ex.peer_lookup.result(timeout=5)
        except Exception:  # slow or failed: looked up again now, or said unknown
            peer = None
    if peer is None:
        peer = peer_process(ex.peer, ex.local)
    if peer is not None:
        out.update({"client": f"pid {peer.pid}", "client_pid": peer.pid, "argv": peer.argv})
    opening = opening_text(wire, body)
    if opening:
        out["opening"] = opening
    return out


class Recorder:
    """The proxy's recording hook. `on_session(info)` is called (from the worker) when a session starts."""

    def __init__(
        self,
        record_dir: Path,
        *,
        serve: bool = True,
        window: int = DEFAULT_WINDOW,
        on_session: Callable[[SessionInfo], None] | None = None,
        hello: dict[str, Any] | None = None,
        max_record_bytes: int = MAX_RECORD_BYTES,
        max_served: int = MAX_SERVED,
        max_open: int = MAX_OPEN_RECORDINGS,
        idle_park: float = IDLE_PARK_S,
        max_kept: int = MAX_KEPT_SESSIONS,
    ) -> None:
        self.record_dir = record_dir
        self.serve, self.window, self.on_session = serve, window, on_session
        self.hello = hello or {}
        self.max_record_bytes = max_record_bytes
        self.max_served = max_served
        self.max_open, self.idle_park = max_open, idle_park
        self.max_kept = max(1, max_kept)  # (the session a call just came for is always kept)
        # Every session whose state is kept, least recently active first (see MAX_KEPT_SESSIONS)
        self._kept: OrderedDict[int, tuple[SessionInfo, ProxyTap]] = OrderedDict()
        self.let_go: list[SessionInfo] = []  # sessions whose state was dropped (their recordings finished)
        self._let_go_keys: dict[str, int] = {}  # their keys -> their numbers, for a session that comes back
        self._numbered = 0
        self._served: OrderedDict[int, tuple[SessionInfo, ProxyTap]] = OrderedDict()  # by last activity
        # Sessions whose recording file is open, least recently active first, with when they last were.
        self._open: OrderedDict[int, tuple[SessionInfo, ProxyTap, float]] = OrderedDict()
        # Every live session by its slot: its key (a header's, or its opening's: routes.session_key), or,
        # for a later session with the same opening (a restart, another attempt, a fork), `key~N`
        self.sessions: dict[str, tuple[SessionInfo, ProxyTap]] = {}
        self._by_number: dict[int, tuple[SessionInfo, ProxyTap]] = {}
        self._families: dict[str, list[int]] = {}  # an opening's key -> its live sessions' numbers
        self.lineage = Lineage()  # which of the sessions sharing an opening a request continues
        self.skipped: list[str] = []  # exchanges not recorded, with why
        self._background: dict[str, _Background] = {}  # background Responses calls by response id
        self._q: queue.Queue[Exchange | None] = queue.Queue()
        self._stamp = time.strftime("%Y%m%d-%H%M%S")
        self._idle = threading.Event()
        self._idle.set()
        self._pending = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="contextpipe-proxy-recorder", daemon=True)
        self._thread.start()

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
                # Woken at least this often while idle, to park the files of sessions gone quiet.
                ex = self._q.get(timeout=max(0.05, self.idle_park / 2))
            except queue.Empty:
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
        turn = None
        try:
            turn = self._journal(ex, wire, body, info, tap)
        finally:
            if tap.pipe is not None:  # its file is open now (a parked one reopened on its first append)
                self._opened(info, tap)
            tap.parsed = None
        if placed is not None and turn is not None and info.number in self._by_number:
            msgs, chain = placed
            self.lineage.journaled(info.number, key, turn, msgs, chain, tap.fed, tap.reply_fed)

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
        self, ex: Exchange, wire: str, body: dict[str, Any], info: SessionInfo, tap: ProxyTap
    ) -> int | None:
        """Journal one exchange; the turn its request became, or None if it was not journaled."""
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
        self._active(info, tap)
        if wire == "openai-responses" and body.get("background") is True and self._deferred(ex, info, tap, body):
            return turn
        response, problem = self._response(ex, wire, body.get("stream") is True)
        with tap.journal_at(ex.ended):  # the outcome came when the answer ended, not when it is journaled
            if response is not None and problem is None:
                tap.guard(tap.after, response)
            else:
                info.errors += 1
                tap.guard(tap.failed, ProxyCallError(problem or "no response"))
        return turn

    # ---------------------------------------------------------------- background Responses calls

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
                    bg.info.notes.append(f"background response {rid}: a resumed stream broke off ({ex.error})")
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

    def _resolve(self, rid: str, bg: _Background, response: dict[str, Any] | None, problem: str | None) -> None:
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

    def _opened(self, info: SessionInfo, tap: ProxyTap) -> None:
        """A session had a call: it is the most recent; past max_open, the least recently active
        sessions' files are parked."""
        self._open[info.number] = (info, tap, time.monotonic())
        self._open.move_to_end(info.number)
        while len(self._open) > self.max_open:
            _, (old_info, old_tap, _) = self._open.popitem(last=False)
            self._park(old_info, old_tap)
        self._kept[info.number] = (info, tap)
        self._kept.move_to_end(info.number)
        if len(self._kept) > self.max_kept:
            self._let_go_oldest()

    def _let_go_oldest(self) -> None:
        """Past max_kept sessions, drop the least recently active ones' state (see MAX_KEPT_SESSIONS).
        One with a background call still pending keeps it: the call's outcome goes to its turn."""
        waiting = {id(bg.tap) for bg in self._background.values()}
        for number, (info, tap) in list(self._kept.items()):
            if len(self._kept) <= self.max_kept:
                return
            if id(tap) in waiting:
                continue
            del self._kept[number]
            self._let_go(info, tap)

    def _let_go(self, info: SessionInfo, tap: ProxyTap) -> None:
        self._open.pop(info.number, None)
        served = self._served.pop(info.number, None)
        pipe = tap.pipe
        if served is not None and pipe is not None and pipe.probe is not None:
            probe, pipe.probe = pipe.probe, None
            try:
                probe.close()
            except Exception as exc:  # closing must not cost the recording
                log.warning("proxy recorder: closing session %s's probe: %s", info.number, exc)
        try:
            tap.close()  # finishes its recording (reopened for the moment if it was parked)
        except Exception as exc:
            log.warning("proxy recorder: closing session %s: %s", info.number, exc)
        tap.pipe, tap.feeder, tap.actual, tap.fed = None, None, None, []
        if self.sessions.get(info.slot, (None, None))[1] is tap:
            del self.sessions[info.slot]
        self._by_number.pop(info.number, None)
        family = self._families.get(info.key)
        if family is not None and info.number in family:
            family.remove(info.number)
            if not family:
                del self._families[info.key]
        self.lineage.forget(info.number)
        self._let_go_keys[info.key] = info.number
        self.let_go.append(info)

    def _park_idle(self) -> None:
        """Park the file of every session with no call for idle_park seconds (oldest first: in order)."""
        cutoff = time.monotonic() - self.idle_park
        while self._open:
            number, (info, tap, last) = next(iter(self._open.items()))
            if last > cutoff:
                return
            del self._open[number]
            self._park(info, tap)

    def _park(self, info: SessionInfo, tap: ProxyTap) -> None:
        writer = tap.pipe.recorder if tap.pipe is not None else None
        if writer is None or not hasattr(writer, "park"):
            return
        try:
            writer.park()
        except Exception as exc:  # the footer could not be written: the recording stopped there
            info.notes.append(f"recording stopped while idle: {exc}")
            log.warning("proxy recorder: parking session %s's recording: %s", info.number, exc)

    def _active(self, info: SessionInfo, tap: ProxyTap) -> None:
        """A served session had a call: it is the most recent; past max_served, the least recently
        active one stops being served (closed probe: its socket leaves `cp-inspect ps`), still recorded."""
        if tap.pipe is None or tap.pipe.probe is None:
            return
        self._served[info.number] = (info, tap)
        self._served.move_to_end(info.number)
        while len(self._served) > self.max_served:
            _, (old_info, old_tap) = self._served.popitem(last=False)
            pipe = old_tap.pipe
            probe = pipe.probe if pipe is not None else None
            if pipe is None or probe is None:
                continue
            pipe.probe = None  # the pipeline stops publishing to it first
            try:
                probe.close()
            except Exception as exc:  # closing must not cost the recording
                log.warning("proxy recorder: closing session %s's probe: %s", old_info.number, exc)
            old_info.notes.append(
                f"no longer served live (more than {counted(self.max_served, 'session')} active; it is still recorded)"
            )

    def _response(self, ex: Exchange, wire: str, asked_stream: bool = False) -> tuple[dict[str, Any] | None, str | None]:
        """(the response body in the non-streamed chat/messages shape, what went wrong or None)."""
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
                return None, f"incomplete_stream: {why} ({counted(r.events, 'event')})"
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

    def _continued(self, body: dict[str, Any]) -> tuple[SessionInfo, ProxyTap] | None:
        """The session a Responses request continues by `previous_response_id`: its first message is only
        what is new this turn, so keyed by it each turn of such a conversation was a session of its own."""
        prev = body.get("previous_response_id")
        if not isinstance(prev, str):
            return None
        for info, tap in reversed(list(self.sessions.values())):
            if tap.last_response_id == prev:
                return info, tap
        return None

    def _session(
        self,
        key: str,
        wire: str,
        body: dict[str, Any],
        branch: dict[str, Any] | None = None,
        continues: int | None = None,
        fresh: bool = False,
    ) -> tuple[SessionInfo, ProxyTap]:
        """The session `key` names (a header's, or an opening's first), or with `fresh` a new one, which
        `branch` says it branched from (lineage) or `continues` names (a session let go)."""
        found = None if fresh else self.sessions.get(key)
        if found is not None:
            return found
        self._numbered += 1
        n = self._numbered
        model = str(body.get("model") or "unknown")
        provider = "anthropic" if wire == "anthropic" else guess_provider(model)
        if provider not in ("anthropic", "openai", "deepseek", "bedrock"):
            provider = "openai"  # an OpenAI-compatible endpoint: prefix caching is the safe policy guess
        self.record_dir.mkdir(parents=True, exist_ok=True)
        path = self.record_dir / f"{self._stamp}-{os.getpid()}-s{n}-{_slug(model)}.cpsession"
        info = SessionInfo(n, key, wire, model, provider, path, f"{os.getpid()}.{n}")
        info.slot = key if key not in self.sessions else f"{key}~{n}"
        tap = ProxyTap(
            "anthropic" if wire == "anthropic" else "openai", info, self.serve, self.window, self.hello
        )
        self.sessions[info.slot] = (info, tap)
        self._by_number[n] = (info, tap)
        self._families.setdefault(key, []).append(n)
        earlier_by_key = self._let_go_keys.pop(key, None)
        earlier = continues if fresh else earlier_by_key
        if branch is not None:
            tap.branch = branch
            info.branch = branch
            info.notes.append(branch_note(branch))
            log.info("proxy: session %s: %s", n, branch_note(branch))
        if earlier is not None:
            # The same conversation as a session whose state was let go: its calls go on in this one
            info.notes.append(
                f"continues session {earlier} ({os.getpid()}.{earlier}), whose state was let go when more "
                f"than {counted(self.max_kept, 'session')} {'was' if self.max_kept == 1 else 'were'} more recently active; its calls before are in its recording"
            )
            log.info("proxy: session %s continues session %s", n, earlier)
        if self.on_session is not None:
            try:
                self.on_session(info)
            except Exception:
                pass
        return info, tap

    # ---------------------------------------------------------------- shutdown

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every exchange handed over so far is journaled. False on timeout."""
        return self._idle.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Journal what is queued, then finish every recording (readable and verifiable after this)."""
        self.flush(timeout)
        self._q.put(None)
        self._thread.join(timeout)
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
