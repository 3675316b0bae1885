"""Reading a `.cpsession` file (`RecordingReader`): opening it by its footer or rebuilding the index
of one cut off, random access to turns, events and blobs, version 2's chunks decompressed within a
budget (`cpsession_chunks`), and following a file another process is still writing. The layout is
described in `cpsession`.
"""

from __future__ import annotations

import bisect
import os
import stat
import struct
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from itertools import chain, islice, repeat
from operator import itemgetter, lt
from pathlib import Path
from typing import Any

import msgpack

from engine.recording.counts import (
    K_COUNTS,
    CountTable,
    CountTableError,
    decode_table,
)
from engine.recording.cpsession_chunks import (
    INFLATE_BUDGET_FIXED,
    INFLATE_BUDGET_RATIO,
    ChunkReading,
    _Stream,
)
from engine.recording.cpsession_format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    K_BLOBS,
    K_CHUNK,
    K_END,
    K_HEADER,
    K_INDEX,
    READ_VERSIONS,
    TRAILER_SIZE,
    RecordingError,
    _file_kind,
    _why,
)
from engine.recording.frames import (
    HEADER,
    HEADER_SIZE,
    MAX_FRAME_BYTES,
    FrameError,
    decode_header,
    decode_payload,
)
from engine.wording import counted

_PEEK = 128  # payload bytes read per frame while rebuilding an index: k + kind + turn/hash fit in ~80
_CHUNK = 1 << 20  # sequential read size for events()/refresh()
_KIND = itemgetter("k")

# First bytes of a msgpack map: fixmap (0x80-0x8f), map 16, map 32.
_MAP_STARTS = frozenset([*range(0x80, 0x90), 0xDE, 0xDF])


@dataclass(frozen=True)
class Damage:
    """Bytes at the end of a file that could not be used: where they start, how many, and why."""

    offset: int
    lost_bytes: int
    message: str


def _extremes(*lists: list[int]) -> tuple[int, ...]:
    """The least and greatest value in these lists of ints (none when they are all empty)."""
    values = [v for xs in lists if xs for v in (min(xs), max(xs))]
    return (min(values), max(values)) if values else ()


def _peek(prefix: bytes) -> tuple[str, Any] | None:
    """(kind, turn number | blob hash | None) from the first bytes of a payload, or None if it cannot tell."""
    u = msgpack.Unpacker(raw=False)
    u.feed(prefix)
    try:
        if u.read_map_header() < 1 or u.unpack() != "k":
            return None
        kind = u.unpack()
        if not isinstance(kind, str):
            return None
        if kind in ("turn", "blob"):
            second = "turn" if kind == "turn" else "h"
            if u.unpack() != second:
                return None
            key = u.unpack()
            ok = isinstance(key, int) if kind == "turn" else isinstance(key, str)
            return (kind, key) if ok else None
        return kind, None
    except Exception:  # OutOfData, FormatError, ValueError...: the prefix says nothing certain
        return None


