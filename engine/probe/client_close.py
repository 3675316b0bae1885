"""Closing a client: an error frame queued, then the connection cut once it is sent or CLOSE_GRACE
passes (`_fail`, `_expire_closing`), and a closed client dropped at once with everything it held (`_drop`:
its socket, buffers, snapshot and ring; with the last client, the ring's and the queue's references).

A mixin of the ProbeServer's queues (queues.ClientQueues), run by the I/O thread.
"""

from __future__ import annotations

import selectors
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from engine.probe.endpoint import close_quietly
from engine.recording.frames import encode_frame

if TYPE_CHECKING:
    from engine.probe.client_state import Client
    from engine.probe.ring import RingWriter

# How long an error frame may take to reach a client before its connection is cut anyway.
CLOSE_GRACE = 2.0


class ClientClose:
    """ClientQueues' closing and dropping of clients (the counts it keeps are ClientQueues')."""

    bracket: bool
    _sel: selectors.BaseSelector | None
    _clients: dict[int, Client]
    _ntracing: int
    _windows: int
    _nfollowers: int
    _held_rings: tuple[RingWriter, ...]
    _nrings: int
    _nclients: int
    _nlean: int
    _nquiet: int
    _nfold: int
    _pending: deque[Any]
    _loud: bool
    _ring: list[Any]
    _cap: int
    _released: int
    _head: int
    _enc_cache: dict[Any, Any]

    if TYPE_CHECKING:

        def _hello_frame(self, snapshot_len: int, turns: int, tap_errors: int = 0) -> dict[str, Any]: ...

        def _pump(self, c: Client) -> None: ...

        def _fold_changed(self) -> None: ...

    def _fail(self, c: Client, code: str, message: str, **extra: Any) -> None:
        """Queue an error frame, stop streaming and reading, close once it is sent (or CLOSE_GRACE passes)."""
        if c.closing_deadline is not None:
            return
        if c.hello_due is not None:
            # The hello first, as ever (a client compares the protocol versions itself from it), with
            # no snapshot: what it sent first was wrong.
            c.hello_due = None
            c.outbuf += encode_frame(self._hello_frame(0, *c.hello_counts))
        c.snap_src = None
        c.chunk = None
        c.outbuf += encode_frame({"k": "error", "code": code, "message": message, **extra})
        c.closing_deadline = time.monotonic() + CLOSE_GRACE
        c.inbuf = bytearray()
        # Stop reading it: whatever else it sends is ignored, and must not wake the loop.
        sel = self._sel
        if sel is not None:
            c.want_write = True
            try:
                sel.modify(c.sock, selectors.EVENT_WRITE, c)
            except (KeyError, ValueError, OSError):
                self._drop(c)
                return
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
        if c.tracing:
            c.tracing = False
            self._ntracing -= 1
        # Free everything at once (a closed client must not pin the journal or its buffers).
        c.snap_src = None
        c.chunk = None
        if c.skip_hold is not None:
            c.skip_hold = None
            self._windows -= 1
        c.skip_ids = frozenset()
        c.outbuf = bytearray()
        c.inbuf = bytearray()
        if c.follows:
            c.follows = False
            self._nfollowers -= 1
        if c.ring is not None:
            self._held_rings = tuple(r for r in self._held_rings if r is not c.ring)
            c.ring.close()
            c.ring = None
            self._nrings -= 1
        if not c.attached:
            return  # (never counted: it failed or left before its hello, see handshake._attach)
        self._nclients -= 1
        if c.lean:
            self._nlean -= 1
        if c.quiet:
            self._nquiet -= 1
        if c.fold:
            self._nfold -= 1
            self._fold_changed()
        self.bracket = self._nclients > self._nquiet
        if self._nclients == 0:
            # Nobody reads: release the event references the ring and the queue hold.
            self._pending.clear()
            self._loud = False  # (what made it True is gone with them)
            self._ring = [None] * self._cap
            self._released = self._head
            self._enc_cache.clear()
            # The last few snapshot chunks stay (a bounded cache, not per-client state): the next
            # client, or a connect/close churn, would otherwise encode the start of the journal again.
