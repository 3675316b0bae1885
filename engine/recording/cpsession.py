"""`.cpsession` recordings: the journal on disk, crash-safe, with an index for random access.

On-disk layout (every byte of a file belongs to a frame of `engine.recording.frames`: u32 length, u32 crc32,
msgpack map)::

    @header | event | event | ... | [@counts] | @blobs | @index | @end
    └ format, version, model, ...   └────── footer, written by close() ──────┘

* Every map is written with its kind `"k"` first, and for `turn` / `blob` events the turn number /
  blob hash second. A reader can therefore learn a frame's kind, turn number and hash from the
  first ~100 payload bytes (`cpsession_index._peek`) and seek past the rest: rebuilding the index of
  a file without footer reads ~136 bytes per frame, not the file. Frames whose prefix says nothing are
  decoded whole.
* Kinds starting with "@" belong to the format; the writer refuses them in events.
* `@blobs` maps blob hash -> frame offset; `@index` holds the turn numbers and their frame offsets,
  where the data ends (`data_end`) and where `@blobs` is; `@end` is a fixed-size trailer frame
  (`TRAILER_SIZE` bytes) holding the offset of `@index` as 8 raw bytes. Open reads the trailer, the
  index, and nothing else; the blob index is loaded on the first `blob()` call.
* `@counts` (optional, since the table was added; engine/recording/counts.py): the token counts the
  agent made, so a reader re-running the session need not tokenize it again. It sits between the
  events and `@blobs`; `@index` names it (`counts_at`). Readers that predate it never read that
  range, so they open such files as before; files without it read as "no table".
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
* Format version 2 (written since then) keeps this framing but compresses: the events of each turn are
  buffered and written as one `@z` chunk frame when the turn event arrives (or the buffer passes
  CHUNK_FLUSH_RAW, or on flush()/close()). A chunk's payload is the events' own frames (as version 1
  would write them, each with its crc) compressed by a zstd stream that continues across chunks, so a
  turn costs only what is new relative to the turns before it; the stream restarts every
  STREAM_RESET_RAW raw bytes, which bounds what random access must decompress before a chunk. The index
  maps turns (and blobs) to their chunk's offset and lists where streams restart. A killed agent
  loses the events of the turn in progress and keeps every complete turn. Version 1 files (one
  uncompressed frame per event, traces and blobs zlib-compressed inside) are read as before and events
  are handed out in their plain form either way, so callers never see the difference.
* A file without footer (its writer still at work) is indexed from its end when a reader asks
  (`RecordingReader.open(..., from_end=True)`: a follower attaching to a long session). Since session 51
  every chunk ends with `a`, where its stream starts (8 raw bytes, so the file's last 12 bytes name the
  newest stream's start), and a stream-start chunk holds, before its data, `p`: the stream before it (its
  start, its turns and their chunks' offsets, as differences). The reader walks back from stream start to
  stream start, reading a short prefix of each, and scans the newest stream's chunks: ~1/80 of a long
  file's frames. A file written before (or cut off mid-frame, or damaged) is scanned whole as before;
  readers that predate the fields ignore them. They cost ~1% of a shared trajectory's file.
* Every decompression is bounded: a chunk declares its raw size (refused over MAX_CHUNK_RAW, and it
  must inflate to exactly that), a version-1 blob or trace may not inflate past MAX_INFLATE, and a
  reader inflates at most INFLATE_BUDGET_FIXED + INFLATE_BUDGET_RATIO x file size in total. A bomb is
  refused with an error naming its offset before it is allocated.
* One writer per file, enforced with flock (released when the process dies, so `resume()` works
  right after a SIGKILL). A reader is for one thread; open one per thread.

This module is the format's entry point, and what callers import: the writer is in `cpsession_writer`,
the reader in `cpsession_reader` (its chunk decoding and decompression bounds in `cpsession_chunks`),
the names both agree on in `cpsession_format`.
"""

from __future__ import annotations

from engine.recording.cpsession_chunks import (
    EVENT_COST,
    INFLATE_BUDGET_FIXED,
    INFLATE_BUDGET_RATIO,
    MAX_WINDOW,
    WORST_PER_BYTE,
)
from engine.recording.cpsession_format import (
    CHUNK_FLUSH_RAW,
    FORMAT_NAME,
    FORMAT_VERSION,
    K_BLOBS,
    K_CHUNK,
    K_END,
    K_HEADER,
    K_INDEX,
    MAX_CHUNK_RAW,
    READ_VERSIONS,
    STREAM_RESET_RAW,
    TRAILER_SIZE,
    RecordingError,
    zstandard,
)
from engine.recording.cpsession_reader import Damage, RecordingReader
from engine.recording.cpsession_writer import ZSTD_LEVEL, RecordingWriter

__all__ = [
    "CHUNK_FLUSH_RAW",
    "EVENT_COST",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "INFLATE_BUDGET_FIXED",
    "INFLATE_BUDGET_RATIO",
    "K_BLOBS",
    "K_CHUNK",
    "K_END",
    "K_HEADER",
    "K_INDEX",
    "MAX_CHUNK_RAW",
    "MAX_WINDOW",
    "READ_VERSIONS",
    "STREAM_RESET_RAW",
    "TRAILER_SIZE",
    "WORST_PER_BYTE",
    "ZSTD_LEVEL",
    "Damage",
    "RecordingError",
    "RecordingReader",
    "RecordingWriter",
    "zstandard",
]