class RecordingReader(ChunkReading):
    """Random access to a `.cpsession` file; also follows a file that another process is still writing.

    Events are handed out in their plain in-memory form whatever the version (version 1's compressed
    blobs and traces are inflated here, bounded, so a bomb is reported with its offset)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        # Every read goes through _pread and is counted: tests and benchmarks check how much open() reads.
        self.bytes_read = 0
        self.header: dict[str, Any] = {}
        self.version = 1
        self.damage: Damage | None = None
        self.finished = False  # True when the file has a valid index footer (the writer closed it)
        self._turn_nums: list[int] = []
        self._turn_offs: list[int] = []
        self._blobs: dict[str, int] | None = None
        self._blobs_at: int | None = None
        self._counts_at: int | None = None  # the @counts footer frame, when the writer stored one
        self._streams: list[int] = []  # version 2: offsets of the chunks that start a zstd stream
        self._stream: _Stream | None = None
        self._chunks: dict[int, list[dict[str, Any]]] = {}  # chunk offset -> its events (small LRU)
        self._inflated = 0
        self._budget = INFLATE_BUDGET_FIXED
        # Frames whose inflated bytes (and, for chunks, decoded events: ~frame offset) are counted in
        # _inflated, each once: the budget bounds what the file holds, not how often it is read, so a
        # reader stepping back and forth over a recording (the TUI) never runs out of it.
        self._counted: set[int] = set()
        self._start = 0  # first byte after the header frame
        self._end = 0  # end of the last complete event frame read so far
        self._seen_size = -1  # file size at the last refresh(), to make polling an unchanged file free

    @classmethod
    def open(cls, path: str | Path, *, salvage: bool = False) -> RecordingReader:
        """Open via the footer when present, else rebuild the index. salvage=True keeps what precedes corruption."""
        p = Path(path)
        try:
            if p.is_dir():  # raises PermissionError in a directory we may not enter
                raise RecordingError(f"{p} is a directory: give the path of a .cpsession recording file")
            # O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, forever if none comes;
            # it has no effect on the reads of a regular file.
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        except PermissionError:
            from engine.access import denied  # an error path's own import

            raise RecordingError(f"cannot open recording {p}: {denied(p)}") from None
        except OSError as exc:
            raise RecordingError(f"cannot open recording {p}: {exc.strerror}") from None
        self = cls(p, fd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                # Positional reads and the size the index is checked against need a file: a FIFO or a
                # socket cannot seek, and a device (a link to /dev/zero) reports size 0 but reads forever.
                raise RecordingError(
                    f"{p} is {_file_kind(st.st_mode)}, not a recording file: give the path of a .cpsession "
                    "file (copy a recording from a pipe to a file first)"
                )
            size = st.st_size
            self._budget = INFLATE_BUDGET_FIXED + INFLATE_BUDGET_RATIO * size
            self._read_header()
            if not self._load_footer(size):
                self._blobs = {} if self.version == 1 else None
                self._scan(self._start, size, salvage)
        except BaseException:
            # Through close(), which forgets the number: closed here behind the reader's back, its
            # finalizer closed it again when collected, by then perhaps another file's (a recording
            # being written in this process lost its descriptor mid-write: EBADF).
            self.close()
            raise
        return self

    # -- low level -------------------------------------------------------------------------------
    def _pread(self, offset: int, n: int) -> bytes:
        data = os.pread(self._fd, n, offset)
        self.bytes_read += len(data)
        return data

    def _frame(self, pos: int) -> tuple[dict[str, Any], int]:
        """Decode the frame at `pos`; returns (map, end offset). Raises FrameError."""
        length, crc = decode_header(self._pread(pos, HEADER_SIZE), pos)
        payload = self._pread(pos + HEADER_SIZE, length)
        if len(payload) < length:
            raise FrameError(f"frame cut off ({len(payload)} of {length} payload bytes)", pos)
        return decode_payload(payload, crc, pos), pos + HEADER_SIZE + length

    def _error(self, what: str, offset: int) -> RecordingError:
        return RecordingError(
            f"{self.path}: {what} at offset {offset}. Frames before it are intact: keep them with "
            f"`cp-inspect salvage {self.path} -o FIXED.cpsession` (in Python: RecordingReader.open(..., "
            "salvage=True))",
            offset,
        )

    def _read_header(self) -> None:
        try:
            head, self._start = self._frame(0)
        except FrameError as exc:
            size = os.fstat(self._fd).st_size
            if size == 0:
                raise RecordingError(
                    f"{self.path} is empty: the agent stopped before writing a header"
                ) from None
            raise RecordingError(
                f"{self.path} is not a {FORMAT_NAME} recording, or its header frame is cut off or corrupt "
                f"({exc}); nothing can be recovered from it",
                0,
            ) from None
        if head.get("k") != K_HEADER or head.get("format") != FORMAT_NAME:
            raise RecordingError(
                f"{self.path} is not a {FORMAT_NAME} recording (its first frame is not a header)", 0
            )
        version = head.get("version")
        if version not in READ_VERSIONS or isinstance(version, bool):
            newer = isinstance(version, int) and version > FORMAT_VERSION
            hint = "upgrade contextpipe-inspector to read it" if newer else "re-record it with this version"
            raise RecordingError(
                f"{self.path} is {FORMAT_NAME} format version {version}; this reader reads versions "
                f"{', '.join(map(str, READ_VERSIONS))}: {hint}",
                0,
            )
        self.version = int(version)
        self.header = {k: v for k, v in head.items() if k != "k"}
        self._end = self._start

    def _load_footer(self, size: int) -> bool:
        """Use the index footer if the trailer and index frames are intact and consistent."""
        if size < self._start + TRAILER_SIZE:
            return False
        try:
            trailer, _ = self._frame(size - TRAILER_SIZE)
            (index_at,) = struct.unpack(">Q", trailer["index_at"])
            if trailer["k"] != K_END or not self._start <= index_at < size:
                return False
            index, index_end = self._frame(index_at)
            nums, offs = index["turns"], index["offsets"]
            data_end, blobs_at = index["data_end"], index["blobs_at"]
            streams = index.get("streams", [])
            counts_at = index.get("counts_at", data_end)  # files written before the table: no counts
            # The checks over every turn run in C (map over builtins): 10,000 turns in ~1 ms, not ~5.
            ints = set(map(type, chain((data_end, blobs_at, counts_at), nums, offs, streams))) <= {int}
            ok = (
                index["k"] == K_INDEX
                and index_end == size - TRAILER_SIZE
                and isinstance(nums, list)
                and isinstance(offs, list)
                and isinstance(streams, list)
                and ints
                and len(nums) == len(offs)
                and self._start <= data_end <= blobs_at < index_at
                and data_end <= counts_at <= blobs_at
                and all(map(lt, nums, islice(nums, 1, None)))
                and all(self._start <= o < data_end for o in _extremes(offs, streams))
                and (self.version == 1 or not offs or (bool(streams) and streams[0] <= offs[0]))
            )
            if not ok:
                return False  # an index that contradicts itself: rebuild it from the frames instead
            if self.version >= 2:
                blobs, blobs_end = self._frame(blobs_at)  # unused by v2, but a damaged footer is damage
                if blobs.get("k") != K_BLOBS or blobs_end != index_at:
                    return False
            self._turn_nums, self._turn_offs, self._streams = nums, offs, sorted(streams)
            self._end, self._blobs_at = data_end, blobs_at
            self._counts_at = counts_at if "counts_at" in index else None
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, struct.error):
            return False  # no usable footer: the caller rebuilds the index by scanning
        self.finished = True
        return True

    def _load_blobs(self) -> None:
        if self._blobs is not None:
            return
        if self.version >= 2:
            # Version 2 keeps no blob map on disk: find each blob's chunk by reading the events once.
            blobs: dict[str, int] = {}
            for pos, _, ev in self._frames(self._start, self._end):
                if ev.get("k") == "blob" and isinstance(ev.get("h"), str):
                    blobs.setdefault(ev["h"], pos)
            self._blobs = blobs
            return
        assert self._blobs_at is not None
        try:
            blobs = self._frame(self._blobs_at)[0]["blobs"]
        except (FrameError, KeyError) as exc:
            raise self._error(f"blob index unreadable ({exc})", self._blobs_at) from None
        # Offsets inside the events: one past the end (2**63 - 1 is a valid int) or negative made pread
        # raise a bare OSError (EINVAL) from blob().
        start, end = self._start, self._end
        if not isinstance(blobs, dict) or not all(
            type(o) is int and start <= o < end for o in blobs.values()
        ):
            raise self._error(
                "blob index unreadable (not a map of offsets within the events)", self._blobs_at
            )
        self._blobs = blobs

    def _index(self, pos: int, kind: str, key: Any) -> None:
        if kind == "turn":
            if type(key) is not int or (self._turn_nums and key <= self._turn_nums[-1]):
                raise self._error(f"turn number {key!r} does not follow turn {self._turn_nums[-1:]}", pos)
            if self._turn_offs and self._turn_offs[-1] == pos and self.version >= 2:
                pass  # several turns in one chunk share its offset
            self._turn_nums.append(key)
            self._turn_offs.append(pos)
        elif kind == "blob" and self._blobs is not None and isinstance(key, str):
            self._blobs.setdefault(key, pos)

    # -- index rebuild -------------------------------------------------------------------------------
    def _scan(self, pos: int, size: int, salvage: bool) -> None:
        """Rebuild the index from `pos`: read each frame header plus a short payload prefix, seek past the rest
        (version 2: each chunk frame is decoded, not decompressed; it lists its turn numbers)."""
        prev: int | None = None
        self.damage = None
        while pos < size:
            head = self._pread(pos, HEADER_SIZE + _PEEK)
            try:
                length = decode_header(head[:HEADER_SIZE], pos)[0] if len(head) >= HEADER_SIZE else -1
                if length < 0 or pos + HEADER_SIZE + length > size:
                    return self._tail(pos, size)
                peek = _peek(head[HEADER_SIZE : HEADER_SIZE + length]) if self.version == 1 else None
                obj: dict[str, Any] | None = None
                if peek is None:  # prefix inconclusive: decode the whole frame (checks the crc too)
                    obj = self._frame(pos)[0]
                    kind = obj.get("k")
                    if not isinstance(kind, str):
                        raise FrameError("frame has no kind", pos)
                    peek = (kind, obj.get("turn" if kind == "turn" else "h"))
                if peek[0] == K_CHUNK and self.version >= 2 and obj is not None:
                    starts, _, turns, _ = self._chunk_fields(obj, pos)
                    if starts:
                        self._streams.append(pos)
                    elif not self._streams:
                        raise FrameError("compressed chunk with no stream start before it", pos)
                    for t in turns:
                        self._index(pos, "turn", t)
                elif peek[0].startswith("@"):
                    # A footer the trailer check rejected: the writer was killed while closing.
                    msg = f"index footer at offset {pos} is incomplete or damaged; no events lost, index rebuilt"
                    self.damage = Damage(pos, size - pos, msg)
                    return None
                elif self.version >= 2:
                    raise FrameError(f"a version-2 recording holds an uncompressed {peek[0]!r} frame", pos)
                else:
                    self._index(pos, *peek)
            except (FrameError, RecordingError) as exc:
                bad = prev if prev is not None and not self._crc_ok(prev) else pos
                if not salvage:
                    raise self._error(f"corrupt frame ({_why(exc)})", bad) from None
                self._truncate_index(bad)
                msg = f"corrupt frame at offset {bad} ({_why(exc)}); the {size - bad} bytes from there on were skipped"
                self.damage = Damage(bad, size - bad, msg)
                return None
            prev, pos = pos, pos + HEADER_SIZE + length
            self._end = pos
        return None

    def _crc_ok(self, pos: int) -> bool:
        try:
            self._frame(pos)
            return True
        except FrameError:
            return False

    def _truncate_index(self, offset: int) -> None:
        cut = bisect.bisect_left(self._turn_offs, offset)
        del self._turn_nums[cut:], self._turn_offs[cut:]
        if self._blobs is not None:
            self._blobs = {h: o for h, o in self._blobs.items() if o < offset}
        self._streams = [s for s in self._streams if s < offset]
        self._end = min(self._end, offset)

    def _tail(self, pos: int, size: int) -> None:
        """Classify the bytes [pos, size) that do not form a complete frame: cut-off tail, or corruption."""
        tail = self._pread(pos, size - pos)
        if len(tail) >= HEADER_SIZE:
            decode_header(tail[:HEADER_SIZE], pos)  # a length over the limit is corruption, not a cut
            if len(tail) > HEADER_SIZE and tail[HEADER_SIZE] not in _MAP_STARTS:
                # Every frame's payload is a msgpack map, so a cut-short write starts one; bytes that start
                # anything else are junk whose length prefix runs past the end (it would hide every frame
                # after it as one "incomplete" tail).
                raise FrameError(
                    "garbage after the last complete frame (its payload is not a msgpack map)", pos
                )
            u = msgpack.Unpacker(raw=False)
            u.feed(tail[HEADER_SIZE:])
            try:
                u.unpack()
            except msgpack.OutOfData:
                pass  # consistent with a frame whose write was cut short
            except Exception as exc:
                raise FrameError(
                    f"garbage after the last complete frame ({type(exc).__name__})", pos
                ) from None
            else:
                raise FrameError("length prefix longer than its payload", pos)
        msg = (
            f"last frame at offset {pos} is incomplete ({size - pos} bytes): the writer was killed "
            f"mid-write (or is still writing); every frame before it was recovered: {self.turn_count} "
            "complete turns kept"
        )
        self.damage = Damage(pos, size - pos, msg)
        self._end = pos

    # -- public ----------------------------------------------------------------------------------------
    @property
    def turn_count(self) -> int:
        return len(self._turn_nums)

    def turn_numbers(self) -> list[int]:
        return list(self._turn_nums)

    def _turn_slot(self, n: int) -> int:
        if n < 0:
            if -n > len(self._turn_nums):
                raise IndexError(f"turn {n}: the recording has {counted(len(self._turn_nums), 'turn')}")
            return len(self._turn_nums) + n
        i = bisect.bisect_left(self._turn_nums, n)
        if i == len(self._turn_nums) or self._turn_nums[i] != n:
            raise IndexError(
                f"turn {n} is not in the recording (turns {self._turn_nums[:1]}..{self._turn_nums[-1:]})"
            )
        return i

    def _events_at(self, pos: int) -> list[dict[str, Any]]:
        """The event(s) stored in the frame at `pos`: one (version 1) or a chunk's (version 2)."""
        obj, end = self._frame(pos)
        if self.version >= 2:
            if obj.get("k") != K_CHUNK:
                raise FrameError("index points at a frame that is not a chunk", pos)
            return self._inflate_chunk(pos, obj, end)
        return [self._plain(obj, pos)]

    def turn(self, n: int) -> dict[str, Any]:
        """The `turn` event of turn number n (negative n counts from the last turn)."""
        slot = self._turn_slot(n)
        pos, num = self._turn_offs[slot], self._turn_nums[slot]
        try:
            for ev in self._events_at(pos):
                if ev.get("k") == "turn" and ev.get("turn") == num:
                    if not isinstance(ev.get("trace"), dict):
                        raise FrameError("turn event has no trace", pos)
                    return ev
            raise FrameError(f"the frame the index names holds no turn {num}", pos)
        except FrameError as exc:
            raise self._error(f"turn {n} unreadable ({_why(exc)})", pos) from None

    def frame_events(self, pos: int) -> list[dict[str, Any]]:
        """The events of the frame at `pos` (an offset `event_frames` handed out), in order: a version-2
        chunk's, or a version-1 frame's one event. RecordingError when no event frame is there."""
        if not self._start <= pos < self._end:
            raise self._error(f"no event frame at offset {pos}", self._start)
        try:
            return list(self._events_at(pos))
        except FrameError as exc:
            raise self._error(f"events unreadable ({_why(exc)})", pos) from None

    def token_counts(self) -> CountTable | None:
        """The token counts the agent made, stored at close (engine/recording/counts.py), or None: a
        file written before the table existed, by a writer given no counter, resumed, or never closed.
        Raises CountTableError when a table is there but unreadable (a reader then counts again)."""
        if self._counts_at is None or not self.finished:
            return None
        try:
            obj, end = self._frame(self._counts_at)
        except FrameError as exc:
            raise CountTableError(f"{self.path}: token-count table unreadable ({_why(exc)})") from None
        if obj.get("k") != K_COUNTS or self._blobs_at is None or end != self._blobs_at:
            raise CountTableError(f"{self.path}: the footer's token-count frame is not a @counts table")
        return decode_table(obj)

    def blob(self, h: str, at: int | None = None) -> str | bytes:
        """The data of blob `h`. `at`: the offset of the frame holding it, as `event_frames` handed it
        out with the blob's event (the blob index is then not needed: building it reads a version-2
        file whole); RecordingError when that frame holds no such blob."""
        if at is None:
            self._load_blobs()
            assert self._blobs is not None
            if h not in self._blobs:
                raise KeyError(f"blob {h} is not in {self.path}")
            pos = self._blobs[h]
        elif not self._start <= at < self._end:
            raise self._error(f"blob {h[:12]} looked up outside the events (offset {at})", self._start)
        else:
            pos = at
        try:
            for ev in self._events_at(pos):
                if ev.get("k") == "blob" and ev.get("h") == h:
                    data = ev.get("data")
                    if not isinstance(data, str | bytes):
                        raise FrameError("blob event has no data", pos)
                    return data
            raise FrameError(f"the frame the index names holds no blob {h[:12]}", pos)
        except FrameError as exc:
            raise self._error(f"blob {h[:12]} unreadable ({_why(exc)})", pos) from None

    @property
    def data_start(self) -> int:
        """File offset of the first event frame (the first byte after the header frame)."""
        return self._start

    @property
    def data_end(self) -> int:
        """File offset where the event frames read so far end (the footer, the damage, or the end of
        what a writer has appended). `data_end <= data_start`: the file holds no events."""
        return self._end

    def event_frames(
        self,
        start: int | None = None,
        stop: int | None = None,
        *,
        trace_fields: Collection[str] | None = None,
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """(offset of the frame holding it, event) of every event in the frames in [start, stop), read
        lazily in order: `start` defaults to `data_start`, `stop` to `data_end`, and both must be frame
        boundaries (`data_start`, `data_end`, a turn's frame from `turn_frame`, or an offset this method
        handed out). A version-2 chunk's events share the chunk's offset. Format frames are skipped.

        Events come in their plain in-memory form, as from `events()`; `trace_fields` as there. Damage
        is a RecordingError raised by the iteration (with its offset), so a caller reading inside its own
        error handling says it as one line; an OSError from the file likewise."""
        pos = self._start if start is None else start
        end = self._end if stop is None else stop
        for at, _, ev in self._frames(pos, end, trace_fields=trace_fields):
            k = ev.get("k")
            if not (isinstance(k, str) and k.startswith("@")):
                yield at, ev

    def turn_frame(self, n: int) -> tuple[int, int]:
        """(offset, end) of the frame holding turn `n`'s turn event (negative n counts from the last turn),
        from the index: reading `event_frames(stop=end)` reads up to and including that turn's event.
        IndexError for a turn the recording lacks; RecordingError when that frame's header is damaged."""
        slot = self._turn_slot(n)
        pos = self._turn_offs[slot]
        try:
            return pos, pos + HEADER_SIZE + decode_header(self._pread(pos, HEADER_SIZE), pos)[0]
        except FrameError as exc:
            raise self._error(f"turn {n} unreadable ({exc})", pos) from None

    def turns_before(self, offset: int) -> list[int]:
        """The turn numbers whose turn event lies in a frame that starts before file offset `offset`
        (what can still be read of a recording damaged there), in order."""
        return self._turn_nums[: bisect.bisect_left(self._turn_offs, offset)]

    def _frames(
        self, pos: int, stop: int, tail_ok: bool = False, trace_fields: Collection[str] | None = None
    ) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(offset, end, event) of each event in the frames in [pos, stop), read in chunks of the file. A
        version-2 chunk yields each of its events with the chunk's offset and end. A partial frame before
        `stop` is corruption unless `tail_ok` (following a file that is still being written). Format
        frames other than chunks are yielded as they are (refresh() stops at the footer)."""
        for at, end, batch in self._frame_batches(pos, stop, tail_ok, trace_fields):
            for ev in batch:
                yield at, end, ev

    def _frame_batches(
        self, pos: int, stop: int, tail_ok: bool = False, trace_fields: Collection[str] | None = None
    ) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
        """_frames a frame at a time: (offset, end, its events), a chunk's events in one list (a reader
        of every event takes them a list at a time: event_list)."""
        want = _CHUNK
        header = HEADER.unpack_from
        while pos < stop:
            buf = self._pread(pos, min(stop - pos, want))
            at, need = 0, 0
            try:
                while len(buf) - at >= HEADER_SIZE:
                    length, crc = header(buf, at)  # decode_header's reading, without a slice and a call
                    if length > MAX_FRAME_BYTES:
                        decode_header(buf[at : at + HEADER_SIZE], pos + at)  # raises what it says of it
                    end = at + HEADER_SIZE + length
                    if end > len(buf):
                        need = HEADER_SIZE + length
                        break
                    obj = decode_payload(buf[at + HEADER_SIZE : end], crc, pos + at)
                    kind = obj.get("k")
                    if kind == K_CHUNK and self.version >= 2:
                        yield pos + at, pos + end, self._inflate_chunk(pos + at, obj, pos + end, trace_fields)
                    elif isinstance(kind, str) and kind.startswith("@"):
                        yield pos + at, pos + end, [obj]
                    elif self.version >= 2:
                        raise FrameError(
                            f"a version-2 recording holds an uncompressed {kind!r} frame", pos + at
                        )
                    else:
                        yield pos + at, pos + end, [self._plain(obj, pos + at)]
                    at = end
            except FrameError as exc:
                raise self._error(f"corrupt frame ({_why(exc)})", exc.offset or pos + at) from None
            if at == 0:
                if need <= len(buf) or need > stop - pos:
                    if tail_ok:
                        return
                    raise self._error("frame overruns the end of the recorded data (corrupt length)", pos)
                want = need  # one frame larger than a chunk: read it whole
            else:
                pos, want = pos + at, _CHUNK

    def events(
        self, upto_turn: int | None = None, trace_fields: Collection[str] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every event in order (blobs included, format frames not), stopping after turn `upto_turn`.

        `trace_fields`: a reader that needs only these fields of each turn's trace (`cp-inspect
        simulate`: the sections) gets traces holding only them, from a version-2 recording: the other
        fields are checked as well-formed msgpack and skipped, not built (engine/recording/lean_turns.py
        says what is and is not checked). None (the default): every trace whole."""
        stop = self._end
        last: int | None = None
        if upto_turn is not None:
            last = self._turn_nums[self._turn_slot(upto_turn)]
            stop = self.turn_frame(upto_turn)[1]
        for _, _, obj in self._frames(self._start, stop, trace_fields=trace_fields):
            if isinstance(obj.get("k"), str) and obj["k"].startswith("@"):
                raise self._error(f"format frame {obj['k']!r} among the events", self._start)
            yield obj
            if last is not None and obj.get("k") == "turn" and obj.get("turn") == last:
                return

    def event_list(self, trace_fields: Collection[str] | None = None) -> list[dict[str, Any]]:
        """list(events(trace_fields=trace_fields)), a chunk's events taken as one list (no generator
        resumed per event): the same events, and the same RecordingError where events() raises it."""
        out: list[dict[str, Any]] = []
        for _, _, batch in self._frame_batches(self._start, self._end, trace_fields=trace_fields):
            try:
                # Every event _frame_batches hands out has a str kind (_plain refuses one without): the
                # test made in C for the whole batch, ~0.4 us an event less than a loop of get and tests.
                format_frame = any(map(str.startswith, map(_KIND, batch), repeat("@")))
            except (KeyError, TypeError):  # (not so after all: each event tested as events() tests it)
                format_frame = True
            if format_frame:
                for obj in batch:
                    k = obj.get("k")
                    if isinstance(k, str) and k.startswith("@"):
                        raise self._error(f"format frame {k!r} among the events", self._start)
            out += batch
        return out

    def refresh(self) -> list[dict[str, Any]]:
        """Complete event frames appended since the last read (follow a file another process writes)."""
        size = os.fstat(self._fd).st_size
        if size == self._seen_size:
            return []
        self._seen_size = size
        self._budget = max(self._budget, INFLATE_BUDGET_FIXED + INFLATE_BUDGET_RATIO * size)
        if self.version == 1:
            if self._blobs_at is not None:
                self._load_blobs()
            elif self._blobs is None:
                self._blobs = {}
        new: list[dict[str, Any]] = []
        # A resumed writer cuts the footer off, so both are re-established from what is found below.
        self.finished, self.damage = False, None
        for pos, end, obj in self._frames(self._end, size, tail_ok=True):
            kind = obj.get("k")
            if isinstance(kind, str) and kind.startswith("@"):
                # Footer: data ends here (a resumed writer truncates back to this point, so _end stays).
                if not self._load_footer(size):
                    msg = f"index footer at offset {pos} is incomplete (the writer is closing, or was killed)"
                    self.damage = Damage(pos, size - pos, msg)
                return new
            if kind in ("turn", "blob"):
                try:
                    self._index(pos, kind, obj.get("turn" if kind == "turn" else "h"))
                except RecordingError:
                    if kind == "turn" and self._turn_offs and self._turn_offs[-1] == pos:
                        pass  # re-reading a chunk already indexed by turn number: nothing new
                    else:
                        raise
            new.append(obj)
            self._end = end
        if self._end < size:
            try:
                self._tail(self._end, size)
            except FrameError as exc:
                raise self._error(f"corrupt frame ({exc})", self._end) from None
        return new

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        # The reader holds a bare descriptor (positional reads, no file object), so one dropped without
        # close() kept it for the life of the process: a TUI or a test run that opened readers by the
        # hundred ended up past 1,024 descriptors. A file object closes itself when collected; so does this.
        fd = getattr(self, "_fd", -1)  # absent if __init__ never ran
        if fd >= 0:
            self._fd = -1
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
