"""Per-client state and queues: the shared ring, each client's cursor into it, encoding and sending.

`publish` (in `probe`) appends to `_pending`; the I/O thread moves events into the ring, and each
client reads the ring from its own cursor into a bounded output buffer. A client more than
`queue_limit` events behind loses the oldest and is told so with a `dropped` frame.
"""

from __future__ import annotations

import logging
import selectors
import socket
import time
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any

import msgpack

from engine.probe.endpoint import close_quietly
from engine.probe.redact import redact_event
from engine.recording.frames import HEADER, MAX_FRAME_BYTES, FrameError, encode_frame

log = logging.getLogger("contextpipe.probe")

# Encoded bytes kept ready per client beyond what the kernel socket buffer holds. Bounds memory for a
# client that stops reading; large enough that a reading client is never starved between wake-ups.
HIGH_WATER = 256 * 1024
# How long an error frame may take to reach a client before its connection is cut anyway.
CLOSE_GRACE = 2.0
_MISSING: Any = object()


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


class Client:
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
        # Events published while snapshot() ran may be in both; skip those by identity (see probe_handshake).
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

    def lose(self, n: int) -> None:
        """Count `n` events this client will never get; announced before its next event."""
        self.dropped_pending += n
        self.dropped_total += n


class ClientQueues:
    """The server's queues and clients. Everything but `publish`'s append runs on the I/O thread."""

    def __init__(self, queue_limit: int, redact: bool) -> None:
        self._cap = queue_limit
        self.redact = redact
        # publish() -> _pending (a deque: append and popleft are atomic under the GIL, so the agent
        # takes no lock and can never wait for the I/O thread) -> _ring (owned by the I/O thread alone).
        self._pending: deque[Any] = deque(maxlen=queue_limit)
        self._overflow = 0  # events _pending pushed out before the I/O thread got to them
        self._overflow_seen = 0
        self._ring: list[Any] = [None] * queue_limit
        self._head = 0  # ring sequence number of the next event
        self._nclients = 0  # written by the I/O thread only; read by publish(): see the race note there
        self._wake_pending = False
        self._clients: dict[int, Client] = {}
        self._sel: selectors.BaseSelector | None = None
        self._enc_cache: dict[int, bytes | None] = {}
        # Reused by the I/O thread only. msgpack.packb builds a Packer per call, which costs more than
        # packing a typical 1 KB event; the bytes are identical to engine.recording.frames.encode_frame.
        self._packer = msgpack.Packer(use_bin_type=True)

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

    def _absorb(self) -> None:
        """Move published events from _pending into the ring."""
        pending = self._pending
        ring = self._ring
        cap = self._cap
        head = self._head
        overflow = self._overflow
        if overflow != self._overflow_seen:
            # Those never reached the ring, so every attached client missed them: add them to each
            # client's next `dropped` notice.
            lost = overflow - self._overflow_seen
            self._overflow_seen = overflow
            for c in self._clients.values():
                c.lose(lost)
        try:
            while True:
                ring[head % cap] = pending.popleft()
                head += 1
        except IndexError:
            pass
        self._head = head

    def _pump(self, c: Client) -> None:
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

    def _append(self, c: Client, frame: bytes | None) -> None:
        if frame is None:
            c.lose(1)
            return
        if c.dropped_pending:
            # Sent just before the next event that does arrive, so the count is never left dangling.
            c.outbuf += encode_frame({"k": "dropped", "count": c.dropped_pending})
            c.dropped_pending = 0
        c.outbuf += frame
        c.sent_events += 1

    def _fill(self, c: Client) -> None:
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
            c.lose(base - c.cursor)
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

    def _fail(self, c: Client, code: str, message: str, **extra: Any) -> None:
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

    def _drop(self, c: Client) -> None:
        if self._clients.pop(c.fd, None) is None:
            return
        if self._sel is not None:
            try:
                self._sel.unregister(c.sock)
            except (KeyError, ValueError, OSError):
                pass
        close_quietly(c.sock)
        c.snapshot = None
        c.outbuf = bytearray()
        self._nclients -= 1
        if self._nclients == 0:
            # Nobody reads: release the event references the ring and the queue hold.
            self._pending.clear()
            self._ring = [None] * self._cap
