"""Which files a store has already imported, by content, so `ctx import` run twice on one file does not
add the whole session again.

A second import of the same recording appended every message a second time (84 more items from the
40-turn demo, its system prompt and task pinned twice): the windows then held each turn twice and the
store's turn count doubled, with nothing said. The mark is a row of the store's `meta` table keyed by the
file's SHA-256, written in the same batch as the items, so an import that fails leaves no mark.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.store.store import ContextStore

_PREFIX = "imported:"


def file_digest(path: Path) -> str:
    """SHA-256 of the file's bytes (read in 1 MiB pieces: a long trajectory is tens of MB)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def previous_import(store: ContextStore, digest: str) -> str | None:
    """What was recorded when a file with these bytes was imported into `store` (None: never)."""
    row = store.state.conn.execute("SELECT value FROM meta WHERE key=?", (_PREFIX + digest,)).fetchone()
    return None if row is None else str(row[0])


def mark_import(store: ContextStore, digest: str, note: str) -> None:
    """Remember the import; call inside the import's `store.batch()` so it commits with the items."""
    store.state.conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (_PREFIX + digest, note)
    )
