"""The full-text index holds a bounded part of each body (schema.FTS_HEAD_CHARS / FTS_TAIL_CHARS):
a huge item is found by its start and its end, costs little memory to add, and comes back whole."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from engine.store import ContextStore, Kind
from engine.store.schema import FTS_HEAD_CHARS, FTS_TAIL_CHARS

# The trigger every store made before the bound carried (it indexed the whole body).
_OLD_TRIGGER = """CREATE TRIGGER items_ai AFTER INSERT ON items BEGIN
    INSERT INTO items_fts(rowid, body) VALUES (new.id, new.body);
END"""


def _big_body() -> str:
    filler = "lorem ipsum dolor sit amet\n"
    pad = filler * (FTS_HEAD_CHARS // len(filler) + 10)  # longer than the head on each side of the middle
    return "headword_alpha begins\n" + pad + "middleword_beta inside\n" + pad + "tailword_gamma ends"


def _found(db: Path, term: str) -> list[int]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT rowid FROM items_fts WHERE items_fts MATCH ?", (term,))]
    finally:
        conn.close()


def _check_bounded(db: Path, store: ContextStore) -> None:
    body = _big_body()
    mid = body.index("middleword_beta")
    assert mid > FTS_HEAD_CHARS and len(body) - mid > FTS_TAIL_CHARS  # outside both indexed parts
    big = store.add(body, Kind.TOOL_RESULT)
    small = store.add("an ordinary item mentioning middleword_beta and more", Kind.ASSISTANT)
    assert _found(db, "headword_alpha") == [big]
    assert _found(db, "tailword_gamma") == [big]  # the end of a log is indexed too
    assert _found(db, "middleword_beta") == [small]  # only in the big body's unindexed middle
    assert store.expand(big) == body  # the body itself is kept byte for byte


def test_new_store_indexes_head_and_tail_only(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    store = ContextStore(db)
    try:
        _check_bounded(db, store)
    finally:
        store.close()


def test_old_trigger_is_replaced_on_open(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    ContextStore(db).close()
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER items_ai")
    conn.execute(_OLD_TRIGGER)
    conn.commit()
    conn.close()
    store = ContextStore(db)
    try:
        _check_bounded(db, store)
    finally:
        store.close()
    # Opening again finds the current trigger and leaves it (one trigger, unchanged).
    ContextStore(db).close()
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT sql FROM sqlite_master WHERE type='trigger'").fetchall()
    conn.close()
    assert len(rows) == 1 and "substr" in rows[0][0]


def test_ordinary_item_is_indexed_whole(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = ContextStore(db)
    try:
        body = ("word " * (FTS_HEAD_CHARS // 5)) + "lastword_delta"
        i = store.add(body, Kind.TOOL_RESULT)
        assert _found(db, "lastword_delta") == [i]
    finally:
        store.close()


def test_adding_a_20mb_unique_token_item_has_bounded_peak_rss(tmp_path: Path) -> None:
    # Unique hex tokens are the index's worst case. Measured on this machine: +179 MB peak RSS / 3.0 s
    # indexing the whole body, +13 MB / 0.2 s bounded. A child process so the peak is this add's alone.
    code = textwrap.dedent(
        f"""
        import os, resource
        from engine.store import ContextStore, Kind
        s = ContextStore({str(tmp_path / "rss.db")!r})
        s.add("warm up", Kind.TOOL_RESULT)
        body = " ".join(os.urandom(8).hex() for _ in range(20 * 1024 * 1024 // 17))
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        i = s.add(body, Kind.TOOL_RESULT)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert s.expand(i) == body
        s.close()
        print((peak - base) // 1024)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    grew_mb = int(out.stdout.strip())
    assert grew_mb < 80, f"adding a 20 MB item grew peak RSS by {grew_mb} MB"
