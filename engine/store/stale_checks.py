"""The store's side of file staleness: re-hash tracked files, run a watcher, drain what it saw.

The hashing and the watcher thread live in `staleness`; this is where their results reach SQLite
(`file_state`), always on the store's own thread.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.store.staleness import StaleWatcher, file_sha, normalise
from engine.store.state import StoreState, translating


class StaleChecks(StoreState):
    @translating
    def check_stale(self, paths: Iterable[str] | None = None) -> list[int]:
        """Re-hash tracked files (or just `paths`); return ids of file reads whose content is now old."""
        todo = self._file_read_paths() if paths is None else sorted({normalise(p) for p in paths})
        if todo:
            with self._transaction() as conn:
                for p in todo:
                    conn.execute(
                        "INSERT INTO file_state(path, hash) VALUES (?, ?) ON CONFLICT(path) DO UPDATE SET hash=excluded.hash",
                        (p, file_sha(p)),
                    )
            self._dirty = True
        self._refresh()
        return sorted(self._stale)

    def watch(self) -> StaleWatcher:
        """Start a watchfiles thread over the directories of every file read so far."""
        if self._watcher is not None:
            self._watcher.stop()
        self._watcher = StaleWatcher(self._file_read_paths()).start()
        return self._watcher

    def stale_ids(self) -> list[int]:
        self._drain_watcher()
        self._refresh()
        return sorted(self._stale)

    def _drain_watcher(self) -> None:
        if self._watcher is not None:
            changed = self._watcher.drain()
            if changed:
                self.check_stale(changed)
