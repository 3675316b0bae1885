"""A client's own shared-memory ring (see ring): offering it one (`_offer_ring`, its memfd in a `ring`
frame once its snapshot is sent) and filling it (`_fill_ring`: the frames its socket would carry, copied
into the ring instead).

A mixin of the ProbeServer's queues (queues.ClientQueues), run by the I/O thread.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

from engine.probe.ring import RingWriter
from engine.recording.frames import encode_frame

if TYPE_CHECKING:
    from engine.probe.client_state import Client

log = logging.getLogger("contextpipe.probe")

# Clients given a shared-memory ring (see ring) at most: RING_SIZE each; the rest keep the socket.
MAX_RINGS = 4


class ClientRings:
    """ClientQueues' ring clients: the offer of a ring and its fill (the fill itself, `_fill_elided`, is
    elided_fill's; the counts and the socket's writability are ClientQueues')."""

    _head: int
    _more: bool
    _nrings: int
    _held_rings: tuple[RingWriter, ...]

    if TYPE_CHECKING:

        def _fill_elided(self, c: Client) -> None: ...

        def _want_write(self, c: Client, on: bool) -> None: ...

    def _fill_ring(self, c: Client, ring: RingWriter) -> None:
        """The live frames of a client that reads them from a ring (see ring): the same frames as on its
        socket, copied into the ring instead of its socket buffer (which keeps what it asked for: fetch
        answers, pongs), up to PUMP_BUDGET bytes a pass (the loop comes back for more). Nothing waits:
        a ring takes every write, and a reader that fell behind finds out for itself."""
        sock_buf = c.outbuf
        live = c.outbuf = bytearray()
        written = 0
        try:
            while True:
                cursor = c.cursor
                self._fill_elided(c)
                if live:
                    ring.write(live)
                    written += len(live)
                    del live[:]
                if c.cursor == cursor or c.cursor >= self._head:
                    break
                if written >= ring.size // 4:  # a reader that looks less often than this would lose them
                    self._more = True
                    break
        finally:
            c.outbuf = sock_buf

    def _offer_ring(self, c: Client) -> None:
        """Hand a client that asked for a ring (see ring) its memfd, in a `ring` frame on the socket, once
        nothing else waits to go before it there (its snapshot sent): live frames go to the ring from
        then on. If none can be made (no memfd, MAX_RINGS in use), it keeps the socket."""
        c.ring_asked = False
        if self._nrings >= MAX_RINGS:
            return
        try:
            ring = RingWriter()
        except Exception as exc:
            log.warning("probe could not make a ring for a client, it keeps the socket: %s", exc)
            return
        # Only a fold client is told that the agent marks what it holds back (see ring, "Held events"):
        # the marks are stored for the rings in _held_rings, one store a held event.
        frame = encode_frame({"k": "ring", "size": ring.size, "held": c.fold})
        try:
            n = socket.send_fds(c.sock, [frame], [ring.fd])  # type: ignore[list-item]
        except (BlockingIOError, InterruptedError):
            ring.close()
            # Its socket buffer is full (the snapshot just sent, not yet read): again once the socket
            # takes more (the pump on writability ends here). Left to "a later pass", the offer waited
            # for one that a paced agent never causes: its thread sent the client's turns on the socket
            # itself (nothing owed, no ring), each a send() (in bench_probe, one reader in three attached
            # in turn to one agent went without its ring for its whole block).
            c.ring_asked = True
            self._want_write(c, True)
            return
        except OSError:
            ring.close()
            return
        ring.release_fd()  # the client has its own descriptor now; the mapping stays
        c.ring = ring
        self._nrings += 1
        if c.fold:
            self._held_rings = (*self._held_rings, ring)
        if n < len(frame):  # the descriptor went with the first byte; the rest of the frame follows
            c.outbuf += frame[n:]
            self._want_write(c, True)
