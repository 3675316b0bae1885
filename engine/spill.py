"""Spill backends: where oversized content goes, leaving a SpillReference in the prompt.

Writes are atomic (temp file + rename), so a reference never points at a half-written file.
Rehydration is fail-open: a missing or unreadable spill returns a placeholder, never an exception.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol


class SpillBackend(Protocol):
    def put(self, key: str, data: str) -> str: ...  # returns a URI; raises OSError on failure

    def get(self, key: str) -> str: ...


class MemorySpill:
    """In-process backend, used for what-if replays (no disk side effects) and tests."""

    def __init__(self, fail_keys: frozenset[str] = frozenset()) -> None:
        self._data: dict[str, str] = {}
        self.fail_keys = fail_keys  # replays reproduce spill failures recorded in the journal

    def put(self, key: str, data: str) -> str:
        if key in self.fail_keys:
            raise OSError(f"spill write for {key[:12]} failed in the recorded run")
        self._data[key] = data
        return f"spill://{key[:16]}"

    def get(self, key: str) -> str:
        return self._data[key]


class FileSpill:
    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)

    def put(self, key: str, data: str) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        final = self.dir / f"{key}.txt"
        if not final.exists():
            # Imported on the first file spill, not with the engine: tempfile (with shutil, random, bz2 and
            # lzma) costs ~4 ms of CPU to import, which in-memory spills (replay, simulate) never use.
            import tempfile

            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".spill-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, final)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        # The URI names the key, not the directory, so requests stay byte-identical across machines.
        return f"spill://{key[:16]}"

    def get(self, key: str) -> str:
        return (self.dir / f"{key}.txt").read_text(encoding="utf-8")
