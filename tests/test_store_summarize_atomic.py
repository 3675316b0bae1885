"""summarize() is one step: what the summarizer itself wrote through the store goes with the summary, or
goes away with it when the summarizer fails; what another connection wrote meanwhile is named in the
error. Real SQLite files throughout."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from engine.store import ContextStore, Kind, StoreError


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _store_with_items(db: Path, summarizer: object) -> tuple[ContextStore, list[int]]:
    store = ContextStore(db, summarizer=summarizer)  # type: ignore[arg-type]
    ids = [store.add(f"step {i}: ran the tests, 3 failed in parser_{i}", Kind.TOOL_RESULT) for i in range(4)]
    return store, ids


def test_a_summarizer_that_writes_then_raises_leaves_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    holder: list[ContextStore] = []

    def summarizer(texts: Sequence[str]) -> str:
        holder[0].add(f"summarizer log: asked the model about {len(texts)} items", Kind.MEMORY)
        raise ConnectionError("model endpoint unreachable")

    store, ids = _store_with_items(db, summarizer)
    holder.append(store)
    try:
        with pytest.raises(StoreError) as info:
            store.summarize(ids)
        msg = str(info.value)
        assert "nothing was stored" in msg and "undone too" in msg and "ConnectionError" in msg
        assert isinstance(info.value.__cause__, ConnectionError)
        assert len(store) == 4  # the summarizer's log item went with the failed step
        assert _rows(db, "SELECT count(*) FROM items") == [(4,)]
        assert _rows(db, "SELECT count(*) FROM derived") == [(0,)]
        # The store goes on: the next item takes the free id and is served with its own size.
        i = store.add("tiny", Kind.USER)
        assert i == 5 and store.get(i).body == "tiny"
        w = store.context_get(10_000, "chars", sticky=False)
        assert [e.id for e in w.entries][-1] == i
    finally:
        store.close()


def test_a_summarizer_that_writes_and_returns_empty_text_leaves_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    holder: list[ContextStore] = []

    def summarizer(texts: Sequence[str]) -> str:
        holder[0].add("summarizer log", Kind.MEMORY)
        return "   "

    store, ids = _store_with_items(db, summarizer)
    holder.append(store)
    try:
        with pytest.raises(StoreError, match="empty text for 4 items.*nothing was stored"):
            store.summarize(ids)
        assert _rows(db, "SELECT count(*) FROM items") == [(4,)]
    finally:
        store.close()


def test_a_summarizer_that_writes_and_succeeds_commits_both(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    holder: list[ContextStore] = []

    def summarizer(texts: Sequence[str]) -> str:
        holder[0].add("summarizer log", Kind.MEMORY)
        return f"{len(texts)} test runs; parser failures throughout"

    store, ids = _store_with_items(db, summarizer)
    holder.append(store)
    try:
        sid = store.summarize(ids)
        assert store.expand(sid).count("ran the tests") == 4
    finally:
        store.close()
    kinds = [r[0] for r in _rows(db, "SELECT kind FROM items WHERE id > 4 ORDER BY id")]
    assert kinds == ["memory", "summary"]


def test_writes_through_another_connection_are_named_as_kept(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    # A second store on the file with a short busy timeout: its write goes through at once, so the
    # summarize step holds no write lock while the summarizer (a model call) runs.
    other = ContextStore(db, timeout_s=0.2)

    def summarizer(texts: Sequence[str]) -> str:
        other.add("written by the other connection", Kind.MEMORY)
        raise TimeoutError("model timed out")

    store, ids = _store_with_items(db, summarizer)
    try:
        with pytest.raises(StoreError) as info:
            store.summarize(ids)
        msg = str(info.value)
        assert "1 item (#5) was added while it ran, through another connection" in msg
        assert str(db) in msg and "and stay" in msg
        assert _rows(db, "SELECT id, kind FROM items WHERE id > 4") == [(5, "memory")]
        assert len(store) == 5
    finally:
        store.close()
        other.close()


def test_a_failed_summarize_inside_a_batch_undoes_only_itself(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    holder: list[ContextStore] = []

    def summarizer(texts: Sequence[str]) -> str:
        holder[0].add("summarizer log", Kind.MEMORY)
        raise RuntimeError("quota exceeded")

    store, ids = _store_with_items(db, summarizer)
    holder.append(store)
    try:
        with store.batch():
            kept = store.add("before the summarize", Kind.USER)
            with pytest.raises(StoreError, match="quota exceeded"):
                store.summarize(ids)
            after = store.add("after the summarize", Kind.USER)
        bodies = [r[0] for r in _rows(db, "SELECT body FROM items WHERE id > 4 ORDER BY id")]
        assert bodies == ["before the summarize", "after the summarize"]
        assert (kept, after) == (5, 6)
    finally:
        store.close()


def test_an_item_after_a_rolled_back_batch_is_counted_as_itself(tmp_path: Path) -> None:
    # The token counts and rendered forms are cached by item id, and a rolled-back item's id goes to
    # the next item added: it was served with the old item's count (4 tokens counted as 2,503).
    db = tmp_path / "s.db"
    store = ContextStore(db)
    try:
        store.add("system prompt", Kind.SYSTEM, pin=True)
        with pytest.raises(RuntimeError), store.batch():
            store.add("word " * 2000, Kind.TOOL_RESULT)
            store.context_get(100_000, "chars", sticky=False)
            raise RuntimeError("import interrupted")
        j = store.add("tiny", Kind.TOOL_RESULT)
        w = store.context_get(100_000, "chars", sticky=False)
        fresh = ContextStore(db)
        try:
            w2 = fresh.context_get(100_000, "chars", sticky=False, advance_turn=False)
        finally:
            fresh.close()
        assert [(e.id, e.tokens) for e in w.entries] == [(e.id, e.tokens) for e in w2.entries]
        assert [e.text for e in w.entries if e.id == j] == ["tiny"]
        assert w.used == w2.used
    finally:
        store.close()


def test_summaries_with_the_same_words_each_stand_for_their_own_originals(tmp_path: Path) -> None:
    # A model (or a templated summarizer) may say the same thing of two stretches. The two summary
    # items were deduplicated by their text, the older dropped as "duplicate of" the newer, and with
    # its originals covered nothing of the first stretch was in any window, however large.
    db = tmp_path / "s.db"
    store = ContextStore(db, summarizer=lambda texts: "Ran the tests; nothing of note.")
    try:
        first = [store.add(f"first stretch step {i}", Kind.TOOL_RESULT) for i in range(3)]
        second = [store.add(f"second stretch step {i}", Kind.TOOL_RESULT) for i in range(3)]
        s1 = store.summarize(first)
        s2 = store.summarize(second)
        for sticky in (False, True):
            w = store.context_get(50_000, "chars", sticky=sticky)
            assert {s1, s2} <= {e.id for e in w.entries}, w.manifest()["dropped"]
            assert all(e.duplicate_of is None for e in w.entries)
        assert "first stretch step 0" in store.expand(s1) and "second stretch step 0" in store.expand(s2)
        # Identical tool results are still one group: the newest copy stands for the rest.
        a = store.add("OK", Kind.TOOL_RESULT)
        b = store.add("OK", Kind.TOOL_RESULT)
        w = store.context_get(50_000, "chars", sticky=False)
        ids = {e.id for e in w.entries}
        assert b in ids and a not in ids
    finally:
        store.close()
