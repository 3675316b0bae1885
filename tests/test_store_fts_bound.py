"""The full-text index holds a bounded part of each body (schema.FTS_HEAD_CHARS / FTS_TAIL_CHARS):
a huge item is found by its start and its end, costs little memory to add, and comes back whole."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from engine.store import ContextStore, Kind
from engine.store.schema import FTS_CUT_WINDOW, FTS_HEAD_CHARS, FTS_TAIL_CHARS

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


# ---- a store an older version made: reindex() ------------------------------------------------------


def _old_store(db: Path) -> tuple[int, str]:
    """A store as the version before the bound left it: the whole-body trigger, and a big item it indexed
    whole (its middle word is in the index). The trigger text is the old code's, verbatim; a store made
    by that code itself (git archive f9f593f~70) behaves the same (checked by hand for store25)."""
    ContextStore(db).close()
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER items_ai")
    conn.execute(_OLD_TRIGGER)
    conn.execute("DELETE FROM meta WHERE key='fts_bound'")  # the old code never wrote it
    body = _big_body()
    cur = conn.execute(
        "INSERT INTO items(kind, body, hash, turn) VALUES ('tool_result', ?, 'h', 0)", (body,)
    )
    conn.execute("INSERT INTO items(kind, body, hash, turn) VALUES ('user', 'small parser_config item', 'h2', 0)")
    conn.commit()
    conn.close()
    assert cur.lastrowid is not None
    return cur.lastrowid, body


def test_reindex_bounds_what_an_older_version_indexed_whole(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    big, body = _old_store(db)
    store = ContextStore(db)
    try:
        assert not store.index_is_current()  # opening replaced the trigger but not the old entries
        assert _found(db, "middleword_beta") == [big]
        done = store.reindex()
        assert (done.items, done.cut) == (2, 1)
        assert done.index_after < done.index_before
        assert _found(db, "middleword_beta") == []  # the old whole-body entry is gone
        assert _found(db, "headword_alpha") == [big] and _found(db, "tailword_gamma") == [big]
        assert _found(db, "parser_config") == [big + 1]  # ordinary items are found as before
        assert store.index_is_current()
        assert store.expand(big) == body and len(store) == 2
        # New items are indexed by the trigger as before, and searches go on working.
        i = store.add("after the reindex: widget_zeta", Kind.USER)
        assert _found(db, "widget_zeta") == [i]
    finally:
        store.close()
    store = ContextStore(db)
    try:
        assert store.index_is_current()  # recorded in the file: a later open needs nothing more
    finally:
        store.close()
    conn = sqlite3.connect(db)
    try:  # FTS5's own check of its structure
        conn.execute("INSERT INTO items_fts(items_fts, rank) VALUES ('integrity-check', 0)")
    finally:
        conn.close()


def test_reindex_with_vacuum_gives_the_space_back(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    big, body = _old_store(db)
    store = ContextStore(db)
    try:
        done = store.reindex(vacuum=True)
        assert 0 < done.file_after < done.file_before
        assert store.expand(big) == body
        assert _found(db, "headword_alpha") == [big]
    finally:
        store.close()


def test_a_new_store_is_current_and_an_older_trigger_makes_it_not(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = ContextStore(db)
    assert store.index_is_current()
    store.close()
    # Another version's trigger (here the whole-body one) ran on the file since: its rows may be
    # indexed another way, so the next open no longer claims the index current.
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER items_ai")
    conn.execute(_OLD_TRIGGER)
    conn.commit()
    conn.close()
    store = ContextStore(db)
    try:
        assert not store.index_is_current()
    finally:
        store.close()


# ---- cuts at word boundaries ------------------------------------------------------------------------


def _terms(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {r[0] for r in conn.execute("SELECT term FROM items_vocab")}
    finally:
        conn.close()


def _straddling(text: str, word: str, at: int) -> str:
    """`text` (same length) with `word`, between spaces, placed so that the character at 0-based index
    `at` is in its middle."""
    start = at - len(word) // 2
    return text[: start - 1] + " " + word + " " + text[start + len(word) + 1 :]


def test_a_word_across_a_cut_is_not_indexed_as_a_fragment(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = ContextStore(db)
    try:
        size = FTS_HEAD_CHARS + FTS_TAIL_CHARS + 500_000
        body = ("lorem ipsum " * (size // 12 + 1))[:size]
        body = _straddling(body, "headcut_abcdefghijklmnop", FTS_HEAD_CHARS)
        body = _straddling(body, "tailcut_qrstuvwxyzéèàçñ", size - FTS_TAIL_CHARS)  # non-ASCII letters too
        assert len(body) == size
        assert body[FTS_HEAD_CHARS - 1].isalnum() and body[FTS_HEAD_CHARS].isalnum()  # a cut inside it
        assert body[-FTS_TAIL_CHARS - 1].isalnum() and body[-FTS_TAIL_CHARS].isalnum()
        store.add(body, Kind.TOOL_RESULT)
        terms = _terms(db)
        # The index folds case and diacritics: the tail word's end is indexed as "...xyzeeacn".
        fragments = {t for t in terms if t.startswith(("headcut", "tailcut")) or t.endswith(("mnop", "eeacn"))}
        assert fragments == set(), f"fragments indexed: {fragments}"
        assert {"lorem", "ipsum"} <= terms
    finally:
        store.close()


def test_a_word_that_ends_at_the_cut_and_a_run_without_separators(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = ContextStore(db)
    try:
        # A word whose last character is the head's last: indexed whole (the cut is a boundary already).
        word = "exactend_word"
        head = ("lorem ipsum " * (FTS_HEAD_CHARS // 12 + 1))[: FTS_HEAD_CHARS - len(word) - 1] + " " + word
        body = head + " " + "dolor sit amet " * 80_000
        i = store.add(body, Kind.TOOL_RESULT)
        assert _found(db, word) == [i]
        # A run of word characters far longer than the cut window has no boundary to move to: it is
        # cut where it falls, and the rest of the head is indexed as before.
        run = "x" * (3 * FTS_CUT_WINDOW)
        head = ("amet " * (FTS_HEAD_CHARS // 5 + 1))[: FTS_HEAD_CHARS - FTS_CUT_WINDOW] + run
        j = store.add("start_marker " + head + " " + "dolor " * 100_000, Kind.TOOL_RESULT)
        assert j in _found(db, "start_marker")
    finally:
        store.close()


def test_ctx_reindex_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from inspector.ctx_cli import ctx_app

    runner = CliRunner()
    db = tmp_path / "old.db"
    big, _ = _old_store(db)
    assert _found(db, "middleword_beta") == [big]
    r = runner.invoke(ctx_app, ["reindex", "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "reindexed 2 items, 1 of them over 1.1 M characters" in r.output
    assert "--vacuum gives it back" in r.output
    assert _found(db, "middleword_beta") == []
    r = runner.invoke(ctx_app, ["reindex", "--db", str(db)])
    assert r.exit_code == 0 and "the search index is current (2 items); nothing to do" in r.output
    r = runner.invoke(ctx_app, ["reindex", "--db", str(db), "--vacuum"])
    assert r.exit_code == 0 and "; file " in r.output, r.output
