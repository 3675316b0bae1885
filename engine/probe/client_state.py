"""One attached client as the probe's I/O thread keeps it (`Client`: its cursors into the ring and the
snapshot, its output and input buffers, what its hello asked for), what the server reports of it
(`ClientStats`), and the bounds every client is held to: HIGH_WATER for what is encoded for it
(BATCH_EVENTS for how far one batch frame takes it past that), INPUT_BURST / INPUT_RATE for what it
may send. The queues that fill it are `queues.ClientQueues`.
"""

from __future__ import annotations

import socket
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.probe.ring import RingWriter

if TYPE_CHECKING:
    from engine.probe.snapshot_chunks import SnapChunk

# Encoded bytes kept ready per client beyond what the kernel socket buffer holds. Bounds memory for a
# client that stops reading; large enough that a reading client is never starved between wake-ups.
HIGH_WATER = 256 * 1024
# Live events for a lean client go out in `batch` frames of at most this many events (bounds how far
# one frame takes a client's buffer beyond HIGH_WATER).
BATCH_EVENTS = 128
# A client may send a hello, pings and, on the lean stream, fetches: every recv() and every frame costs a
# token from a bucket of INPUT_BURST refilled at INPUT_RATE per second. One that runs dry (a ping flood,
# a byte-at-a-time trickle) is sent "rate_limited" and closed, so no client can make the I/O thread busy.
# The inspector following a fast agent is chatty: its display and folds fetch traces and journal ranges,
# one frame each, ~10 a second on average behind the demo agent (~40 turns a second), in bursts; at 16 a
# second it ran dry after ~400 turns and was cut off mid-session (its save then failed). Floods of
# thousands a second are cut off as before; the CPU budget bounds what the rest costs the agent.
INPUT_BURST = 64.0
INPUT_RATE = 64.0


@dataclass(frozen=True)
class ClientStats:
    """One attached client, as seen by the server (for tests, benchmarks and diagnostics)."""

    fd: int
    uid: int
    queued: int  # live events published but not yet encoded for this client (<= queue_limit)
    buffered_bytes: int  # encoded, waiting for the socket (<= HIGH_WATER + one frame)
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
        "snap_src",
        "snap_index",
        "snap_end",
        "snap_built",
        "chunk",
        "skip_ids",
        "skip_hold",
        "outbuf",
        "inbuf",
        "dropped_pending",
        "dropped_total",
        "sent_events",
        "want_write",
        "closing_deadline",
        "in_tokens",
        "in_at",
        "lean",
        "fetch",
        "elide",
        "jpos",
        "jdone",
        "jclose",
        "owed",
        "frames",
        "quiet",
        "ring",
        "ring_asked",
        "ring_unchecked",
        "hello_due",
        "hello_counts",
        "tail",
        "fold",
        "protocol",
        "attached",
        "tracing",
        "follows",
    )

    def __init__(self, sock: socket.socket, uid: int) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.uid = uid
        self.cursor = 0  # next ring sequence number to send
        self.snap_src: Sequence[Any] | None = None  # the journal list, read by index up to snap_end
        self.snap_index = 0
        self.snap_end = 0
        # A fold client's snapshot event sent built whatever it is (a tail's first: see _chunk_at), or -1.
        self.snap_built = -1
        self.chunk: SnapChunk | None = None
        # Live events that may also be in the snapshot (published while it was taken, or journaled
        # before it and published after), by identity: skipped while the live stream starts with them
        # (see snapshot_tail); None once it has gone past them.
        self.skip_ids: frozenset[int] = frozenset()
        # Keeps those objects alive while skip_ids is in use, so their ids cannot be reused; each with
        # its marker when the snapshot was taken (a Deferred's, else None: see snapshot_tail._lazy_twin).
        self.skip_hold: list[tuple[Any, Any]] | None = None
        self.outbuf = bytearray()
        self.inbuf = bytearray()
        self.dropped_pending = 0
        self.dropped_total = 0
        self.sent_events = 0
        self.want_write = False
        self.closing_deadline: float | None = None
        self.in_tokens = INPUT_BURST
        self.in_at = time.monotonic()
        # Asked for the lean stream (see lean): turns summarized but the newest of a pass, and whole
        # traces on request (`fetch`: the turn numbers waiting to be answered, at most FETCH_QUEUE).
        self.lean = False
        self.fetch: deque[int | tuple[int, int]] = deque()
        # Asked for the elided stream too (see elide): live events of the elided kinds are not sent,
        # the rest carry their journal positions, counted from `jpos` (the snapshot's length at first);
        # `fetch` then also holds journal ranges (from, to) to answer.
        self.elide = False
        self.jpos = 0
        # Where the client's copy of the journal ends, as far as this server knows (what it streamed
        # before eliding, then the ranges it answered from there): the agent closing sends it the rest,
        # up to `jclose` so far (see loop._settle_on_close).
        self.jdone = 0
        self.jclose = 0
        # Turns the lean stream sent this client only as summaries, not since whole (a trace fetch
        # answers one): an agent that closes sends their traces, which the client could no longer fetch.
        self.owed: set[int] = set()
        # Asked (with the elided stream) for the events a recording agent encoded as their own frames,
        # each announced by its position in a batch before them (see splice): no splicing, no checksum.
        self.frames = False
        # Asked (with the elided stream) not to be sent batches that would only say where the journal
        # has reached: it learns that from a range answer's size when it needs it (see elide).
        self.quiet = False
        # Asked (with the quiet elided stream) for its live frames in a shared-memory ring (see ring):
        # `ring` once the agent has handed it over, after which live frames go there, not to the socket.
        self.ring_asked = False
        self.ring: RingWriter | None = None
        # And said it does not check the checksums of its ring's frames: the agent's thread leaves the
        # crc32 of the batches it encodes for that ring 0 (see ring: "Checksums").
        self.ring_unchecked = False
        # Admitted, its hello not sent yet: the agent waits for the client's own hello until this time
        # (monotonic), so that it knows what to send first (see handshake._start); None once sent.
        self.hello_due: float | None = None
        self.hello_counts = (0, 0)  # (turns, tap errors) in the snapshot, for that hello
        # Asked (with the elided stream) for the snapshot's tail only: the journal from its newest turn
        # on; the rest it fetches by range (see handshake._start).
        self.tail = False
        # Asked (protocol FOLD_PROTOCOL, with the quiet elided stream) for the fold stream (see
        # elide.fold_out): every live event but the turns' traces, which it rebuilds itself.
        self.fold = False
        # The protocol its hello said (the agent's hello answers in it); None: it sent none.
        self.protocol: int | None = None
        # Attached to the journal (counted in _nclients, its snapshot taken): at its first valid hello,
        # or when started without one (see handshake._attach). Until then nothing is queued for it.
        self.attached = False
        # Counted in _ntracing: it sent a valid hello and does not read the fold stream, so it reads
        # the turns' traces (see ClientQueues.tracing_clients).
        self.tracing = False
        # Reads the agent's recording file itself (its hello said `"follow": true` and the agent records:
        # see handshake, "Following the recording"): never attached, nothing published or queued for it;
        # it is answered pings and trace fetches, and learns from the connection's end that the agent is.
        self.follows = False

    def lose(self, n: int) -> None:
        """Count `n` events this client will never get; announced before its next event."""
        self.dropped_pending += n
        self.dropped_total += n
