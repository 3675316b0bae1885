"""The names both sides of a `.cpsession` file agree on: the format's name and versions, the kinds of
its own frames, the chunk sizes the writer keeps to and the reader checks, the trailer, and
RecordingError. The layout itself is described in `cpsession`, the entry point that re-exports these;
the writer is `cpsession_writer`, the reader `cpsession_reader`.
"""

from __future__ import annotations

import stat
import struct
from array import array
from itertools import accumulate
from typing import Any

from engine.errors import ContextPipeError
from engine.recording.frames import (
    HEADER_SIZE,
    MAX_FRAME_BYTES,
    encode_frame,
    pack_payload,
)
from engine.recording.zstd_backend import load as _load_zstd

# zstandard's C backend without the package's __init__ (its `platform` import: zstd_backend.py).
zstandard = _load_zstd()

FORMAT_NAME = "cpsession"
FORMAT_VERSION = 2  # what the writer writes; READ_VERSIONS are read
READ_VERSIONS = (1, 2)

K_HEADER, K_BLOBS, K_INDEX, K_END, K_CHUNK = "@header", "@blobs", "@index", "@end", "@z"
CHUNK_FLUSH_RAW = 1 << 20  # a chunk is written before its buffered events pass this many bytes
STREAM_RESET_RAW = 256 << 10  # a new zstd stream after this many raw bytes: bounds a random access
MAX_CHUNK_RAW = MAX_FRAME_BYTES + CHUNK_FLUSH_RAW  # one event up to a frame's limit, plus the buffer

# A chunk's last field (written since session 51): where its zstd stream starts, 8 raw bytes, so a file
# whose newest frame is a whole chunk ends with them, after this marker (the key, a bin8 of 8 bytes).
K_STREAM_AT = "a"
STREAM_AT_MARK = b"\xa1a\xc4\x08"
STREAM_AT_TAIL = len(STREAM_AT_MARK) + 8
# A stream-start chunk's field before its data: the stream before it (prev_stream_field).
K_PREV_STREAM = "p"


def prev_stream_field(start: int, turns: list[int], offsets: list[int]) -> list[Any]:
    """[the previous stream's start, its turn numbers, their chunks' offsets], each list as its first
    value then the differences (a turn a chunk: 1 and a chunk's length, a byte and ~3)."""
    return [start, _deltas(turns), _deltas([start, *offsets])[1:]]


def prev_stream_index(field: Any, before: int) -> tuple[int, list[int], list[int]]:
    """prev_stream_field read back and checked against the stream start it is in (`before`): (start,
    turns, offsets), the turns increasing, the offsets non-decreasing, all within [start, before).
    ValueError when it is not that."""
    if not (isinstance(field, list) and len(field) == 3):
        raise ValueError("not a stream index")
    start, dt, do = field
    if type(start) is not int or not 0 <= start < before:
        raise ValueError("a stream index names a start that is not before its stream")
    if not (isinstance(dt, list) and isinstance(do, list) and len(dt) == len(do)):
        raise ValueError("not a stream index")
    try:  # (a typed array checks every value is an int, in C: ~5x a set of their types)
        steps, gaps = array("q", dt), array("q", do)
    except (TypeError, OverflowError):
        raise ValueError("a stream index holds what is not a turn number or an offset") from None
    if min(steps[1:], default=1) < 1 or min(gaps, default=0) < 0:
        raise ValueError("a stream index's turns or offsets go back")
    if steps and steps[0] < 0:  # (turns count from 0: a flipped byte read as -1 indexed a turn no file has)
        raise ValueError("a stream index names a turn before turn 0")
    offsets = list(accumulate(gaps, initial=start))
    del offsets[0]
    if offsets and offsets[-1] >= before:
        raise ValueError("a stream index's offsets run past its stream")
    return start, list(accumulate(steps)), offsets


def _deltas(xs: list[int]) -> list[int]:
    return [b - a for a, b in zip([0, *xs], xs, strict=False)]


def _trailer(index_at: int) -> bytes:
    # A bin8 payload keeps the frame the same size whatever the offset (msgpack ints are variable length).
    return encode_frame({"k": K_END, "index_at": struct.pack(">Q", index_at)})


# Sized with msgpack's encoder (the same bytes as the fast one's, see frames.pack_payload_fast), which
# a reader imports anyway: the fast encoder is loaded by the first frame written, not by every import.
TRAILER_SIZE = HEADER_SIZE + len(pack_payload({"k": K_END, "index_at": struct.pack(">Q", 0)}))


class RecordingError(ContextPipeError):
    """A recording cannot be written or read. The message says what, where (byte offset), and what to do."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        super().__init__(message)


def _file_kind(mode: int) -> str:
    kinds = [
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ]
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _why(exc: Exception) -> str:
    """A FrameError's message without its own ' at offset N' suffix (the caller names the offset)."""
    text = str(exc)
    offset = getattr(exc, "offset", None)
    suffix = f" at offset {offset}"
    return text[: -len(suffix)] if offset is not None and text.endswith(suffix) else text


def corrupt_frame(exc: Exception) -> str:
    """"corrupt frame (WHY)" for a FrameError: its own "(corrupt frame)" dropped, or a checksum fault read
    "corrupt frame (checksum mismatch (corrupt frame))"."""
    return f"corrupt frame ({_why(exc).removesuffix(' (corrupt frame)')})"
