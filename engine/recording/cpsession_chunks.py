"""Version 2's chunks read back (`ChunkReading`, a mixin of cpsession_reader.RecordingReader): a chunk
decompressed from its zstd stream's start for random access, exactly to the bytes it declares, and its
events decoded; version 1's compressed blobs and traces inflated. Every decompression counts against the
reader's budget (INFLATE_BUDGET_FIXED + INFLATE_BUDGET_RATIO x the file's size), and a bomb is refused
with its offset before it is built (see cpsession: "Every decompression is bounded").
"""

from __future__ import annotations

import bisect
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.recording.cpsession_format import (
    K_CHUNK,
    MAX_CHUNK_RAW,
    _why,
    zstandard,
)
from engine.recording.frames import (
    FrameCountError,
    FrameError,
    ObjectCounter,
    count_payload_values,
    count_values,
    decode_frames,
)
from engine.recording.journal import MAX_INFLATE, InflateError, unpack_event
from engine.recording.lean_turns import decode_frames_lean

MAX_WINDOW = 1 << 24  # zstd window a reader accepts (level 9 writes 4 MiB): a hostile frame asks more
INFLATE_BUDGET_FIXED = 64 << 20
INFLATE_BUDGET_RATIO = 64  # honest recordings inflate ~6x; a bomb inflates ~1000x
# Bytes of budget a decoded version-2 event costs on top of its raw bytes: about what Python holds for a
# small event map. Honest chunks hold a few events per KB; a chunk of 9-byte frames would hold 100,000s.
EVENT_COST = 256
# The most a byte of msgpack can build (see _check_values): a negative fixint (1 byte) is a 28-byte int
# object plus its slot, a 2-byte string (3 bytes) a ~51-byte str plus its slot, an empty array ~70.
WORST_PER_BYTE = 72


