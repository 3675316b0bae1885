"""Staleness: a file read remembers the file's content hash; when the file changes, the read is stale.

`check_stale` (on the store) re-hashes every tracked path. `StaleWatcher` runs watchfiles in a
daemon thread and only *collects* changed paths; the store drains them on its own thread at the
next `context_get` or `check_stale`, so the SQLite connection is never used from two threads.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Iterable
from pathlib import Path

MISSING = "missing"  # the hash recorded for a path that no longer exists


def file_sha(path: str | Path) -> str:
    """SHA-256 of the file's bytes, or MISSING if it cannot be read (deleted counts as changed)."""
    h = hashlib.sha256()
    try:
        # Only a regular file has content to hash: a FIFO blocked the open (for ever, with no writer)
        # and a device such as /dev/zero never reached its end.
        if not stat.S_ISREG(os.stat(path).st_mode):
            return MISSING
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 16), b""):
                h.update(chunk)
    except OSError:
        return MISSING
    return h.hexdigest()


def normalise(path: str | Path) -> str:
    return os.path.abspath(os.fspath(path))


class StaleWatcher:
    """Watches the directories of the given files; records which tracked files changed."""

    def __init__(self, paths: Iterable[str], debounce_ms: int = 50) -> None:
        self._tracked = frozenset(normalise(p) for p in paths)
        # Sorted so the watcher's setup does not depend on set order (only matters for logs).
        self._dirs = sorted({os.path.dirname(p) for p in self._tracked if os.path.isdir(os.path.dirname(p))})
        self._debounce = debounce_ms
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._changed: set[str] = set()
        self._event = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ctx-stale-watcher", daemon=True)

    @property
    def tracked(self) -> frozenset[str]:
        return self._tracked

    def start(self) -> StaleWatcher:
        if self._dirs:
            self._thread.start()
            # watchfiles sets up its inotify watches before yielding anything; give it a moment so a
            # change made right after start() is not missed.
            self._ready.wait(timeout=2.0)
        return self

    def _run(self) -> None:
        from watchfiles import watch

        try:
            for changes in watch(
                *self._dirs,
                stop_event=self._stop,
                debounce=self._debounce,
                step=20,
                yield_on_timeout=True,
                rust_timeout=100,
                raise_interrupt=False,
            ):
                self._ready.set()
                hits = {normalise(p) for _, p in changes} & self._tracked
                if hits:
                    with self._lock:
                        self._changed |= hits
                    self._event.set()
        finally:
            self._ready.set()

    def drain(self) -> list[str]:
        """Changed tracked paths since the last drain, sorted."""
        with self._lock:
            out = sorted(self._changed)
            self._changed.clear()
            self._event.clear()
        return out

    def wait(self, timeout: float) -> bool:
        """Block until a tracked file changed (or timeout). For tests and CLIs, not for agents."""
        return self._event.wait(timeout)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
