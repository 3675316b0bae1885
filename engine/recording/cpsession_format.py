"""The names both sides of a `.cpsession` file agree on: the format's name and versions, the kinds of
its own frames, the chunk sizes the writer keeps to and the reader checks, the trailer, and
RecordingError. The layout itself is described in `cpsession`, the entry point that re-exports these;
the writer is `cpsession_writer`, the reader `cpsession_reader`.
"""

from __future__ import annotations

import stat
import struct

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