class _Feed:
    """The compressed side of a zstd stream reader, handed one chunk at a time (the reader pulls)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def read(self, n: int = -1) -> bytes:
        return self.parts.pop(0) if self.parts else b""


@dataclass
class _Stream:
    """Decompression state of one zstd stream: where it started and the next chunk it will decode."""

    start: int
    next_pos: int
    feed: _Feed
    reader: Any


class ChunkReading:
    """RecordingReader's chunk decoding (the state is RecordingReader's, set in its __init__)."""

    CHUNK_CACHE = 4  # decoded chunks kept: stepping back and forth over a few turns decodes nothing

    version: int
    _streams: list[int]
    _stream: _Stream | None
    _chunks: dict[int, list[dict[str, Any]]]
    _inflated: int
    _budget: int
    _counted: set[int]

    if TYPE_CHECKING:

        def _frame(self, pos: int) -> tuple[dict[str, Any], int]: ...

    def _chunk_fields(self, obj: dict[str, Any], pos: int) -> tuple[bool, int, list[int], bytes]:
        s, n, t, z = obj.get("s"), obj.get("n"), obj.get("t"), obj.get("z")
        if type(n) is not int or not isinstance(z, bytes) or not isinstance(t, list) or s not in (0, 1):
            raise FrameError("chunk frame has missing or mistyped fields", pos)
        if not 0 <= n <= MAX_CHUNK_RAW:
            raise FrameError(
                f"chunk declares {n} bytes, over the {MAX_CHUNK_RAW}-byte limit (a decompression bomb?)", pos
            )
        if not all(type(x) is int for x in t):
            raise FrameError("chunk frame lists a turn number that is not an int", pos)
        return bool(s), n, t, z

    def _inflate_chunk(
        self, pos: int, obj: dict[str, Any], end: int, trace_fields: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        """The events of the chunk at `pos` (frame map `obj`), decompressing its stream from its start.
        `trace_fields`: see events(); such a chunk's events are not kept for later reads."""
        cached = self._chunks.get(pos)
        if cached is not None:
            return cached
        fields = self._chunk_fields(obj, pos)
        starts = fields[0]
        st = self._stream
        if starts:
            st = None
        elif st is None or st.next_pos != pos:
            # Random access: decode the stream from the chunk that started it up to this one.
            i = bisect.bisect_right(self._streams, pos) - 1
            if i < 0:
                raise FrameError("compressed chunk with no stream start before it", pos)
            at = self._streams[i]
            st = _Stream(at, at, _Feed(), None)
            while st.next_pos < pos:
                prev, prev_end = self._frame(st.next_pos)
                if prev.get("k") != K_CHUNK:
                    raise FrameError("a stream's chunks are interrupted by another frame", st.next_pos)
                self._feed(st, st.next_pos, prev, prev_end)
            self._stream = st
        if st is None:
            st = _Stream(pos, pos, _Feed(), None)
            if not self._streams or self._streams[-1] < pos:
                self._streams.append(pos)
            self._stream = st
        raw = self._feed(st, pos, obj, end, fields)
        # Each decoded event costs memory beyond its bytes (a dict: ~200 bytes for a 9-byte frame), so a
        # chunk of tiny frames counts them against the budget too, and is refused before they are built.
        # Likewise each map and array (ObjectCounter): a chunk of empty containers is ~70x its bytes.
        first = ~pos not in self._counted
        left = max(0, self._budget - self._inflated)
        most = left // EVENT_COST if first else None
        counter = ObjectCounter(left) if first else None
        try:
            if first:
                self._check_values(raw, left, count_values)
            if trace_fields is None:
                events, used = decode_frames(raw, max_frames=most, counter=counter)
            else:
                events, used = decode_frames_lean(raw, trace_fields, max_frames=most, counter=counter)
        except FrameCountError:
            self._spend(self._budget + 1, pos)  # raises: the recording's budget is what ran out
            raise
        except FrameError as exc:
            raise FrameError(f"chunk holds a corrupt event ({_why(exc)})", pos) from None
        if used != len(raw):
            raise FrameError("chunk ends inside an event", pos)
        if counter is not None:
            self._spend(EVENT_COST * len(events) + counter.used, pos)
            self._counted.add(~pos)
        # (_plain's answer for an event stored plain, every honest version-2 one, without its call)
        plain = self._plain
        events = [
            ev if isinstance(ev.get("k"), str) and "tz" not in ev and "z" not in ev else plain(ev, pos)
            for ev in events
        ]
        if trace_fields is not None:
            return events  # not whole: turn(), blob() and events() must not find them in the cache
        self._chunks[pos] = events
        if len(self._chunks) > self.CHUNK_CACHE:
            del self._chunks[next(iter(self._chunks))]
        return events

    def _feed(
        self,
        st: _Stream,
        pos: int,
        obj: dict[str, Any],
        end: int,
        fields: tuple[bool, int, list[int], bytes] | None = None,
    ) -> bytes:
        """Decompress the next chunk of stream `st`: exactly the bytes it declares, never more. `fields`:
        the chunk's _chunk_fields, when the caller has them already (not read and checked again)."""
        starts, n, _, z = self._chunk_fields(obj, pos) if fields is None else fields
        if starts != (pos == st.start):
            raise FrameError("chunk's stream-start flag disagrees with the index", pos)
        if st.reader is None:
            dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
            st.reader = dctx.stream_reader(st.feed, read_size=1 << 16)  # type: ignore[arg-type]  # any .read()
        if pos not in self._counted:
            self._spend(n, pos)
            self._counted.add(pos)
        st.feed.parts.append(z)
        out: list[bytes] = []
        got = 0
        try:
            while got < n:
                piece = st.reader.read(n - got)
                if not piece:
                    break
                out.append(piece)
                got += len(piece)
        except zstandard.ZstdError as exc:
            self._stream = None
            raise FrameError(f"compressed chunk is corrupt ({exc})", pos) from None
        if got != n or st.feed.parts:
            self._stream = None
            raise FrameError(f"compressed chunk inflates to {got} bytes, not the {n} it declares", pos)
        st.next_pos = end
        return b"".join(out)

    def _check_values(self, raw: bytes, left: int, count: Any) -> None:
        """Refuse inflated bytes whose values could not fit in what is `left` of the budget, before any is
        built. Decoding charges each map and array and the values it holds (ObjectCounter), but only once
        the container is complete, after its values are built: while the most the bytes can build
        (WORST_PER_BYTE each) fits in what is left they are decoded as they are, and past that their
        values are counted first (count_values: a pass over the bytes, about a third of decoding's time;
        honest chunks of a turn or two never need it). FrameCountError when they cannot fit."""
        if WORST_PER_BYTE * len(raw) > left:
            count(raw, left // ObjectCounter.VALUE)

    def _spend(self, n: int, pos: int) -> None:
        """Count `n` more bytes inflated from the file; past the budget it is refused as a bomb."""
        self._inflated += n
        if self._inflated > self._budget:
            raise FrameError(
                f"the recording inflates past {self._budget} bytes, {INFLATE_BUDGET_RATIO}x its size "
                "(a decompression bomb?)",
                pos,
            )

    def _plain(self, ev: dict[str, Any], pos: int) -> dict[str, Any]:
        """An event in its in-memory form (version 1 stores compressed blobs and traces inside events).
        What those inflate to counts against the reader's budget, like a chunk's events: many blobs each
        under MAX_INFLATE would otherwise inflate a small file without bound."""
        if not isinstance(ev.get("k"), str):
            raise FrameError("event has no kind", pos)
        if "tz" not in ev and "z" not in ev:
            return ev  # stored plain (every version-2 event): what unpack_event would hand back
        left = self._budget - self._inflated
        sizes: list[int] = []
        counter = ObjectCounter(max(0, left))  # a packed trace's maps and arrays (see _inflate_chunk)

        def check(raw: bytes) -> None:  # an inflated trace's values, before they are built
            self._check_values(raw, max(0, left - len(raw)), count_payload_values)

        try:
            out = unpack_event(
                ev, max(1, min(MAX_INFLATE, left)), sizes, counter, check
            )  # 0: no limit to zlib
        except InflateError as exc:
            if left < MAX_INFLATE and str(exc).startswith("compressed data inflates past"):
                self._spend(MAX_INFLATE, pos)  # raises: the budget's message, not the event's limit
            raise FrameError(f"{ev['k']} event: {exc}", pos) from None
        except FrameCountError:
            self._spend(self._budget + 1, pos)  # raises: the recording's budget is what ran out
            raise
        # A version-1 frame holds one event: counted once however often it is read. An honest version-2
        # chunk holds no compressed event (its writer stores them plain), so any there is counted each time.
        if sizes and not (self.version == 1 and pos in self._counted):
            self._spend(sizes[0] + counter.used, pos)
            if self.version == 1:
                self._counted.add(pos)
        return out
