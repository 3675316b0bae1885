"""`.cpsession` recordings: the journal on disk, crash-safe, with an index for random access.

On-disk layout (every byte of a file belongs to a frame of `engine.recording.frames`: u32 length, u32 crc32,
msgpack map)::

    @header | event | event | ... | @blobs | @index | @end
    └ format, version, model, ...   └──── footer, written by close() ────┘

* Every map is written with its kind `"k"` first, and for `turn` / `blob` events the turn number /
  blob hash second. A reader can therefore learn a frame's kind, turn number and hash from the
  first ~100 payload bytes (`_peek`) and seek past the rest: rebuilding the index of a file without
  footer reads ~136 bytes per frame, not the file. Frames whose prefix says nothing are decoded whole.
* Kinds starting with "@" belong to the format; the writer refuses them in events.
* `@blobs` maps blob hash -> frame offset; `@index` holds the turn numbers and their frame offsets,
  where the data ends (`data_end`) and where `@blobs` is; `@end` is a fixed-size trailer frame
  (`TRAILER_SIZE` bytes) holding the offset of `@index` as 8 raw bytes. Open reads the trailer, the
  index, and nothing else; the blob index is loaded on the first `blob()` call.
* Crash safety: each frame is handed to the OS with one write() and no user-space buffer, so a killed
  agent leaves every complete frame plus at most one partial one. The reader tells a cut-off tail
  (reported in `damage`) from corruption: the tail's bytes must be a strict prefix of one msgpack map,
  which never decodes as a complete object (msgpack is prefix-free). Anything else is corruption.
* Corruption mid-file raises `RecordingError` naming the offset; `open(..., salvage=True)` instead
  keeps every frame before it and reports the rest as damage. We do not resync past corruption: the
  length prefix is the only framing, and guessing the next boundary inside payload bytes could invent
  events. CRCs are checked whenever a frame is decoded (turn(), blob(), events(), refresh()); the
  index rebuild trusts the prefix of frames it skips, so a flipped byte in a payload surfaces when
  that frame is read.
* One writer per file, enforced with flock (released when the process dies, so `resume()` works
  right after a SIGKILL). A reader is for one thread; open one per thread.
"""

from __future__ import annotations

import bisect
import fcntl
import importlib.metadata
import os
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from engine.errors import ContextPipeError
from engine.recording.frames import HEADER_SIZE, FrameError, decode_header, decode_payload, encode_frame

FORMAT_NAME = "cpsession"
FORMAT_VERSION = 1

K_HEADER, K_BLOBS, K_INDEX, K_END = "@header", "@blobs", "@index", "@end"
_PEEK = 128  # payload bytes read per frame while rebuilding an index: k + kind + turn/hash fit in ~80
_CHUNK = 1 << 20  # sequential read size for events()/refresh()


def _trailer(index_at: int) -> bytes:
    # A bin8 payload keeps the frame the same size whatever the offset (msgpack ints are variable length).
    return encode_frame({"k": K_END, "index_at": struct.pack(">Q", index_at)})


TRAILER_SIZE = len(_trailer(0))


