"""Reading a `.cpsession` file (`RecordingReader`): opening it by its footer or rebuilding the index
of one cut off (`cpsession_index`), random access to turns, events and blobs, version 2's chunks
decompressed within a budget (`cpsession_chunks`), and following a file another process is still
writing. The layout is described in `cpsession`.
"""

from __future__ import annotations

import bisect
import os
import stat
from collections.abc import Collection, Iterator
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

from engine.recording.counts import (
    K_COUNTS,
    CountTable,
    CountTableError,
    decode_table,
)
from engine.recording.cpsession_chunks import (
    INFLATE_BUDGET_FIXED,
    INFLATE_BUDGET_RATIO,
    _Stream,
)
from engine.recording.cpsession_format import (
    K_CHUNK,
    RecordingError,
    _file_kind,
    _why,
    corrupt_frame,
)
from engine.recording.cpsession_index import Damage as Damage
from engine.recording.cpsession_index import IndexReading
from engine.recording.frames import (
    HEADER,
    HEADER_SIZE,
    MAX_FRAME_BYTES,
    FrameError,
    decode_header,
    decode_payload,
)
from engine.wording import counted

_CHUNK = 1 << 20  # sequential read size for events()/refresh()
_KIND = itemgetter("k")


class RecordingReader(IndexReading):
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
    def open(cls, path: str | Path, *, salvage: bool = False, from_end: bool = False) -> RecordingReader:
        """Open via the footer when present, else rebuild the index. salvage=True keeps what precedes corruption.

        `from_end`: a file without footer (its writer still at work: a follower's) is indexed from its end
        when it can be (cpsession_index._scan_from_end: the newest stream's chunks and a prefix of each
        earlier stream's first, not every frame), so a chunk damaged before the newest stream is found
        when it is read, as in a file with a footer, not by the open."""
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
                quick = from_end and not salvage and self.version >= 2
                if not (quick and self._scan_from_end(size)):
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
                raise self._error(corrupt_frame(exc), exc.offset or pos + at) from None
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

    def fileno(self) -> int:
        """The descriptor the file was opened (and checked) on: a follower looks at the file it reads
        through it (its size, its /proc/self/fd name), wherever the path points now. -1 once closed."""
        return self._fd

    @property
    def seen_size(self) -> int:
        """The file's size at the last refresh() (-1 before one): a file now shorter was cut under it."""
        return self._seen_size

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
                raise self._error(corrupt_frame(exc), self._end) from None
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
