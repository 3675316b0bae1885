"""Writing a `.cpsession` file (`RecordingWriter`): appending events crash-safely, version 2's zstd
chunks, the footer and index written at close, resuming a file a killed agent left, and parking one
whose writer waits. The layout is described in `cpsession`.
"""

from __future__ import annotations

import bisect
import fcntl
import os
import stat
import struct
import threading
import time
from pathlib import Path
from typing import Any

from engine.recording.counts import (
    counter_mark,
    counter_unmark,
    encode_table,
)
from engine.recording.cpsession_format import (
    CHUNK_FLUSH_RAW,
    FORMAT_NAME,
    FORMAT_VERSION,
    K_BLOBS,
    K_CHUNK,
    K_HEADER,
    K_INDEX,
    K_PREV_STREAM,
    K_STREAM_AT,
    READ_VERSIONS,
    STREAM_RESET_RAW,
    RecordingError,
    _file_kind,
    _trailer,
    prev_stream_field,
    zstandard,
)
from engine.recording.cpsession_reader import RecordingReader
from engine.recording.frames import (
    FrameError,
    encode_frame,
)
from engine.tokens import TokenCounter

# Level 6: every shared trajectory's file within 0.3-0.8% of level 9's (bench_recording_size: worst 33.0x
# the naive log, 5.2x its gzip -9, as at 9) for three quarters of the time a recording agent's turn spends
# compressing (pydicom-1413's chunks: ~30 against ~40 us; level 5 cost 3-4% in size, 19 is ~3% smaller
# than 9 and 10x slower).
ZSTD_LEVEL = 6


def _engine_version() -> str:
    # Imported here: only a writer asks, and importing it cost ~20 ms of every reader's start-up.
    import importlib.metadata

    try:
        return importlib.metadata.version("contextpipe-inspector")
    except importlib.metadata.PackageNotFoundError:  # running from a checkout, not installed
        return "unknown"