class RecordingError(ContextPipeError):
    """A recording cannot be written or read. The message says what, where (byte offset), and what to do."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        super().__init__(message)


@dataclass(frozen=True)
class Damage:
    """Bytes at the end of a file that could not be used: where they start, how many, and why."""

    offset: int
    lost_bytes: int
    message: str


def _engine_version() -> str:
    try:
        return importlib.metadata.version("contextpipe-inspector")
    except importlib.metadata.PackageNotFoundError:  # running from a checkout, not installed
        return "unknown"


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


class RecordingWriter:
    """Appends events to a `.cpsession` file. Thread-safe; one writer per file."""

    def __init__(self, path: str | Path, header: dict[str, Any], *, overwrite: bool = False) -> None:
        self.path = Path(path)
        head: dict[str, Any] = {"k": K_HEADER, "format": FORMAT_NAME, "version": FORMAT_VERSION}
        head.update({"engine_version": _engine_version(), "model": None, "provider": None})
        head["start_time"] = time.time()
        head.update({k: v for k, v in header.items() if k not in ("k", "format", "version")})
        frame = encode_frame(head)  # before creating the file: an unpackable header leaves nothing behind
        flags = os.O_WRONLY | os.O_CREAT | (0 if overwrite else os.O_EXCL)
        try:
            # 0600: recordings hold prompts and tool output, which may hold secrets.
            fd = os.open(self.path, flags, 0o600)
        except FileExistsError:
            raise RecordingError(
                f"{self.path} already exists: use RecordingWriter.resume() to append to it, "
                "pass overwrite=True, or choose another path"
            ) from None
        self._setup(fd, 0, {}, None)
        os.ftruncate(fd, 0)  # overwrite=True: only once we hold the lock
        self.header = head
        self._write(frame)

    def _setup(self, fd: int, pos: int, blobs: dict[str, int], last_turn: int | None) -> None:
        try:
            # Two writers would interleave frames and corrupt the file. flock dies with the process,
            # so a killed agent's file can be resumed at once.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise RecordingError(
                f"{self.path} is being written by another writer; use another path"
            ) from None
        self._fd: int | None = fd
        self._pos = pos
        self._blobs = blobs
        self._turns: list[int] = []
        self._turn_offsets: list[int] = []
        self._last_turn = last_turn
        self._lock = threading.Lock()

    @classmethod
    def resume(cls, path: str | Path) -> RecordingWriter:
        """Reopen a recording to append: the footer (or a cut-off tail) is truncated and rewritten at close."""
        self = cls.__new__(cls)
        self.path = Path(path)
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError as exc:
            raise RecordingError(f"cannot resume recording {path}: {exc.strerror}") from None
        self._setup(fd, 0, {}, None)  # lock first: the index read below must not race another writer
        try:
            with RecordingReader.open(path) as r:
                r._load_blobs()
                assert r._blobs is not None
                os.ftruncate(fd, r._end)
                os.lseek(fd, r._end, os.SEEK_SET)
                self._pos, self._blobs, self.header = r._end, dict(r._blobs), r.header
                self._turns, self._turn_offsets = list(r._turn_nums), list(r._turn_offs)
                self._last_turn = r._turn_nums[-1] if r._turn_nums else None
        except BaseException:
            os.close(fd)
            raise
        return self

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:  # one write() for a regular file; the loop only covers a short write
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as exc:
            # Cut the half-written frame off so the file stays well-formed for later appends.
            os.ftruncate(self._fd, self._pos)
            raise RecordingError(
                f"{self.path}: write failed at offset {self._pos}: {exc}", self._pos
            ) from exc
        self._pos += len(data)

    def append(self, event: dict[str, Any], frame: bytes | None = None) -> None:
        """Append one event. `frame`, if given, is `encode_frame(event)` already computed by the caller
        (the agent shares one encoding between this file and the probe); `event` must then start with
        "k" followed by "h" (blob) or "turn" (turn), which is the order written here anyway."""
        kind = event.get("k")
        key: Any = event.get("h" if kind == "blob" else "turn")
        if not isinstance(kind, str) or kind.startswith("@"):
            raise ValueError(f"event kind must be a str not starting with '@', got {kind!r}")
        with self._lock:
            if self._fd is None:
                raise RecordingError(f"{self.path}: append after close()")
            if kind == "blob":
                if not isinstance(key, str):
                    raise ValueError(f"blob event needs a str hash 'h', got {key!r}")
                if key in self._blobs:
                    return  # stored once per file: the file grows with new content only
                ordered = {"k": kind, "h": key, **event}
            elif kind == "turn":
                if not isinstance(key, int) or (self._last_turn is not None and key <= self._last_turn):
                    raise ValueError(
                        f"turn numbers must be increasing ints; got {key!r} after {self._last_turn}"
                    )
                ordered = {"k": kind, "turn": key, **event}
            else:
                ordered = {"k": kind, **event}
            pos = self._pos
            self._write(frame if frame is not None else encode_frame(ordered))
            # Indexed only once written: a failed encode or write leaves no entry for a missing frame.
            if kind == "blob":
                self._blobs[key] = pos
            elif kind == "turn":
                self._turns.append(key)
                self._turn_offsets.append(pos)
                self._last_turn = key

    def flush(self) -> None:
        """fsync. Not needed against a killed process (every frame is already in the OS), only power loss."""
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)

    def close(self) -> None:
        """Write the index footer and trailer, fsync, close. Idempotent."""
        with self._lock:
            if self._fd is None:
                return
            data_end = self._pos
            blobs = encode_frame({"k": K_BLOBS, "blobs": self._blobs})
            index_at = data_end + len(blobs)
            index = encode_frame(
                {
                    "k": K_INDEX,
                    "data_end": data_end,
                    "blobs_at": data_end,
                    "turns": self._turns,
                    "offsets": self._turn_offsets,
                }
            )
            self._write(blobs + index + _trailer(index_at))
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RecordingReader:
    """Random access to a `.cpsession` file; also follows a file that another process is still writing."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        # Every read goes through _pread and is counted: tests and benchmarks check how much open() reads.
        self.bytes_read = 0
        self.header: dict[str, Any] = {}
        self.damage: Damage | None = None
        self.finished = False  # True when the file has a valid index footer (the writer closed it)
        self._turn_nums: list[int] = []
        self._turn_offs: list[int] = []
        self._blobs: dict[str, int] | None = None
        self._blobs_at: int | None = None
        self._start = 0  # first byte after the header frame
        self._end = 0  # end of the last complete event frame read so far
        self._seen_size = -1  # file size at the last refresh(), to make polling an unchanged file free

    @classmethod
    def open(cls, path: str | Path, *, salvage: bool = False) -> RecordingReader:
        """Open via the footer when present, else rebuild the index. salvage=True keeps what precedes corruption."""
        p = Path(path)
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError as exc:
            raise RecordingError(f"cannot open recording {p}: {exc.strerror}") from None
        self = cls(p, fd)
        try:
            self._read_header()
            size = os.fstat(fd).st_size
            if not self._load_footer(size):
                self._blobs = {}
                self._scan(self._start, size, salvage)
        except BaseException:
            os.close(fd)
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
            f"{self.path}: {what} at offset {offset}. Frames before it are intact: "
            "open with salvage=True (cp-inspect: --salvage) to read them",
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
        if version != FORMAT_VERSION:
            newer = isinstance(version, int) and version > FORMAT_VERSION
            hint = "upgrade contextpipe-inspector to read it" if newer else "re-record it with this version"
            raise RecordingError(
                f"{self.path} is {FORMAT_NAME} format version {version}; this reader reads version "
                f"{FORMAT_VERSION} only: {hint}",
                0,
            )
        self.header = {k: v for k, v in head.items() if k != "k"}
        self._end = self._start

    def _load_footer(self, size: int) -> bool:
        """Use the index footer if the trailer and index frames are intact and consistent."""
        if size < self._start + TRAILER_SIZE:
            return False
        try:
            trailer, _ = self._frame(size - TRAILER_SIZE)
            (index_at,) = struct.unpack(">Q", trailer["index_at"])
            index, index_end = self._frame(index_at)
            nums, offs = index["turns"], index["offsets"]
            ok = trailer["k"] == K_END and index["k"] == K_INDEX and index_end == size - TRAILER_SIZE
            if not ok or len(nums) != len(offs):
                return False
            self._turn_nums, self._turn_offs = nums, offs
            self._end, self._blobs_at = index["data_end"], index["blobs_at"]
        except (ValueError, KeyError, TypeError, OverflowError, struct.error):
            return False  # no usable footer: the caller rebuilds the index by scanning
        self.finished = True
        return True

    def _load_blobs(self) -> None:
        if self._blobs is None:
            assert self._blobs_at is not None
            try:
                self._blobs = self._frame(self._blobs_at)[0]["blobs"]
            except FrameError as exc:
                raise self._error(f"blob index unreadable ({exc})", self._blobs_at) from None

    def _index(self, pos: int, kind: str, key: Any) -> None:
        if kind == "turn":
            if not isinstance(key, int) or (self._turn_nums and key <= self._turn_nums[-1]):
                raise self._error(f"turn number {key!r} does not follow turn {self._turn_nums[-1:]}", pos)
            self._turn_nums.append(key)
            self._turn_offs.append(pos)
        elif kind == "blob" and self._blobs is not None:
            self._blobs.setdefault(key, pos)

    # -- index rebuild -------------------------------------------------------------------------------
    def _scan(self, pos: int, size: int, salvage: bool) -> None:
        """Rebuild the index from `pos`: read each frame header plus a short payload prefix, seek past the rest."""
        prev: int | None = None
        self.damage = None
        while pos < size:
            head = self._pread(pos, HEADER_SIZE + _PEEK)
            try:
                length = decode_header(head[:HEADER_SIZE], pos)[0] if len(head) >= HEADER_SIZE else -1
                if length < 0 or pos + HEADER_SIZE + length > size:
                    return self._tail(pos, size)
                peek = _peek(head[HEADER_SIZE : HEADER_SIZE + length])
                if peek is None:  # prefix inconclusive: decode the whole frame (checks the crc too)
                    obj = self._frame(pos)[0]
                    kind = obj.get("k")
                    if not isinstance(kind, str):
                        raise FrameError("frame has no kind", pos)
                    peek = (kind, obj.get("turn" if kind == "turn" else "h"))
                if peek[0].startswith("@"):
                    # A footer the trailer check rejected: the writer was killed while closing.
                    msg = f"index footer at offset {pos} is incomplete or damaged; no events lost, index rebuilt"
                    self.damage = Damage(pos, size - pos, msg)
                    return None
                self._index(pos, *peek)
            except (FrameError, RecordingError) as exc:
                bad = prev if prev is not None and not self._crc_ok(prev) else pos
                if not salvage:
                    raise self._error(f"corrupt frame ({exc})", bad) from None
                self._truncate_index(bad)
                msg = f"corrupt frame at offset {bad} ({exc}); the {size - bad} bytes from there on were skipped"
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
        self._end = min(self._end, offset)

    def _tail(self, pos: int, size: int) -> None:
        """Classify the bytes [pos, size) that do not form a complete frame: cut-off tail, or corruption."""
        tail = self._pread(pos, size - pos)
        if len(tail) >= HEADER_SIZE:
            decode_header(tail[:HEADER_SIZE], pos)  # a length over the limit is corruption, not a cut
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
            "mid-write (or is still writing); every frame before it was recovered"
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
                raise IndexError(f"turn {n}: the recording has {len(self._turn_nums)} turns")
            return len(self._turn_nums) + n
        i = bisect.bisect_left(self._turn_nums, n)
        if i == len(self._turn_nums) or self._turn_nums[i] != n:
            raise IndexError(
                f"turn {n} is not in the recording (turns {self._turn_nums[:1]}..{self._turn_nums[-1:]})"
            )
        return i

    def turn(self, n: int) -> dict[str, Any]:
        """The `turn` event of turn number n (negative n counts from the last turn)."""
        pos = self._turn_offs[self._turn_slot(n)]
        try:
            return self._frame(pos)[0]
        except FrameError as exc:
            raise self._error(f"turn {n} unreadable ({exc})", pos) from None

    def blob(self, h: str) -> str | bytes:
        self._load_blobs()
        assert self._blobs is not None
        if h not in self._blobs:
            raise KeyError(f"blob {h} is not in {self.path}")
        try:
            data: str | bytes = self._frame(self._blobs[h])[0]["data"]
        except FrameError as exc:
            raise self._error(f"blob {h[:12]} unreadable ({exc})", self._blobs[h]) from None
        return data

    def _frames(
        self, pos: int, stop: int, tail_ok: bool = False
    ) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(offset, end, map) of each complete frame in [pos, stop), read in chunks. A partial frame before
        `stop` is corruption unless `tail_ok` (following a file that is still being written)."""
        want = _CHUNK
        while pos < stop:
            buf = self._pread(pos, min(stop - pos, want))
            at, need = 0, 0
            try:
                while len(buf) - at >= HEADER_SIZE:
                    length, crc = decode_header(buf[at : at + HEADER_SIZE], pos + at)
                    end = at + HEADER_SIZE + length
                    if end > len(buf):
                        need = HEADER_SIZE + length
                        break
                    yield pos + at, pos + end, decode_payload(buf[at + HEADER_SIZE : end], crc, pos + at)
                    at = end
            except FrameError as exc:
                raise self._error(f"corrupt frame ({exc})", exc.offset or pos + at) from None
            if at == 0:
                if need <= len(buf) or need > stop - pos:
                    if tail_ok:
                        return
                    raise self._error("frame overruns the end of the recorded data (corrupt length)", pos)
                want = need  # one frame larger than a chunk: read it whole
            else:
                pos, want = pos + at, _CHUNK

    def events(self, upto_turn: int | None = None) -> Iterator[dict[str, Any]]:
        """Every event in order (blobs included, format frames not), stopping after turn `upto_turn`."""
        stop = self._end
        if upto_turn is not None:
            pos = self._turn_offs[self._turn_slot(upto_turn)]
            try:
                stop = pos + HEADER_SIZE + decode_header(self._pread(pos, HEADER_SIZE), pos)[0]
            except FrameError as exc:
                raise self._error(f"turn {upto_turn} unreadable ({exc})", pos) from None
        for _, _, obj in self._frames(self._start, stop):
            yield obj

    def refresh(self) -> list[dict[str, Any]]:
        """Complete event frames appended since the last read (follow a file another process writes)."""
        size = os.fstat(self._fd).st_size
        if size == self._seen_size:
            return []
        self._seen_size = size
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
                self._index(pos, kind, obj.get("turn" if kind == "turn" else "h"))
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

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
