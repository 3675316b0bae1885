"""The proxy recorder's sessions (`RecorderSessions`, the base of engine.capture.proxy.recording.Recorder):
its state, each session made (`_session`) or continued, and the limits that keep a proxy serving many
agents bounded: sessions served live (MAX_SERVED), recording files held open (MAX_OPEN_RECORDINGS,
IDLE_PARK_S: parked), sessions whose engine state is kept (MAX_KEPT_SESSIONS: let go), the largest
request recorded (MAX_RECORD_BYTES). Background Responses calls build on it (background_calls), and
Recorder on them.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.capture.lineage import Lineage, branch_note
from engine.capture.proxy.exchange import Exchange
from engine.capture.proxy.proxy_tap import ProxyTap, SessionInfo
from engine.importers._common import guess_provider
from engine.importers.ingest import DEFAULT_WINDOW
from engine.wording import counted

if TYPE_CHECKING:
    from engine.capture.proxy.background_calls import _Background

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


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:40] or "model"


class RecorderSessions:
    """The recorder's sessions (see Recorder): made, served, parked and let go, least recently active first."""

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
        # Sessions with failed attempts held for a retry (engine/capture/proxy/retries.py), by number
        self._holding: dict[int, tuple[SessionInfo, ProxyTap]] = {}
        self._q: queue.Queue[Exchange | None] = queue.Queue()
        self._stamp = time.strftime("%Y%m%d-%H%M%S")
        self._idle = threading.Event()
        self._idle.set()
        self._pending = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="contextpipe-proxy-recorder", daemon=True)
        self._thread.start()

    if TYPE_CHECKING:

        def _run(self) -> None:
            """The worker's loop (Recorder._run), started last in __init__."""

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
            if id(tap) in waiting or tap.held:  # (an attempt held for a retry: journaled when it ends)
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
        tap.pipe, tap.feeder, tap.actual, tap.fed, tap.fed_at = None, None, None, [], []
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
