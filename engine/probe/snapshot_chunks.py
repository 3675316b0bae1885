"""The snapshot in shared chunks: what a newly attached client is sent first (the journal so far, read
by index from the journal's own append-only list) is encoded once, in chunks of about SNAP_CHUNK_BYTES
(or SNAP_CHUNK_EVENTS events) that every client reading that part of it shares. A chunk is cached while
any client reads it, and the last SNAP_CACHE_CHUNKS are kept for the clients that attach next, so a
hundred clients attaching at once encode the journal once; each copies whole frames from the chunks
into its own output buffer, up to HIGH_WATER.

A mixin of the ProbeServer's queues (queues.ClientQueues), run by the I/O thread's fill only: the
agent's publish never calls it.
"""

from __future__ import annotations

import weakref
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.probe.client_state import HIGH_WATER
from engine.probe.elide import for_fold
from engine.recording.frames import encode_frame

if TYPE_CHECKING:
    from engine.probe.client_state import Client

# The snapshot is encoded in chunks of about this many bytes (or SNAP_CHUNK_EVENTS events), shared
# by every client reading that part of it.
SNAP_CHUNK_BYTES = 128 * 1024
SNAP_CHUNK_EVENTS = 1024
# Chunks kept after their last reader moved on: the start of the journal, for the next client.
SNAP_CACHE_CHUNKS = 4
_DROPPED_ONE = encode_frame({"k": "dropped", "count": 1})


class SnapChunk:
    """Encoded frames of snapshot events [start, end): `offsets[i - start]` is where event i begins."""

    __slots__ = ("start", "end", "data", "offsets", "__weakref__")

    def __init__(self, start: int, end: int, data: bytes, offsets: array[int]) -> None:
        self.start = start
        self.end = end
        self.data = data
        self.offsets = offsets


class SnapshotChunks:
    """ClientQueues' snapshot chunks: their cache (set here) and a client's fill from them (`_spent`,
    `_encode_event` and `_more` are ClientQueues')."""

    _more: bool

    if TYPE_CHECKING:

        def _spent(self) -> bool: ...

        def _encode_event(self, ev: Any, redacted: bool = False) -> bytes | None: ...

    def __init__(self) -> None:
        # Shared snapshot chunks, by start index, for one snapshot source (the journal list).
        self._chunk_src: Sequence[Any] | None = None
        self._chunks: weakref.WeakValueDictionary[Any, SnapChunk] = weakref.WeakValueDictionary()
        self._chunk_keep: deque[SnapChunk] = deque(maxlen=SNAP_CACHE_CHUNKS)

    def _chunk_at(self, src: Sequence[Any], start: int, fold: bool = False, built: int = -1) -> SnapChunk:
        """The shared chunk of snapshot events from `start`. `fold`: for fold clients (their own
        chunks): turns whose traces nobody has built go as their markers (see elide.for_fold), so attaching
        builds none (the client's fold builds them from the events), but the one at `built` (a tail
        snapshot's first event, the newest turn: the client shows it at once, and cannot fold it
        without the history before it)."""
        if self._chunk_src is not src:
            self._chunk_src = src
            self._chunks = weakref.WeakValueDictionary()
            self._chunk_keep.clear()
        key: Any = start if not fold else ("fold", start, built == start)
        ch = self._chunks.get(key)
        if ch is not None:
            return ch
        entry = getattr(src, "entry", None) if fold else None
        data = bytearray()
        offsets = array("Q", [0])
        stop = min(len(src), start + SNAP_CHUNK_EVENTS)
        i = start
        # A chunk also ends where this pass's CPU budget does (one event at least): each event may be
        # read back from disk or have its trace built first (a turn nobody had read, engine.trace_lazy),
        # and a whole chunk of those held the GIL from the agent's turns for tens of milliseconds.
        while i < stop and len(data) < SNAP_CHUNK_BYTES and (i == start or not self._spent()):
            e = entry(i) if entry is not None and i != built else None
            frame = self._encode_event(src[i] if e is None else for_fold(e))
            # An event that cannot be encoded is announced in its place, so offsets stay one per event.
            data += _DROPPED_ONE if frame is None else frame
            offsets.append(len(data))
            i += 1
        ch = SnapChunk(start, i, bytes(data), offsets)
        self._chunks[key] = ch
        self._chunk_keep.append(ch)
        return ch

    def _fill_snapshot(self, c: Client) -> bool:
        """Copy snapshot frames into the client's buffer up to HIGH_WATER. True once it is all sent."""
        src = c.snap_src
        assert src is not None
        outbuf = c.outbuf
        while c.snap_index < c.snap_end and len(outbuf) < HIGH_WATER:
            ch = c.chunk
            if ch is None or not ch.start <= c.snap_index < ch.end:
                if ch is not None and self._spent():
                    # Encoding the next chunk may cost milliseconds: not in a pass that has spent its
                    # CPU budget. The loop comes straight back (after the budget's rest).
                    self._more = True
                    return False
                try:
                    ch = c.chunk = self._chunk_at(src, c.snap_index, c.fold, c.snap_built)
                except IndexError:
                    # The journal list shrank (it is meant to be append-only): end the snapshot here.
                    c.snap_end = c.snap_index
                    break
                if ch.end == ch.start:
                    c.snap_end = c.snap_index
                    break
            base = ch.start
            offs = ch.offsets
            lo = offs[c.snap_index - base]
            last = min(ch.end, c.snap_end) - base
            # As many whole frames as fit below HIGH_WATER, and at least one.
            j = bisect_right(offs, lo + HIGH_WATER - len(outbuf), c.snap_index - base + 1, last + 1) - 1
            j = max(j, c.snap_index - base + 1)
            outbuf += memoryview(ch.data)[lo : offs[j]]
            c.sent_events += j + base - c.snap_index
            c.snap_index = j + base
        if c.snap_index < c.snap_end:
            return False
        c.snap_src = None
        c.chunk = None
        return True
