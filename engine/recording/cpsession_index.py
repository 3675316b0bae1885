"""A recording's index as RecordingReader.open finds it (`IndexReading`, a base of RecordingReader): the
header frame, the index footer a closed file ends with (checked against itself before it is trusted), or
the index rebuilt by scanning the frames of a file without one (each frame's header and a short payload
prefix, `_peek`; version 2's chunks list their turns), with what could not be used at the end reported as
`Damage` (a cut-off tail, corruption; `salvage=True` keeps what precedes it), or for a follower the
index of a file without one read from its end (`_scan_from_end`). refresh() extends the
same index as a followed file grows. The layout is described in `cpsession`.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from itertools import chain, islice
from operator import lt
from typing import TYPE_CHECKING, Any

import msgpack

from engine.recording.cpsession_chunks import ChunkReading
from engine.recording.cpsession_format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    K_BLOBS,
    K_CHUNK,
    K_END,
    K_HEADER,
    K_INDEX,
    K_PREV_STREAM,
    K_STREAM_AT,
    READ_VERSIONS,
    STREAM_AT_MARK,
    STREAM_AT_TAIL,
    TRAILER_SIZE,
    RecordingError,
    corrupt_frame,
    prev_stream_index,
)
from engine.recording.frames import HEADER_SIZE, MAX_FRAME_BYTES, FrameError, decode_header

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator
    from pathlib import Path


_PEEK = 128  # payload bytes read per frame while rebuilding an index: k + kind + turn/hash fit in ~80
# A stream start's prefix read from the end (_chunk_prefix): its fields before the data, with the index of
# the stream before it (~80 turns of a demo agent's in ~400 bytes); a longer one is read whole.
_PREFIX = 1024


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


class IndexReading(ChunkReading):
    """RecordingReader's index: read from the footer or rebuilt (the state is RecordingReader's, set in
    its __init__)."""

    path: Path
    _fd: int
    header: dict[str, Any]
    damage: Damage | None
    finished: bool
    _turn_nums: list[int]
    _turn_offs: list[int]
    _blobs: dict[str, int] | None
    _blobs_at: int | None
    _counts_at: int | None
    _start: int
    _end: int

    if TYPE_CHECKING:

        def _pread(self, offset: int, n: int) -> bytes: ...

        def _error(self, what: str, offset: int) -> RecordingError: ...

        def _frames(
            self, pos: int, stop: int, tail_ok: bool = False, trace_fields: Collection[str] | None = None
        ) -> Iterator[tuple[int, int, dict[str, Any]]]: ...

        @property
        def turn_count(self) -> int: ...

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

    # -- index from the end (a file without footer, opened from_end) ---------------------------------
    def _scan_from_end(self, size: int) -> bool:
        """The index of a version-2 file without footer, read from its end: the newest chunk's last bytes
        name where its stream starts (K_STREAM_AT), each stream-start chunk names the stream before it,
        with its turns and their chunks (K_PREV_STREAM), so the index is the streams' back to the first
        (a short prefix of one frame each) and the newest stream's chunks scanned as `_scan` scans them:
        ~1/80 of a file's frames, not every one. False, with nothing indexed, when the file does not end
        that way (written before session 51, cut off mid-frame, damaged): the caller scans it whole.
        The turns of the earlier streams are taken from the index their successors carry, not from their
        chunks (as a footer's index is): a damaged chunk among them is found when it is read."""
        try:
            tail = self._pread(size - STREAM_AT_TAIL, STREAM_AT_TAIL) if size >= STREAM_AT_TAIL else b""
            if tail[: len(STREAM_AT_MARK)] != STREAM_AT_MARK:
                return False
            (newest,) = struct.unpack(">Q", tail[len(STREAM_AT_MARK) :])
            if not self._start <= newest < size:
                return False
            streams: list[tuple[int, list[int], list[int]]] = []  # (start, turns, offsets), newest first
            at = newest
            while at > self._start:
                fields = self._chunk_prefix(at)
                if fields.get("s") != 1:
                    return False  # (a stream start by the writer's own word)
                prev = fields.get(K_PREV_STREAM)
                if prev is None:  # a stream written without it (resumed from an older file): scan to it
                    self._scan(self._start, at, salvage=False)
                    if self.damage is not None or self._end != at:
                        return self._forget()
                    break
                start, turns, offsets = prev_stream_index(prev, at)
                streams.append((start, turns, offsets))
                at = start
            for start, turns, offsets in reversed(streams):
                if self._streams and start <= self._streams[-1]:
                    return self._forget()
                self._streams.append(start)
                if turns and self._turn_nums and turns[0] <= self._turn_nums[-1]:
                    return self._forget()
                self._turn_nums += turns
                self._turn_offs += offsets
            self._scan(newest, size, salvage=False)
            if self.damage is not None or self._end != size or not self._streams or self._streams[-1] != newest:
                return self._forget()
        except (FrameError, RecordingError, ValueError, TypeError, struct.error, msgpack.UnpackException):
            return self._forget()
        return True

    def _forget(self) -> bool:
        """Undo what _scan_from_end indexed (the caller scans the file from its start instead)."""
        self._turn_nums, self._turn_offs, self._streams = [], [], []
        self.damage, self._end = None, self._start
        return False

    def _chunk_prefix(self, pos: int) -> dict[str, Any]:
        """The fields of the chunk frame at `pos` that come before its data, from a prefix of the frame
        (its checksum is checked when the frame is read: as `_peek`'s, the prefix is trusted here)."""
        want = _PREFIX
        while True:
            head = self._pread(pos, HEADER_SIZE + want)
            length = decode_header(head[:HEADER_SIZE], pos)[0]
            u = msgpack.Unpacker(raw=False, max_buffer_size=MAX_FRAME_BYTES)
            u.feed(head[HEADER_SIZE : HEADER_SIZE + length])
            try:
                fields: dict[str, Any] = {}
                for _ in range(u.read_map_header()):
                    key = u.unpack()
                    if key == "z":
                        break
                    fields[key] = u.unpack()
                if fields.get("k") != K_CHUNK:
                    raise FrameError("a stream start named is not a chunk", pos)
                return fields
            except msgpack.OutOfData:
                if want >= length:
                    raise FrameError("a stream start's frame is cut off", pos) from None
                want = length

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
                    named = obj.get(K_STREAM_AT)  # (written since session 51)
                    if named is not None and named != struct.pack(">Q", self._streams[-1]):
                        raise FrameError("chunk names another stream start than the one before it", pos)
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
                    raise self._error(corrupt_frame(exc), bad) from None
                self._truncate_index(bad)
                msg = f"{corrupt_frame(exc)} at offset {bad}; the {size - bad} bytes from there on were skipped"
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
