"""The store's in-memory mirror of its SQLite file: caches, row loading, metadata refresh, transactions.

`StoreState` is the base every part of `ContextStore` builds on. It owns the connection and every
cache, and knows when the mirror is current (this process wrote, or `PRAGMA data_version` says
another process committed). The public behaviour lives in the mixins layered on top of it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from engine.store.compaction import Summarizer, json_shape
from engine.store.config import StoreConfig
from engine.store.errors import UnknownItemError
from engine.store.items import REFERENCE_LINKS, Item, ItemMeta, Kind, LinkKind
from engine.store.schema import connect, translate
from engine.store.staleness import StaleWatcher
from engine.store.window import Shape, Window

if TYPE_CHECKING:
    from engine.store.plan import Plan

P = ParamSpec("P")
R = TypeVar("R")

_ITEM_COLUMNS = "id, kind, body, hash, turn, ts, source, file_hash, pinned, importance"


def translating(fn: Callable[P, R]) -> Callable[P, R]:
    """Public methods surface sqlite errors as StoreCorruptError / StoreLockedError with the file name."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except sqlite3.Error as exc:
            self = args[0]
            assert isinstance(self, StoreState)
            raise translate(exc, self.path, self.timeout_s) from exc

    return wrapper


class StoreState:
    """Connection, caches and the body-less item metadata that selection runs on."""

    def __init__(
        self,
        path: str | Path,
        *,
        config: StoreConfig | None = None,
        summarizer: Summarizer | None = None,
        summary_prompt_version: str = "v1",
        timeout_s: float = 5.0,
    ) -> None:
        self.path = os.fspath(path)
        self.timeout_s = timeout_s
        self.config = config or StoreConfig()
        self.summarizer = summarizer
        self.summary_prompt_version = summary_prompt_version
        self._conn = connect(self.path, timeout_s)
        self._metas: list[ItemMeta] = []
        self._by_id: dict[int, ItemMeta] = {}
        self._stale: frozenset[int] = frozenset()
        self._covering: frozenset[int] = frozenset()  # summary items that currently stand for others
        self._turn = 0
        self._dirty = True
        self._data_version = -1
        self._items: dict[int, Item] = {}  # originals are immutable, so this cache never goes stale
        self._counts: dict[str, dict[str, int]] = {}  # tokenizer -> text hash -> tokens
        self._counts_new: list[tuple[str, str, int]] = []
        self._memo: dict[tuple[Any, ...], int] = {}  # (tokenizer, id, form, variant) -> tokens
        self._last: dict[str, Window] = {}  # lane -> last window served (sticky state)
        self._is_json: dict[int, bool] = {}
        self._shapes: dict[tuple[Any, ...], Shape] = {}
        # (tokenizer, id, form, stale, query variant, duplicate_of) -> (text, tokens, kind, role):
        # an item's text in a form never changes, so a window is assembled from cached strings.
        self._forms: dict[tuple[Any, ...], tuple[str, int, str, str]] = {}
        self._gen = 0  # bumped whenever the in-memory item metadata changes
        self._has_json = False  # any JSON body: only then do summaries (and plans) depend on the query
        self._plan_cache: tuple[tuple[Any, ...], Plan] | None = None
        self._watcher: StaleWatcher | None = None
        self.last_window_id = 0  # flight-recorder row of the last window served

    # ---- transactions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception (BEGIN itself failing opens nothing)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
            self._conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # no transaction was open (BEGIN itself failed): nothing to undo

    def _read_turn(self) -> int:
        row = self._conn.execute("SELECT value FROM meta WHERE key='turn'").fetchone()
        return int(row[0]) if row else 0

    def _current_data_version(self) -> int:
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def _mirror_current(self) -> bool:
        """Is the in-memory metadata current? Then a write may patch it instead of forcing a reload."""
        return not self._dirty and self._current_data_version() == self._data_version

    # ---- rows ---------------------------------------------------------------------------------

    def _item(self, item_id: int) -> Item:
        it = self._items.get(item_id)
        if it is not None:
            return it
        row = self._conn.execute(f"SELECT {_ITEM_COLUMNS} FROM items WHERE id=?", (int(item_id),)).fetchone()
        if row is None:
            raise UnknownItemError(int(item_id), self.path)
        it = self._row_item(row)
        self._items[it.id] = it
        return it

    def _load_bodies(self) -> None:
        missing = [m.id for m in self._metas if m.id not in self._items]
        if not missing:
            return
        lo = min(missing)
        for row in self._conn.execute(f"SELECT {_ITEM_COLUMNS} FROM items WHERE id>=? ORDER BY id", (lo,)):
            it = self._row_item(row)
            self._items.setdefault(it.id, it)

    @staticmethod
    def _row_item(row: Sequence[Any]) -> Item:
        return Item(
            int(row[0]),
            Kind(row[1]),
            str(row[2]),
            str(row[3]),
            int(row[4]),
            None if row[5] is None else float(row[5]),
            row[6],
            row[7],
            bool(row[8]),
            float(row[9]),
        )

    def _originals(self, summary_id: int) -> list[int]:
        return [
            int(r[0])
            for r in self._conn.execute(
                "SELECT dst FROM links WHERE src=? AND kind=? ORDER BY dst",
                (summary_id, LinkKind.SUMMARIZES.value),
            )
        ]

    def _file_read_paths(self) -> list[str]:
        """Every path the agent has read, sorted (the files staleness tracks)."""
        return [
            str(r[0])
            for r in self._conn.execute(
                "SELECT DISTINCT source FROM items WHERE kind=? AND source IS NOT NULL ORDER BY source",
                (Kind.FILE_READ.value,),
            )
        ]

    def _json_item(self, item_id: int) -> bool:
        is_json = self._is_json.get(item_id)
        if is_json is None:
            body = self._item(item_id).body
            is_json = body.lstrip()[:1] in ("{", "[") and json_shape(body) is not None
            self._is_json[item_id] = is_json
        return is_json

    # ---- metadata refresh -----------------------------------------------------------------------

    def _refresh(self) -> None:
        """Reload body-less metadata if this process wrote, or another process committed, since last time."""
        dv = self._current_data_version()
        if not self._dirty and dv == self._data_version:
            return
        self._turn = self._read_turn()
        metas = [
            ItemMeta(int(r[0]), Kind(r[1]), str(r[2]), int(r[3]), r[4], r[5], bool(r[6]), float(r[7]))
            for r in self._conn.execute(
                "SELECT id, kind, hash, turn, source, file_hash, pinned, importance FROM items ORDER BY id"
            )
        ]
        by_id = {m.id: m for m in metas}
        refs = tuple(k.value for k in REFERENCE_LINKS)
        superseded = {
            int(r[0])
            for r in self._conn.execute("SELECT dst FROM links WHERE kind=?", (LinkKind.SUPERSEDES.value,))
        }
        covering: set[int] = set()
        for src, dst, kind in self._conn.execute("SELECT src, dst, kind FROM links ORDER BY src, dst, kind"):
            target = by_id.get(int(dst))
            if target is None:
                continue
            if kind in refs:
                target.inbound += 1
            elif kind == LinkKind.SUMMARIZES.value and int(src) not in superseded:
                covering.add(int(src))
                target.covered_by = max(target.covered_by or 0, int(src))
        for i in superseded:
            if i in by_id:
                by_id[i].superseded = True
        stale = {
            int(r[0])
            for r in self._conn.execute(
                "SELECT i.id FROM items i JOIN file_state f ON f.path = i.source "
                "WHERE i.kind=? AND i.file_hash IS NOT NULL AND i.file_hash != f.hash",
                (Kind.FILE_READ.value,),
            )
        }
        if self._stale != frozenset(stale):
            self._last.clear()  # stale flags alter stub text; let the sticky path re-read the record
        self._metas, self._by_id = metas, by_id
        self._covering = frozenset(covering)
        self._stale = frozenset(stale)
        self._load_bodies()
        self._dirty = False
        self._data_version = dv
        self._gen += 1
        self._has_json = any(
            self._json_item(m.id) for m in metas if self._items[m.id].body.lstrip()[:1] in "{["
        )
