"""What in a store's file is not what the store writes: a row whose column holds another type (SQLite keeps
text in an INTEGER column), a counter in `meta` that is not a number, a window manifest that is not
zlib-compressed JSON of an object (or inflates past its bound).

SQLite checks its own pages (a damaged page is sqlite3.DatabaseError, said as StoreCorruptError by
`schema.translate`), not the types of what its rows hold, so a file changed by hand or by another tool
surfaced as a bare ValueError or TypeError from deep inside a read ("invalid literal for int() with base
10: 'abc'", "can only concatenate str (not "int") to str"), naming neither the file nor what to do
(benchmarks/fuzz_store.py found a dozen such places). Checking every row on every read would cost the
hot path (a reload reads every item's metadata); instead, when a read fails with such an error, this
diagnosis runs (one scan per table, on the error path only) and, if it finds a row the store never
writes, the error becomes a StoreCorruptError naming the table, the row and the column. An error it
cannot trace to the file (a caller's argument of the wrong type) is left as it was.
"""

from __future__ import annotations

import sqlite3

# table -> (a key column naming the row, {column: SQLite types the store writes there}), kept beside
# schema.py's DDL by hand: tests/test_fuzz_found.py holds the two to the same tables and columns.
WRITTEN_TYPES: dict[str, tuple[str, dict[str, tuple[str, ...]]]] = {
    "meta": ("key", {"key": ("text",), "value": ("text",)}),
    "items": (
        "id",
        {
            "id": ("integer",),
            "kind": ("text",),
            "body": ("text",),
            "hash": ("text",),
            "turn": ("integer",),
            "ts": ("real", "integer", "null"),
            "source": ("text", "null"),
            "file_hash": ("text", "null"),
            "pinned": ("integer",),
            "importance": ("real", "integer"),
        },
    ),
    "links": ("src", {"src": ("integer",), "dst": ("integer",), "kind": ("text",)}),
    "token_counts": ("hash", {"hash": ("text",), "tokenizer": ("text",), "tokens": ("integer",)}),
    "derived": ("key", {"key": ("text",), "producer": ("text",), "text": ("text",)}),
    "file_state": ("path", {"path": ("text",), "hash": ("text",)}),
    "windows": (
        "id",
        {
            "id": ("integer",),
            "turn": ("integer",),
            "lane": ("text",),
            "mode": ("text",),
            "budget": ("integer",),
            "used": ("integer",),
            "text_hash": ("text",),
            "manifest": ("blob", "text"),  # zlib-compressed JSON (text in older stores)
        },
    ),
    "bindings": ("source", {"source": ("text",), "pipe_turn": ("integer",), "window_id": ("integer",)}),
}

# Errors a read of a damaged row raises (json.JSONDecodeError is a ValueError).
ROW_ERRORS = (ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def damaged_row(conn: sqlite3.Connection) -> str | None:
    """The first value in the file the store would not have written, said for a person; None if none."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for table, (key, columns) in WRITTEN_TYPES.items():
        if table not in tables:
            continue
        present = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        for col, types in columns.items():
            if col not in present:
                return f"table {table} has no column {col}"
            allowed = ", ".join(f"'{t}'" for t in types)
            row = conn.execute(
                f"SELECT {key}, {col}, typeof({col}) FROM {table} WHERE typeof({col}) NOT IN ({allowed}) LIMIT 1"
            ).fetchone()
            if row is not None:
                return (
                    f"{table} row {_shown(row[0])}: column {col} holds {row[2]} {_shown(row[1])}, "
                    f"where the store writes {' or '.join(types)}"
                )
    if "meta" in tables:
        row = conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('turn', 'schema_version') "
            "AND (value = '' OR value GLOB '*[^0-9]*' OR length(value) > 18) LIMIT 1"
        ).fetchone()
        if row is not None:
            return f"meta {row[0]!r} is {_shown(row[1])}, not a count"
    if "windows" in tables:
        from engine.store.recorder import decode_manifest  # (it imports nothing of the store's state)

        for wid, manifest in conn.execute("SELECT id, manifest FROM windows"):
            try:
                decode_manifest(manifest)
            except (ValueError, UnicodeDecodeError) as exc:
                return f"windows row {wid}: its manifest is not what the store writes ({exc})"
    return None


def diagnose(conn: sqlite3.Connection) -> str | None:
    """damaged_row, or None when the diagnosis itself cannot read the file (the caller keeps its error)."""
    try:
        return damaged_row(conn)
    except Exception:  # (sqlite3's, or text that is not UTF-8 in the schema): never this error for theirs
        return None
