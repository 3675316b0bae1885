"""A private, append-only scratch file the engine moves old session data to (history, blobs).

What a long session no longer holds in memory must still be there when something reads it back (a
what-if that cuts shallower, a summary of a new cut). So a write is all-or-nothing from the caller's
side: `append` returns where the bytes start only once every byte is written, and raises otherwise;
the caller drops its in-memory copy only after that. A failed or cut-short write (disk full, a signal,
a crash of the writing call) leaves the file's logical end where it was, so the next write overwrites
the partial bytes and nothing indexed ever points at them.

The file is unlinked at creation (nothing is left behind, even after a crash) and reads are positional
(`os.pread`). A forked child that writes copies the file first, so parent and child never write into
each other's file (the same rule as the journal's event log).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from typing import Any

from engine.errors import ContextPipeError


class SpillReadError(ContextPipeError, OSError):
    """Data the engine moved to its scratch file could not be read back intact."""


class SpillFile:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.end = 0  # bytes written and owned; anything past it is a failed write's leftovers
        self._fd: int | None = None
        self._pid = 0

    def append(self, data: bytes) -> int:
        """Write `data` at the end; its offset. Raises OSError (ENOSPC, EIO, ...) with nothing committed."""
        fd = self._own_file()
        start = self.end
        view = memoryview(data)
        written = 0
        while written < len(data):
            n = os.pwrite(fd, view[written:], start + written)
            if n <= 0:
                raise OSError(f"could not write to the {self.prefix} scratch file (wrote 0 bytes)")
            written += n
        self.end = start + len(data)
        return start

    def read(self, start: int, size: int) -> bytes:
        fd = self._fd
        if fd is None:
            raise SpillReadError(f"the {self.prefix} scratch file is closed")
        data = os.pread(fd, size, start)
        while len(data) < size:  # a short read (a signal): read the rest
            more = os.pread(fd, size - len(data), start + len(data))
            if not more:
                raise SpillReadError(
                    f"the {self.prefix} scratch file is shorter than its index ({start + len(data)} < {start + size})"
                )
            data += more
        return data

    def _own_file(self) -> int:
        pid = os.getpid()
        if self._fd is not None and self._pid == pid:
            return self._fd
        # Imported here, on a session's first spill: tempfile (with shutil, random, bz2 and lzma) costs ~4 ms
        # of CPU to import, which a reader of recordings (`cp-inspect simulate`, replay) never spills.
        import tempfile

        fh = tempfile.TemporaryFile(prefix=f"contextpipe-{self.prefix}-")
        fd = os.dup(fh.fileno())
        fh.close()
        if self._fd is not None:  # inherited across fork: copy what is written so far
            pos = 0
            while pos < self.end:
                data = os.pread(self._fd, min(1 << 20, self.end - pos), pos)
                if not data:
                    raise OSError(f"the {self.prefix} scratch file is shorter than its index")
                pos += os.pwrite(fd, data, pos)
            os.close(self._fd)
        self._fd, self._pid = fd, pid
        return fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def warn(logger: str, msg: str, *args: object) -> None:
    """`logging.getLogger(logger).warning(msg, *args)`, reported at the caller's line. logging is imported
    on the first warning, not with the journal: its import (~4 ms of CPU) is most of what a reader of
    recordings paid for this module, and the only warnings are about a disk refusing a spill."""
    import logging

    logging.getLogger(logger).warning(msg, *args, stacklevel=2)


def checksum(data: bytes | memoryview) -> int:
    """What a record is checked against when read back: a damaged file must fail loudly, not unpickle
    into something else."""
    return zlib.crc32(data)


def same_items(log: Sequence[Any], other: object) -> bool:
    """`==` for the logs that keep part of themselves in a scratch file (history, journal): equal to any
    sequence (a list, another log) holding equal items in order, as the lists they replace are."""
    if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
        return NotImplemented  # type: ignore[no-any-return]
    return len(log) == len(other) and all(a == b for a, b in zip(log, other, strict=False))
