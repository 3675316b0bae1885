"""The live probe: a read-only Unix-socket stream of the journal, embedded in the agent.

The agent calls `publish(event)` for every journal event. Nothing the probe does may slow or break the
agent, so the work is split lopsidedly:

* `publish` appends a reference to a bounded deque (atomic under the GIL: no lock, so the agent can
  never wait on the probe thread) and, only when the probe thread is asleep, writes one wake-up byte
  to a socketpair. No encoding, no client socket I/O, nothing proportional to the number of clients,
  and no exception escapes it. With no client attached it returns after one attribute read: a client
  that connects later gets those events from `snapshot()`.
* One daemon thread does all the rest with `selectors`: accept (checking the peer's uid with
  SO_PEERCRED), move events from the deque into a ring, encode (and redact), send, and read the few
  frames a client may send. While events flow it wakes every BUSY_TICK and sends what accumulated in
  one go, instead of once per event.
* The ring is shared by all clients; each client keeps a cursor into it. A client more than
  `queue_limit` events behind has lost the oldest: its cursor jumps forward and it gets
  `{"k": "dropped", "count": n}` before its next event, so it can reconnect for a fresh snapshot.
  This is the design's "bounded per-client queue" with one append per publish instead of one per
  client; memory stays at `queue_limit` references plus about HIGH_WATER encoded bytes per client, no
  matter how slow a client is (the kernel socket buffer holds the rest).

Protocol (version PROTOCOL_VERSION), frames from `engine.frames` (u32 length, u32 crc32, msgpack map
with a kind "k"). Server to client: `hello` (protocol, pid, argv, snapshot = number of snapshot events
that follow, turns, redacted, queue_limit, plus the agent's model/provider/engine_version/...), then
the snapshot events, then live events, with `dropped` and `pong` frames interleaved, and `error`
(code, message) just before the server closes a connection. Client to server, optional:
`{"k": "hello", "protocol": N}` and `{"k": "ping"}`. Any other kind ("unknown_kind": the stream is
read-only), a corrupt frame ("bad_frame"), a frame above CLIENT_FRAME_LIMIT ("frame_too_large") or a
different protocol version ("protocol_mismatch", naming both) gets an error frame and that connection
is closed; the agent and other clients carry on. A peer with another uid gets "permission_denied".
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import secrets
import selectors
import socket
import stat
import struct
import sys
import threading
import time
import weakref
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from engine.frames import HEADER, MAX_FRAME_BYTES, FrameError, decode_frames, encode_frame
from engine.runtime_dir import (
    MAX_SOCKET_PATH,
    SERVE_ENV,
    PermissionDenied,
    ProbeError,
    ensure_runtime_dir,
    socket_path,
)

__all__ = [
    "CLIENT_FRAME_LIMIT",
    "PROTOCOL_VERSION",
    "REDACT_ENV",
    "SERVE_ENV",
    "ClientStats",
    "ProbeServer",
    "redact_event",
    "redact_requested",
    "serve_requested",
]

log = logging.getLogger("contextpipe.probe")

PROTOCOL_VERSION = 1
REDACT_ENV = "CONTEXTPIPE_REDACT"
# Clients only ever send tiny control frames; anything bigger is garbage or hostile.
CLIENT_FRAME_LIMIT = 64 * 1024
# Encoded bytes kept ready per client beyond what the kernel socket buffer holds. Bounds memory for a
# client that stops reading; large enough that a reading client is never starved between wake-ups.
HIGH_WATER = 256 * 1024
# While events flow, the I/O thread wakes this often to send what accumulated (instead of once per
# publish): the agent pays no syscall per event, and each wake-up costs the agent thread a GIL
# hand-off, so fewer is cheaper; 10 ms is still below one 60 Hz frame of inspector latency.
BUSY_TICK = 0.01
# Quiet ticks before going back to sleep until a publish wakes us (10 x 10 ms).
QUIET_TICKS = 10
# How long an error frame may take to reach a client before its connection is cut anyway.
CLOSE_GRACE = 2.0
# How long close() keeps sending already-published events to clients that are reading.
FLUSH_ON_CLOSE = 0.25
REDACT_KEYS = frozenset({"content", "text"})
_MISSING: Any = object()
_PONG = encode_frame({"k": "pong"})
_UCRED = struct.Struct("3i")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
_TRUE = frozenset({"1", "true", "yes", "on"})


def serve_requested(serve: bool | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """The opt-in rule: an explicit `serve` argument wins, else CONTEXTPIPE_SERVE=1 (or true/yes/on)."""
    if serve is not None:
        return serve
    env = os.environ if environ is None else environ
    return env.get(SERVE_ENV, "").strip().lower() in _TRUE


def redact_requested(redact: bool | None = None, environ: Mapping[str, str] | None = None) -> bool:
    if redact is not None:
        return redact
    env = os.environ if environ is None else environ
    return env.get(REDACT_ENV, "").strip().lower() in _TRUE


def _digest(value: str | bytes) -> dict[str, Any]:
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return {"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}


def _redact_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (_digest(v) if k in REDACT_KEYS and isinstance(v, str | bytes) else _redact_value(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    return value


def redact_event(event: dict[str, Any]) -> dict[str, Any]:
    """A copy of `event` with prompt text replaced by `{"sha256", "size"}` (the original is untouched).

    Blob data is replaced (its "h" kept, so the inspector can still match blobs to sections), and so is
    every str/bytes value under a key named "content" or "text", at any depth (message content, content
    blocks, tool output). Sizes are in bytes of UTF-8.
    """
    out = _redact_value(event)
    if event.get("k") == "blob" and isinstance(event.get("data"), str | bytes):
        out["data"] = _digest(event["data"])
    return out  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ClientStats:
    """One attached client, as seen by the server (for tests, benchmarks and diagnostics)."""

    fd: int
    uid: int
    queued: int  # live events published but not yet encoded for this client (<= queue_limit)
    buffered_bytes: int  # encoded, waiting for the socket (<= HIGH_WATER + one batch)
    dropped: int  # events this client lost because it fell behind
    sent_events: int
    snapshot_pending: int
    closing: bool


class _Client:
    __slots__ = (
        "sock",
        "fd",
        "uid",
        "cursor",
        "snapshot",
        "snap_index",
        "skip_ids",
        "skip_until",
        "skip_hold",
        "outbuf",
        "inbuf",
        "dropped_pending",
        "dropped_total",
        "sent_events",
        "want_write",
        "closing_deadline",
    )

    def __init__(self, sock: socket.socket, uid: int) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.uid = uid
        self.cursor = 0  # next ring sequence number to send
        self.snapshot: list[Any] | None = None
        self.snap_index = 0
        # Events published while snapshot() ran may be in both; skip those by identity (see _register).
        self.skip_ids: frozenset[int] = frozenset()
        self.skip_until = 0
        # Keeps the snapshot's objects alive while skip_ids is in use, so their ids cannot be reused.
        self.skip_hold: list[Any] | None = None
        self.outbuf = bytearray()
        self.inbuf = bytearray()
        self.dropped_pending = 0
        self.dropped_total = 0
        self.sent_events = 0
        self.want_write = False
        self.closing_deadline: float | None = None


class ProbeServer:
    """Serve the journal of this process over `<runtime_dir>/<pid>.sock`. See the module docstring."""

    def __init__(
        self,
        hello: dict[str, Any],
        snapshot: Callable[[], list[dict[str, Any]]],
        *,
        runtime_dir: Path | None = None,
        queue_limit: int = 10_000,
        redact: bool = False,
        pid: int | None = None,
    ) -> None:
        if queue_limit < 1:
            raise ValueError(f"queue_limit must be at least 1, got {queue_limit}")
        self._hello = dict(hello)
        self._snapshot = snapshot
        self._runtime_dir = runtime_dir
        self._cap = queue_limit
        self.redact = redact
        self.pid = os.getpid() if pid is None else pid
        self.path: Path = Path()  # set by start()
        # Only peers with this uid are served; an attribute so tests can simulate a foreign peer.
        self._allowed_uid = os.getuid()

        # publish() -> _pending (a deque: append and popleft are atomic under the GIL, so the agent
        # takes no lock and can never wait for the I/O thread) -> _ring (owned by the I/O thread alone).
        self._pending: deque[Any] = deque(maxlen=queue_limit)
        self._overflow = 0  # events _pending pushed out before the I/O thread got to them
        self._overflow_seen = 0
        self._ring: list[Any] = [None] * queue_limit
        self._head = 0  # ring sequence number of the next event
        self._nclients = 0  # written by the I/O thread only; read by publish(): see the race note there
        self._wake_pending = False
        self.publish_errors = 0

        self._clients: dict[int, _Client] = {}
        self._sel: selectors.BaseSelector | None = None
        self._listener: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
        self._owner_pid = os.getpid()
        self._inode: tuple[int, int] | None = None
        self._enc_cache: dict[int, bytes | None] = {}
        # Reused by the I/O thread only. msgpack.packb builds a Packer per call, which costs more than
        # packing a typical 1 KB event; the bytes are identical to engine.frames.encode_frame.
        self._packer = msgpack.Packer(use_bin_type=True)
        try:
            # Fail here, in the agent's startup, rather than on every connect if hello can't be sent.
            encode_frame(self._hello_frame(0, 0))
        except Exception as exc:
            raise ValueError(f"probe hello is not msgpack-encodable: {exc}") from exc

    # ---------------------------------------------------------------- agent-facing API

    def start(self) -> None:
        """Create the socket and start the I/O thread. Raises ProbeError/PermissionDenied on failure."""
        if self._thread is not None:
            return
        d = ensure_runtime_dir(self._runtime_dir)
        path = socket_path(self.pid, d)
        tmp = d / f".{self.pid}.{secrets.token_hex(3)}"
        for p in (path, tmp):
            if len(os.fsencode(p)) > MAX_SOCKET_PATH:
                raise ProbeError(
                    f"probe socket path {p} is longer than {MAX_SOCKET_PATH} bytes (a Unix socket limit); "
                    "use a shorter runtime directory (XDG_RUNTIME_DIR)"
                )
        self._remove_stale(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # Bind under a temporary name and rename into place once listening: a socket at <pid>.sock
            # then always accepts, so "connection refused" there reliably means stale.
            listener.bind(os.fsdecode(tmp))
            os.chmod(tmp, 0o600)
            listener.listen(64)
            os.rename(tmp, path)
        except BaseException:
            listener.close()
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        st = os.stat(path)
        self._inode = (st.st_dev, st.st_ino)
        listener.setblocking(False)
        self._listener = listener
        self.path = path
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(listener, selectors.EVENT_READ, "listen")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._run, name=f"contextpipe-probe-{self.pid}", daemon=True)
        self._thread.start()
        atexit.register(self.close)
        _LIVE_SERVERS.add(self)

    def publish(self, event: dict[str, Any], frame: bytes | None = None) -> None:
        """Hand one journal event to attached clients. O(1), never blocks on a client, never raises.

        `frame`, if given, must be `engine.frames.encode_frame(event)`: an agent that records already
        encodes every event, and msgpack encoding is most of the probe's cost, so it can pass the bytes
        on. Ignored when redacting (the redacted form has to be encoded anyway).
        """
        try:
            # Race note: a client is counted in _nclients *before* its snapshot() is taken, and the
            # agent journals an event before publishing it. So if we read 0 here while a client is
            # registering, the event is already in the journal that the snapshot will copy.
            if not self._nclients:
                return
            pending = self._pending
            if len(pending) >= self._cap:
                # The I/O thread has been starved of the GIL for a whole queue's worth of events; the
                # append below pushes the oldest out. (Racing with a popleft this may over-count by one.)
                self._overflow += 1
            pending.append(event if frame is None or self.redact else frame)
            if not self._wake_pending:
                self._wake_pending = True
                w = self._wake_w
                if w is not None:
                    try:
                        w.send(b"\0")
                    except OSError:
                        pass  # buffer full means a wake-up is already pending; closed means shutting down
        except Exception:
            self.publish_errors += 1

    def close(self) -> None:
        """Stop serving: flush briefly to readers, disconnect clients, remove the socket. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            atexit.unregister(self.close)
        except Exception:
            pass
        self._stopping = True
        self._wake()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=FLUSH_ON_CLOSE + 2.0)
        self._teardown()

    def __enter__(self) -> ProbeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client_count(self) -> int:
        return self._nclients

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stats(self) -> list[ClientStats]:
        head = self._head
        backlog = len(self._pending)
        out = []
        for c in list(self._clients.values()):
            snap = c.snapshot
            out.append(
                ClientStats(
                    fd=c.fd,
                    uid=c.uid,
                    queued=min(head - c.cursor + backlog, self._cap),
                    buffered_bytes=len(c.outbuf),
                    dropped=c.dropped_total + max(0, head - self._cap - c.cursor),
                    sent_events=c.sent_events,
                    snapshot_pending=0 if snap is None else len(snap) - c.snap_index,
                    closing=c.closing_deadline is not None,
                )
            )
        return out

    # ---------------------------------------------------------------- setup / teardown helpers

    def _remove_stale(self, path: Path) -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise ProbeError(f"{path} exists and is not a socket; remove it to let the probe start")
        if st.st_uid != os.getuid():
            raise PermissionDenied(f"probe socket {path} is owned by uid {st.st_uid}; refusing to replace it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(1.0)
        try:
            probe.connect(os.fsdecode(path))
        except (ConnectionRefusedError, FileNotFoundError):
            # Nobody listens: a previous process with our pid died without cleaning up.
            log.info("removing stale probe socket %s", path)
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            return
        except OSError:
            pass  # unknown state: fall through and refuse rather than steal a live socket
        finally:
            probe.close()
        raise ProbeError(
            f"a probe is already serving at {path} (is a second ProbeServer running in pid {self.pid}?)"
        )

    def _disown_after_fork(self) -> None:
        """In a forked child: the I/O thread did not survive the fork, and the socket is the parent's.
        Make publish() a no-op and close() leave the parent's socket alone."""
        self._nclients = 0
        self._closed = True
        self._wake_w = None
        self._pending = deque(maxlen=1)
        self._clients = {}

    def _wake(self) -> None:
        w = self._wake_w
        if w is not None:
            try:
                w.send(b"\0")
            except OSError:
                pass

    def _teardown(self) -> None:
        for c in list(self._clients.values()):
            self._drop(c)
        # Unlink before closing the listener, so nobody sees a refusing socket at our path, and only if
        # the file is still the one we created, in the process that created it (a forked child inherits
        # this object and its atexit hook but must not remove its parent's socket).
        if self._inode is not None and os.getpid() == self._owner_pid:
            try:
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) == self._inode:
                    os.unlink(self.path)
            except OSError:
                pass
        for s in (self._listener, self._wake_r, self._wake_w):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass
        self._listener = None
        if self._sel is not None:
            try:
                self._sel.close()
            except Exception:
                pass
            self._sel = None

    # ---------------------------------------------------------------- I/O thread

    def _run(self) -> None:
        sel = self._sel
        assert sel is not None
        # Two modes keep the agent's cost per publish at a ring append. Idle: sleep until a publish
        # writes the one wake-up byte. Busy (events flowing): the wake flag stays set, so publishes
        # write nothing, and we poll every BUSY_TICK, sending whatever accumulated in one go. A quiet
        # tick returns us to idle.
        busy = False
        quiet = 0
        seen = self._head
        while not self._stopping:
            try:
                timeout = self._next_deadline()
                if busy:
                    timeout = BUSY_TICK if timeout is None else min(timeout, BUSY_TICK)
                ready = sel.select(timeout)
                self._enc_cache.clear()
                self._absorb()
                for key, mask in ready:
                    if key.data == "listen":
                        self._accept()
                    elif key.data == "wake":
                        self._drain_wake()
                    else:
                        c: _Client = key.data
                        # Identity, not fd: a client dropped earlier in this batch may have had its fd
                        # reused by one accepted since.
                        if self._clients.get(c.fd) is not c:
                            continue
                        if mask & selectors.EVENT_READ:
                            self._on_readable(c)
                        if mask & selectors.EVENT_WRITE and self._clients.get(c.fd) is c:
                            self._pump(c)  # leaves WRITE interest registered only if still blocked
                # New events may be waiting for clients that were not blocked: pump them all.
                for c in list(self._clients.values()):
                    if not c.want_write:
                        self._pump(c)
                self._expire_closing()
                # Activity is any ring growth (here or in _register) or anything still queued.
                if self._head != seen or self._pending:
                    seen = self._head
                    quiet = 0
                    if not busy:
                        busy = True
                        self._wake_pending = True
                elif busy and quiet < QUIET_TICKS:
                    # An agent's events come in bursts a few milliseconds apart within a turn: keep
                    # ticking a while rather than pay a wake-up (a syscall and a thread switch) per burst.
                    quiet += 1
                else:
                    # About to sleep with no timeout, so the next publish must find the flag clear.
                    # Done on every quiet pass, not only when leaving busy mode: a publisher can set the
                    # flag (and send its byte) long after its event was taken, if it lost the GIL in
                    # between, and a flag left set then would swallow every later wake-up.
                    # Order: drain, clear, re-check. A publish after the re-check sees the flag clear
                    # and wakes us; one before it is caught by the re-check.
                    busy = False
                    quiet = 0
                    self._drain_wake()
                    self._wake_pending = False
                    if self._pending:
                        busy = True
                        self._wake_pending = True
            except Exception:
                # A bug here must not kill the probe thread silently and leave clients hanging forever.
                log.exception("probe I/O loop error")
                time.sleep(0.01)
        self._flush_on_close()

    def _absorb(self) -> int:
        """Move published events from _pending into the ring; returns how many."""
        pending = self._pending
        ring = self._ring
        cap = self._cap
        head = self._head
        start = head
        overflow = self._overflow
        if overflow != self._overflow_seen:
            # Those never reached the ring, so every attached client missed them: add them to each
            # client's next `dropped` notice.
            lost = overflow - self._overflow_seen
            self._overflow_seen = overflow
            for c in self._clients.values():
                c.dropped_pending += lost
                c.dropped_total += lost
        try:
            while True:
                ring[head % cap] = pending.popleft()
                head += 1
        except IndexError:
            pass
        self._head = head
        return head - start

    def _next_deadline(self) -> float | None:
        deadlines = [c.closing_deadline for c in self._clients.values() if c.closing_deadline is not None]
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - time.monotonic())

    def _drain_wake(self) -> None:
        r = self._wake_r
        assert r is not None
        try:
            while r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _accept(self) -> None:
        listener = self._listener
        assert listener is not None
        for _ in range(64):
            try:
                sock, _addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # EMFILE and friends: log and back off instead of spinning on a readable listener.
                log.warning("probe accept failed: %s", exc)
                time.sleep(0.05)
                return
            sock.setblocking(False)
            try:
                _pid, uid, _gid = _UCRED.unpack(
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
                )
            except OSError:
                uid = -1
            if uid != self._allowed_uid:
                self._refuse(sock, uid)
                continue
            self._register(sock, uid)

    def _refuse(self, sock: socket.socket, uid: int) -> None:
        frame = encode_frame(
            {
                "k": "error",
                "code": "permission_denied",
                "message": f"uid {uid} may not read this agent's probe (it serves uid {self._allowed_uid} only)",
            }
        )
        try:
            sock.send(frame)  # fresh socket, empty buffer: a small frame always fits
        except OSError:
            pass
        _close_quietly(sock)

    def _register(self, sock: socket.socket, uid: int) -> None:
        c = _Client(sock, uid)
        # Events already published go to the clients attached before this one; this one starts at the
        # ring's head and gets the earlier ones from the snapshot taken below.
        self._absorb()
        c.cursor = self._head
        self._nclients += 1
        self._clients[c.fd] = c
        assert self._sel is not None
        self._sel.register(sock, selectors.EVENT_READ, c)
        try:
            snap = list(self._snapshot())
        except Exception as exc:
            log.exception("probe snapshot() failed")
            c.outbuf += encode_frame(self._hello_frame(0, 0))
            self._fail(
                c, "internal", f"the agent could not produce its journal snapshot: {type(exc).__name__}"
            )
            return
        self._absorb()
        end = self._head
        if end > c.cursor:
            # Events published between registration and the copy may be in both; the engine publishes
            # the very object it journals, so identity finds the duplicates (anything else is
            # delivered twice, which is harmless: blobs are keyed by hash, turns by number).
            c.skip_ids = frozenset(id(e) for e in snap)
            c.skip_until = end
            c.skip_hold = snap
        turns = sum(1 for e in snap if isinstance(e, dict) and e.get("k") == "turn")
        c.outbuf += encode_frame(self._hello_frame(len(snap), turns))
        c.snapshot = snap
        self._pump(c)

    def _hello_frame(self, snapshot_len: int, turns: int) -> dict[str, Any]:
        frame = dict(self._hello)
        frame.update(
            {
                "k": "hello",
                "protocol": PROTOCOL_VERSION,
                "pid": self.pid,
                # Arguments that are not valid UTF-8 (surrogate-escaped by Python) would fail to encode.
                "argv": [
                    a.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for a in sys.orig_argv
                ],
                "snapshot": snapshot_len,
                "turns": turns,
                "redacted": self.redact,
                "queue_limit": self._cap,
            }
        )
        return frame

    def _on_readable(self, c: _Client) -> None:
        try:
            data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(c)
            return
        if not data:
            self._drop(c)  # the client closed (or half-closed) its end: it is done
            return
        if c.closing_deadline is not None:
            return  # already failed: discard whatever else it sends
        c.inbuf += data
        try:
            frames, used = decode_frames(bytes(c.inbuf), limit=CLIENT_FRAME_LIMIT)
        except FrameError as exc:
            code = "frame_too_large" if "exceeds the limit" in str(exc) else "bad_frame"
            self._fail(c, code, f"malformed frame from client: {exc}")
            return
        del c.inbuf[:used]
        for f in frames:
            kind = f.get("k")
            if kind == "hello":
                theirs = f.get("protocol")
                if theirs != PROTOCOL_VERSION:
                    self._fail(
                        c,
                        "protocol_mismatch",
                        f"protocol mismatch: the agent speaks probe protocol {PROTOCOL_VERSION}, "
                        f"the client speaks {theirs!r}",
                        protocol=PROTOCOL_VERSION,
                        client_protocol=theirs,
                    )
                    return
            elif kind == "ping":
                # Best effort: a client that pings without reading must not grow our buffer.
                if len(c.outbuf) < HIGH_WATER:
                    c.outbuf += _PONG
            else:
                self._fail(c, "unknown_kind", f"unknown frame kind {kind!r}: the probe stream is read-only")
                return
        self._pump(c)

    def _fail(self, c: _Client, code: str, message: str, **extra: Any) -> None:
        """Queue an error frame, stop streaming, and close once it is sent (or CLOSE_GRACE passes)."""
        if c.closing_deadline is not None:
            return
        c.snapshot = None
        c.outbuf += encode_frame({"k": "error", "code": code, "message": message, **extra})
        c.closing_deadline = time.monotonic() + CLOSE_GRACE
        c.inbuf.clear()
        self._pump(c)

    def _expire_closing(self) -> None:
        now = time.monotonic()
        for c in list(self._clients.values()):
            if c.closing_deadline is not None and now >= c.closing_deadline:
                self._drop(c)

    def _pump(self, c: _Client) -> None:
        """Encode what this client may have next and send as much as the socket takes."""
        while True:
            if c.closing_deadline is None:
                self._fill(c)
            if not c.outbuf:
                break
            try:
                n = c.sock.send(c.outbuf)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError:
                self._drop(c)  # EPIPE/ECONNRESET: the client went away
                return
            if n:
                del c.outbuf[:n]
            if c.outbuf:
                # The kernel buffer is full: wait for writability instead of spinning.
                if not c.want_write:
                    c.want_write = True
                    assert self._sel is not None
                    self._sel.modify(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
                return
        if c.want_write:
            c.want_write = False
            assert self._sel is not None
            self._sel.modify(c.sock, selectors.EVENT_READ, c)
        if c.closing_deadline is not None:
            self._drop(c)  # error frame delivered

    def _encode_event(self, ev: Any) -> bytes | None:
        if type(ev) is bytes:
            return ev  # pre-encoded by the caller (see publish)
        if not isinstance(ev, dict):
            return None
        try:
            payload = self._packer.pack(redact_event(ev) if self.redact else ev)
            if len(payload) > MAX_FRAME_BYTES:
                raise FrameError(f"frame of {len(payload)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
            return HEADER.pack(len(payload), zlib.crc32(payload)) + payload
        except Exception as exc:
            # An event the engine could not have meant to publish (not msgpack-able, or above the frame
            # limit). Count it as dropped for the client rather than kill the stream.
            log.warning("probe could not encode a %r event: %s", ev.get("k"), exc)
            return None

    def _append(self, c: _Client, frame: bytes | None) -> None:
        if frame is None:
            c.dropped_pending += 1
            c.dropped_total += 1
            return
        if c.dropped_pending:
            # Sent just before the next event that does arrive, so the count is never left dangling.
            c.outbuf += encode_frame({"k": "dropped", "count": c.dropped_pending})
            c.dropped_pending = 0
        c.outbuf += frame
        c.sent_events += 1

    def _fill(self, c: _Client) -> None:
        snap = c.snapshot
        if snap is not None:
            while len(c.outbuf) < HIGH_WATER and c.snap_index < len(snap):
                ev = snap[c.snap_index]
                c.snap_index += 1
                self._append(c, self._encode_event(ev))
            if c.snap_index < len(snap):
                return
            c.snapshot = None
        cap = self._cap
        ring = self._ring
        head = self._head
        base = head - cap
        if c.cursor < base:
            lost = base - c.cursor
            c.dropped_pending += lost
            c.dropped_total += lost
            c.cursor = base
        # With several clients each event is encoded once per I/O-loop pass (keyed by sequence number).
        share = len(self._clients) > 1
        cache = self._enc_cache
        outbuf = c.outbuf
        seq = c.cursor
        while seq < head and len(outbuf) < HIGH_WATER:
            ev = ring[seq % cap]
            seq += 1
            if seq <= c.skip_until and id(ev) in c.skip_ids:
                continue
            if share:
                frame = cache.get(seq, _MISSING)
                if frame is _MISSING:
                    frame = cache[seq] = self._encode_event(ev)
            else:
                frame = self._encode_event(ev)
            self._append(c, frame)
        c.cursor = seq
        if seq >= c.skip_until and c.skip_hold is not None:
            c.skip_ids = frozenset()
            c.skip_hold = None

    def _flush_on_close(self) -> None:
        """Give reading clients a short chance to receive what was already published, then stop."""
        deadline = time.monotonic() + FLUSH_ON_CLOSE
        sel = self._sel
        if sel is None:
            return
        # Stop accepting and stop listening for wake-ups: both would only make select() spin here.
        for s in (self._listener, self._wake_r):
            if s is not None:
                try:
                    sel.unregister(s)
                except (KeyError, ValueError):
                    pass
        while time.monotonic() < deadline:
            self._absorb()
            pending = False
            for c in list(self._clients.values()):
                if c.closing_deadline is None:
                    self._pump(c)
                    if self._clients.get(c.fd) is c and c.outbuf:
                        pending = True
            if not pending:
                return
            try:
                sel.select(max(0.0, deadline - time.monotonic()))
            except OSError:
                return

    def _drop(self, c: _Client) -> None:
        if self._clients.pop(c.fd, None) is None:
            return
        if self._sel is not None:
            try:
                self._sel.unregister(c.sock)
            except (KeyError, ValueError, OSError):
                pass
        _close_quietly(c.sock)
        c.snapshot = None
        c.outbuf = bytearray()
        self._nclients -= 1
        if self._nclients == 0:
            # Nobody reads: release the event references the ring and the queue hold.
            self._pending.clear()
            self._ring = [None] * self._cap


_LIVE_SERVERS: weakref.WeakSet[ProbeServer] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for server in list(_LIVE_SERVERS):
        server._disown_after_fork()
    _LIVE_SERVERS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_quietly(sock: socket.socket) -> None:
    # Read what the peer already sent first: closing a Unix socket with unread input makes the peer's
    # next read fail with ECONNRESET, which could hide the error frame we just sent it.
    try:
        sock.setblocking(False)
        for _ in range(16):  # bounded: a client that keeps sending is cut off anyway
            if not sock.recv(65536):
                break
    except OSError:
        pass  # EAGAIN (nothing left) or the peer is already gone
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