class RecordingWriter:
    """Appends events to a `.cpsession` file. Thread-safe; one writer per file."""

    def __init__(
        self,
        path: str | Path,
        header: dict[str, Any],
        *,
        overwrite: bool = False,
        version: int = FORMAT_VERSION,
        counter: TokenCounter | None = None,
    ) -> None:
        """`counter`: the agent's token counter; close() stores the counts it made from now on in a
        `@counts` footer frame (engine/recording/counts.py), so a reader need not tokenize again."""
        self.path = Path(path)
        if version not in READ_VERSIONS:
            raise ValueError(f"cannot write {FORMAT_NAME} version {version}; versions {READ_VERSIONS} exist")
        head: dict[str, Any] = {"k": K_HEADER, "format": FORMAT_NAME, "version": version}
        head.update({"engine_version": _engine_version(), "model": None, "provider": None})
        head["start_time"] = time.time()
        head.update({k: v for k, v in header.items() if k not in ("k", "format", "version")})
        frame = encode_frame(head)  # before creating the file: an unpackable header leaves nothing behind
        flags = os.O_WRONLY | os.O_CREAT | (0 if overwrite else os.O_EXCL)
        try:
            # 0600: recordings hold prompts and tool output, which may hold secrets.
            fd = _open_file(self.path, flags, 0o600)
        except FileExistsError:
            raise RecordingError(
                f"{self.path} already exists: use RecordingWriter.resume() to append to it, "
                "pass overwrite=True, or choose another path"
            ) from None
        except OSError as exc:
            raise RecordingError(
                f"cannot create recording {self.path}: {exc.strerror or exc}; record to a path in an "
                "existing directory you can write to"
            ) from None
        self._setup(fd, 0, {}, None)
        os.ftruncate(fd, 0)  # overwrite=True: only once we hold the lock
        self._counter = counter
        self._counter_mark = counter_mark(counter) if counter is not None else 0
        self.header = head
        self._chunked = version >= 2
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
        # The first write the OS refused (disk full, file too large, I/O error): nothing is written after
        # it (see _write), so the file holds every event before it and none after.
        self.error: RecordingError | None = None
        self._pos = pos
        self._blobs = blobs
        self._turns: list[int] = []
        self._turn_offsets: list[int] = []
        self._last_turn = last_turn
        self._lock = threading.Lock()
        self._chunked = False
        # Version 2: the events buffered for the next chunk, and the zstd stream they continue.
        self._buf: list[bytes] = []
        self._buf_len = 0
        self._buf_turns: list[int] = []
        self._buf_blobs: list[str] = []
        self._pending_blobs: set[str] = set()
        self._zc: Any = None  # zstd compressobj of the current stream; None: the next chunk starts one
        self._stream_raw = 0
        self._streams: list[int] = []
        # park(): (where the events end, where the footer ends, st_dev, st_ino) of the file let go
        self._parked: tuple[int, int, int, int] | None = None

    @classmethod
    def resume(cls, path: str | Path) -> RecordingWriter:
        """Reopen a recording to append: the footer (or a cut-off tail) is truncated and rewritten at close."""
        self = cls.__new__(cls)
        self.path = Path(path)
        # The counts of the part written before are cut off with the footer; a resumed file has none.
        self._counter, self._counter_mark = None, 0
        try:
            fd = _open_file(self.path, os.O_WRONLY)
        except OSError as exc:
            raise RecordingError(f"cannot resume recording {path}: {exc.strerror or exc}") from None
        self._setup(fd, 0, {}, None)  # lock first: the index read below must not race another writer
        try:
            with RecordingReader.open(path) as r:
                r._load_blobs()
                assert r._blobs is not None
                os.ftruncate(fd, r._end)
                os.lseek(fd, r._end, os.SEEK_SET)
                self._pos, self._blobs, self.header = r._end, dict(r._blobs), r.header
                self._turns, self._turn_offsets = list(r._turn_nums), list(r._turn_offs)
                self._chunked = r.version >= 2
                self._streams = list(r._streams)
                self._last_turn = r._turn_nums[-1] if r._turn_nums else None
        except BaseException:
            # Forgotten before it is closed: the writer's finalizer would close the number again, when
            # collected, by then perhaps another file's (the agent's own recording, say).
            self._fd = None
            os.close(fd)
            raise
        return self

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        if self.error is not None:
            raise self._stopped()
        view = memoryview(data)
        try:
            while view:  # one write() for a regular file; the loop only covers a short write
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as exc:
            self.error = RecordingError(
                f"{self.path}: write failed at offset {self._pos} ({exc.strerror or exc}): the recording "
                "stopped there and keeps every complete turn before it; free some space or record elsewhere",
                self._pos,
            )
            try:
                # Cut the half-written frame off, and write from its start again: ftruncate leaves the
                # file offset past the cut, where a later write would leave a hole of zero bytes that
                # reads as a corrupt frame.
                os.ftruncate(self._fd, self._pos)
                os.lseek(self._fd, self._pos, os.SEEK_SET)
            except OSError:
                pass  # the reader still reports the cut-off frame as an incomplete tail
            # No write after a failed one: the lost frame may hold blobs and events that later turns
            # build on (a blob is journaled once), so a file with later turns would replay wrongly.
            raise self.error from exc
        self._pos += len(data)

    def _encode(self, event: dict[str, Any]) -> bytes:
        try:
            return encode_frame(event)
        except FrameError as exc:
            # Over the frame limit. Skipping it would leave a file whose later turns name a blob or
            # event it lacks (a blob is journaled once): the recording stops here instead.
            what = "chunk of events" if event.get("k") == K_CHUNK else f"{event.get('k')!r} event"
            self.error = RecordingError(
                f"{self.path}: a {what} is too large to record ({exc}); the recording "
                f"stopped at offset {self._pos} and keeps every complete turn before it",
                self._pos,
            )
            raise self._stopped() from None

    def _stopped(self) -> RecordingError:
        # A new exception each time: re-raising one object would grow its traceback with every event
        # a long session journals after the failure.
        assert self.error is not None
        return RecordingError(str(self.error), self.error.offset)

    def append(self, event: dict[str, Any], frame: bytes | None = None) -> bytes | None:
        """Append one event. `frame`, if given, is `encode_frame(event)` already computed by the caller;
        `event` must then start with "k" followed by "h" (blob) or "turn" (turn), which is the order
        written here anyway. Returns the frame written (so the agent can hand the same bytes to its
        probe instead of encoding the event twice), or None for a blob this file already holds."""
        kind = event.get("k")
        key: Any = event.get("h" if kind == "blob" else "turn")
        if not isinstance(kind, str) or kind.startswith("@"):
            raise ValueError(f"event kind must be a str not starting with '@', got {kind!r}")
        with self._lock:
            if self._fd is None:
                if self.error is not None:  # stopped (a footer park() could not write): say why
                    raise self._stopped()
                if self._parked is None:
                    raise RecordingError(f"{self.path}: append after close()")
                self._unpark()
            if self.error is not None:
                raise self._stopped()
            if kind == "blob":
                if not isinstance(key, str):
                    raise ValueError(f"blob event needs a str hash 'h', got {key!r}")
                if key in self._blobs:
                    return None  # stored once per file: the file grows with new content only
                ordered = {"k": kind, "h": key, **event}
            elif kind == "turn":
                if not isinstance(key, int) or (self._last_turn is not None and key <= self._last_turn):
                    raise ValueError(
                        f"turn numbers must be increasing ints; got {key!r} after {self._last_turn}"
                    )
                ordered = {"k": kind, "turn": key, **event}
            else:
                ordered = {"k": kind, **event}
            if self._chunked:
                if kind == "blob" and key in self._pending_blobs:
                    return None
                data = frame if frame is not None else self._encode(ordered)
                if self._buf and self._buf_len + len(data) > CHUNK_FLUSH_RAW:
                    self._flush_chunk()
                self._buf.append(data)
                self._buf_len += len(data)
                if kind == "blob":
                    self._buf_blobs.append(key)
                    self._pending_blobs.add(key)
                elif kind == "turn":
                    self._buf_turns.append(key)
                    self._last_turn = key
                    self._flush_chunk()  # a turn is complete: make it durable and visible to followers
                return data
            pos = self._pos
            data = frame if frame is not None else self._encode(ordered)
            self._write(data)
            # Indexed only once written: a failed encode or write leaves no entry for a missing frame.
            if kind == "blob":
                self._blobs[key] = pos
            elif kind == "turn":
                self._turns.append(key)
                self._turn_offsets.append(pos)
                self._last_turn = key
            return data

    def _flush_chunk(self) -> None:
        """Compress the buffered events into one chunk frame (caller holds the lock)."""
        if not self._buf:
            return
        raw = b"".join(self._buf)
        # (No stream written yet with a compressor already made: its start chunk was lost to an interrupt.)
        start = self._zc is None or self._stream_raw >= STREAM_RESET_RAW or not self._streams
        try:
            if start:
                self._zc = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj()
                self._stream_raw = 0
            z = self._zc.compress(raw) + self._zc.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        except BaseException:
            # A Ctrl-C lands as compress() returns, most likely: the stream has taken the chunk's bytes and
            # written none out. The events stay buffered and go into a stream started afresh; the same
            # stream fed them again and the file held them twice, read back without a word.
            self._zc = None
            raise
        self._stream_raw += len(raw)
        turns, blobs = self._buf_turns, self._buf_blobs
        self._buf, self._buf_len, self._buf_turns, self._buf_blobs = [], 0, [], []
        self._pending_blobs.clear()
        pos = self._pos
        chunk: dict[str, Any] = {"k": K_CHUNK, "s": int(start), "n": len(raw), "t": turns}
        if start and self._streams:
            chunk[K_PREV_STREAM] = self._prev_stream(pos)
        chunk["z"] = z
        # Last, at a fixed size: the file's last bytes name where the newest stream starts (see cpsession).
        chunk[K_STREAM_AT] = struct.pack(">Q", pos if start else self._streams[-1])
        try:
            self._write(self._encode(chunk))
        except BaseException:  # (a write refused, a chunk too large, or Ctrl-C in the middle)
            self._zc = None  # the stream's state includes the lost chunk: the next chunk starts afresh
            raise
        if start:
            self._streams.append(pos)
        for h in blobs:
            self._blobs[h] = pos
        for t in turns:
            self._turns.append(t)
            self._turn_offsets.append(pos)

    def _prev_stream(self, pos: int) -> list[Any]:
        """A stream-start chunk's index of the stream before it (cpsession_format.prev_stream_field): its
        start, and its turns and their chunks' offsets as deltas (a turn 1 after the last, a chunk a few
        KB on, fit a byte or three each)."""
        prev = self._streams[-1]
        i = bisect.bisect_left(self._turn_offsets, prev)
        return prev_stream_field(prev, self._turns[i:], self._turn_offsets[i:])

    def flush(self) -> None:
        """fsync. Not needed against a killed process (every frame is already in the OS), only power loss."""
        with self._lock:
            if self._fd is not None:
                self._flush_chunk()
                os.fsync(self._fd)

    def close(self) -> None:
        """Write the index footer and trailer, fsync, close. Idempotent. The file is closed even when a
        write fails; the RecordingError is raised after. After a failed write (see _write) no footer is
        written: the file ends where the last write succeeded, a file without a footer that readers open
        by rebuilding its index, as one whose writer was killed."""
        with self._lock:
            if self._fd is None:
                if self._parked is not None:  # parked: the file was finished then, and nothing came since
                    self._parked = None
                    self._unmark()
                return
            fd = self._fd
            try:
                if self.error is not None:
                    raise self._stopped()
                self._close_footer()
            finally:
                self._unmark()
                self._fd = None
                os.close(fd)

    def _unmark(self) -> None:
        if self._counter is not None:
            counter_unmark(self._counter)
            self._counter = None

    def park(self) -> bool:
        """Finish the file as close() does and let its descriptor go, keeping what appending needs: the
        next append() reopens it, cuts the footer off and goes on where the events ended (a follower reads
        on as it does after resume()). For a writer that may sit idle for long, such as a proxy session
        whose agent went away: meanwhile the file is complete (a reader opens it by its footer, verify
        calls it closed) and holds no descriptor. Not synced to disk (close() and flush() do that): a
        parked file survives its process being killed, as every written frame does.

        False when there is nothing to park: closed, already parked, or stopped by a failed write. A
        footer that cannot be written stops the recording as a failed write does, and is raised."""
        with self._lock:
            if self._fd is None or self.error is not None:
                return False
            fd = self._fd
            try:
                self._flush_chunk()
                data_end = self._pos
                self._close_footer(sync=False)
                st = os.fstat(fd)
            except BaseException:
                self._unmark()
                self._fd = None
                os.close(fd)
                raise
            # The footer is cut off again when appending resumes: the next frame goes where it begins.
            self._parked = (data_end, self._pos, st.st_dev, st.st_ino)
            self._pos = data_end
            self._fd = None
            # The stream's compressor holds its window and tables: ~2.5 MB of RSS each at ZSTD_LEVEL
            # (measured: a proxy that parked 48 sessions' files grew 2.9 MB a session with them kept, 0.35
            # without). A parked writer may never append again (its agent went away); if it does, its next
            # chunk starts a new stream, as after a failed write, and gives up only the back-references
            # to the chunks before it.
            self._zc = None
            os.close(fd)  # releases the flock too: taken again on reopening
            return True

    @property
    def parked(self) -> bool:
        return self._parked is not None

    def _unpark(self) -> None:
        """Reopen a parked file to append (caller holds the lock). Only the file this writer finished: one
        replaced, moved away, or written since (another writer's lock, another size) is left as it is and
        the recording stops, as after a failed write: it keeps every turn it held when parked."""
        assert self._parked is not None
        data_end, footer_end, dev, ino = self._parked
        self._parked = None
        why = ""
        fd = -1
        try:
            fd = _open_file(self.path, os.O_WRONLY)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (dev, ino):
                why = "it was replaced or moved while the writer was idle"
            elif st.st_size != footer_end:
                why = f"it was changed while the writer was idle ({st.st_size} bytes, not the {footer_end} written)"
            else:
                os.ftruncate(fd, data_end)
                os.lseek(fd, data_end, os.SEEK_SET)
                self._fd, self._pos = fd, data_end
                return
        except BlockingIOError:
            why = "another writer holds it"
        except (OSError, RecordingError) as exc:
            why = f"it cannot be reopened ({getattr(exc, 'strerror', None) or exc})"
        if fd >= 0:
            os.close(fd)
        self._unmark()
        self.error = RecordingError(
            f"{self.path}: not appended to: {why}. The recording stopped there: the file keeps every turn "
            "written before it went idle",
            data_end,
        )
        raise self._stopped()

    def _close_footer(self, sync: bool = True) -> None:
        self._flush_chunk()
        data_end = self._pos
        # The token counts sit between the events and the blob map: a reader that predates them
        # never reads [data_end, blobs_at), so older readers open these files as before.
        counts = self._counts_frame()
        blobs_at = data_end + len(counts)
        # Version 2 leaves the blob map out (hashes do not compress; a reader rebuilds it when asked).
        blobs = encode_frame({"k": K_BLOBS, "blobs": {} if self._chunked else self._blobs})
        index_at = blobs_at + len(blobs)
        index = encode_frame(
            {
                "k": K_INDEX,
                "data_end": data_end,
                "blobs_at": blobs_at,
                "turns": self._turns,
                "offsets": self._turn_offsets,
                **({"streams": self._streams} if self._chunked else {}),
                **({"counts_at": data_end} if counts else {}),
            }
        )
        self._write(counts + blobs + index + _trailer(index_at))
        assert self._fd is not None
        if not sync:
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise RecordingError(
                f"{self.path}: could not sync the recording to disk ({exc.strerror or exc})"
            ) from exc

    def _counts_frame(self) -> bytes:
        """The `@counts` frame, or b"" when there is no counter or nothing to carry. Never fails a close:
        a table that cannot be written only means a reader counts again."""
        if self._counter is None:
            return b""
        try:
            table = encode_table(self._counter, self._counter_mark)
            return encode_frame(table) if table is not None else b""
        except (FrameError, RuntimeError, ValueError, TypeError):  # too large, or counted into meanwhile
            return b""

    def __del__(self) -> None:
        # A writer dropped without close() (or park()) kept its descriptor, and its lock on the file, for
        # the life of the process. When collected it lets both go and writes nothing: the events buffered
        # since the last turn's chunk (version 2: a turn flushes its chunk, so at most what followed the
        # last turn, its usage say) are dropped, and no footer is written. The file is then what a killed
        # writer leaves: every turn appended before, read by rebuilding the index (resume() appends to
        # it). Writing the buffer and the footer here would mean compressing and writing from wherever
        # the collector happens to run, at interpreter shutdown too; a write that failed there could not
        # be reported to anyone.
        fd = getattr(self, "_fd", None)  # absent if __init__ failed before _setup
        if fd is not None:
            self._fd = None
            try:
                os.close(fd)  # (the flock goes with it)
            except OSError:
                pass
        if getattr(self, "_counter", None) is not None:
            self._unmark()  # the shared counter need not keep every count for a table never written

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_file(path: Path, flags: int, mode: int = 0o600) -> int:
    """os.open for a recording, refusing what is not a regular file (O_NONBLOCK: a FIFO would otherwise
    block the open until another process opens its other end)."""
    try:
        st: os.stat_result | None = os.stat(path)
    except OSError:
        st = None  # not there (yet): the open below creates it or says why not
    if st is None or stat.S_ISREG(st.st_mode):
        fd = os.open(path, flags | os.O_NONBLOCK, mode)
        st = os.fstat(fd)  # what was opened, should the path have changed since
        if stat.S_ISREG(st.st_mode):
            os.set_blocking(fd, True)
            return fd
        os.close(fd)
    raise RecordingError(
        f"{path} is {_file_kind(st.st_mode)}, not a recording file: give the path of a .cpsession file"
    )
