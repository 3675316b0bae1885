"""The probe's I/O thread: one `selectors` loop that accepts, reads, moves events and sends.

Two modes keep the agent's cost per publish at a deque append. Idle: sleep until a publish writes the
one wake-up byte. Busy (events flowing): the wake flag stays set, so publishes write nothing, and the
loop polls every BUSY_TICK, sending whatever accumulated in one go. QUIET_TICKS quiet ticks return it
to idle.
"""

from __future__ import annotations

import logging
import selectors
import socket
import time

from engine.probe.handshake import Handshake
from engine.probe.queues import Client

log = logging.getLogger("contextpipe.probe")

# While events flow, the I/O thread wakes this often to send what accumulated (instead of once per
# publish): the agent pays no syscall per event, and each wake-up costs the agent thread a GIL
# hand-off, so fewer is cheaper. 50 ms halves the probe's CPU against 10 ms (measured with
# benchmarks/bench_probe.py --engine) and is still far below what a person watching turns notices.
BUSY_TICK = 0.05
# Quiet ticks before going back to sleep until a publish wakes us (10 x 50 ms).
QUIET_TICKS = 10
# How long close() keeps sending already-published events to clients that are reading.
FLUSH_ON_CLOSE = 0.25


class IOLoop(Handshake):
    # Set by ProbeServer.__init__ / start() / close().
    _stopping: bool
    _wake_r: socket.socket | None

    def _run(self) -> None:
        sel = self._sel
        assert sel is not None
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
                        c: Client = key.data
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
