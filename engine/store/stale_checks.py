"""The store's side of file staleness: re-hash tracked files, run a watcher, drain what it saw.

The hashing and the watcher thread live in `staleness`; this is where their results reach SQLite
(`file_state`), always on the store's own thread.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.store.staleness import StaleWatcher, file_sha, normalise
from engine.store.state import StoreState


class StaleChecks:
    """File staleness for the store; holds the optional watcher thread."""

    def __init__(self, state: StoreState) -> None:
        self.state = state
        self.watcher: StaleWatcher | None = None

    def check_stale(self, paths: Iterable[str] | None = None) -> list[int]:
        """Re-hash tracked files (or just `paths`); return ids of file reads whose content is now old."""
        todo = self.state.file_read_paths() if paths is None else sorted({normalise(p) for p in paths})
        if todo:
            with self.state.transaction() as conn:
                for p in todo:
                    conn.execute(
                        "INSERT INTO file_state(path, hash) VALUES (?, ?) ON CONFLICT(path) DO UPDATE SET hash=excluded.hash",
                        (p, file_sha(p)),
                    )
            self.state.dirty = True
        self.state.refresh()
        return sorted(self.state.stale)

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None

    def watch(self) -> StaleWatcher:
        """Start a watchfiles thread over the directories of every file read so far."""
        if self.watcher is not None:
            self.watcher.stop()
        self.watcher = StaleWatcher(self.state.file_read_paths()).start()
        return self.watcher

    def stale_ids(self) -> list[int]:
        self.drain_watcher()
        self.state.refresh()
        return sorted(self.state.stale)

    def drain_watcher(self) -> None:
        if self.watcher is not None:
            changed = self.watcher.drain()
            if changed:
                self.check_stale(changed)
