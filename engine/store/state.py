"""The store's in-memory mirror of its SQLite file: item metadata, row loading, refresh, transactions.

`StoreState` is the collaborator every other part of `ContextStore` holds (see `store`). It owns the
connection and the item mirror, and knows when the mirror is current (this process wrote, or
`PRAGMA data_version` says another process committed). It is plain shared data plus the operations
that keep it true; the forms, solver, sticky path, writer and server each hold a reference to it.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import operator
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from engine.errors import ContextPipeError
from engine.store.compaction import json_shape
from engine.store.config import StoreConfig
from engine.store.errors import StoreError, UnknownItemError
from engine.store.gc_pause import collector_paused
from engine.store.items import REFERENCE_LINKS, Item, ItemMeta, Kind, LinkKind
from engine.store.row_check import ROW_ERRORS
from engine.store.schema import connect_store, raise_if_damaged, translate
from engine.store.window import Window

P = ParamSpec("P")
R = TypeVar("R")

_ITEM_COLUMNS = "id, kind, body, hash, turn, ts, source, file_hash, pinned, importance"
# Kind by stored value: a dict look-up instead of Enum.__call__, which a reopened store paid twice per
# row (metadata, then bodies: ~10,000 calls at 5,000 items). An unknown value still goes to Kind() to
# raise its ValueError.
_KINDS: dict[str, Kind] = {k.value: k for k in Kind}


# Item ids are SQLite rowids: positive and below 2**63.
_MAX_ID = 1 << 63
_PAGE_READ = 1 << 20  # bytes of a body read at a time by a paged expand


def _kind(value: str, item_id: Any, path: str) -> Kind:
    k = _KINDS.get(value)
    if k is None:
        # The store writes only known kinds (add parses them): a plain "'x' is not a valid Kind" from a
        # reload named neither the row nor the file, nor that the file had been edited by hand.
        raise StoreError(
            f"{path}: item #{item_id} has kind {value!r}, which the store never writes (known: "
            f"{', '.join(_KINDS)}): the database was changed outside the store. Set that row's kind "
            "back to a known one, or rebuild the store with `cp-inspect ctx import`"
        )
    return k


def item_id_arg(value: Any, what: str = "an item id") -> int:
    """An item id given to a public call, as an int. A str was iterated or passed to int() deep in the
    store (summarize("abc"): "invalid literal for int()"); now it is refused as `add` refuses its
    arguments. Anything with __index__ (numpy integers) is accepted; bool is not an id."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{what} must be an item id (an int such as 12), got {value!r}")


class HasState(Protocol):
    @property
    def state(self) -> StoreState: ...


def translating(fn: Callable[P, R]) -> Callable[P, R]:
    """Public methods surface sqlite errors as StoreCorruptError / StoreLockedError with the file name,
    run one at a time (the state's lock), and refuse once the store is closed.

    Decorates methods of objects that hold a `state` (the facade and its collaborators). The lock:
    two threads sharing one store interleaved their transactions on the one connection ("cannot start
    a transaction within a transaction", an add lost, the mirror patched out of order); now the second
    waits. It is reentrant, so a public method may call another (and a summarizer may call back).
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        st = cast(HasState, args[0]).state
        with st.lock:
            if st.closed:
                raise st.closed_error()
            try:
                return fn(*args, **kwargs)
            except sqlite3.Error as exc:
                raise translate(exc, st.path, st.timeout_s) from exc
            except ROW_ERRORS as exc:
                if isinstance(exc, ContextPipeError):  # (a StoreTextError, a ConfigError: said already)
                    raise
                raise_if_damaged(exc, st.conn, st.path)
                raise

    return wrapper


class StoreState:
    """Connection and the body-less item metadata that selection runs on.

    Attributes are public to the store's collaborators (not to applications, which use the facade).
    """

    def __init__(
        self, path: str | Path, *, config: StoreConfig | None = None, timeout_s: float = 5.0
    ) -> None:
        self.path = os.fspath(path)
        self.timeout_s = timeout_s
        self.config = config or StoreConfig()
        # A store this process may not write is served from a private copy: get/expand work, adds refuse.
        self.conn, self.read_only = connect_store(self.path, timeout_s)
        self.metas: list[ItemMeta] = []
        self.by_id: dict[int, ItemMeta] = {}
        self.stale: frozenset[int] = frozenset()
        self.covering: frozenset[int] = frozenset()  # summary items that currently stand for others
        self.turn = 0
        self.dirty = True
        self.data_version = -1
        self.items: dict[int, Item] = {}  # originals are immutable, so this cache never goes stale
        self.is_json: dict[int, bool] = {}
        self.last: dict[str, Window] = {}  # lane -> last window served (sticky state)
        self.gen = 0  # bumped whenever the in-memory item metadata changes
        # Bumped only when metadata changes other than appending new items (a reload, a pin, a link):
        # solve plans extend themselves over appended items while this stays the same.
        self.layout_gen = 0
        self.has_json = False  # any JSON body: only then do summaries (and plans) depend on the query
        self.last_window_id = 0  # flight-recorder row of the last window served
        # The last window served, when it was a fresh look not recorded (context_get without
        # advance_turn writes nothing it need not): record_binding records it before binding it.
        self.pending: Window | None = None
        self.batching = False  # inside batch(): writes are savepoints of its one transaction
        # Inside step() before its first write: the transaction begins with that write (see step).
        self.begin_pending = False
        # Called when rows this connection wrote were rolled back: caches keyed by item id (token
        # counts, rendered forms) must go, since SQLite hands the ids of rolled-back rows to new ones.
        self.on_forget: list[Callable[[], None]] = []
        self.lock = threading.RLock()  # one public call at a time (see translating)
        self.closed = False

    @property
    def state(self) -> StoreState:
        return self

    def closed_error(self) -> StoreError:
        # Used after close(), the store answered from its caches (expand) or raised sqlite3's
        # ProgrammingError (len, turn), neither saying which store or what to do.
        return StoreError(f"{self.path}: this ContextStore is closed; open a new ContextStore({self.path!r}) to use it again")

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self.conn.close()

    # ---- transactions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception (BEGIN itself failing opens nothing).
        Inside a batch it is a savepoint: a write that fails undoes only itself, and the batch decides."""
        if self.batching:
            self._begin_if_pending()
            self.conn.execute("SAVEPOINT write")
            try:
                yield self.conn
                self.conn.execute("RELEASE write")
            except BaseException:
                self.conn.execute("ROLLBACK TO write")
                self.conn.execute("RELEASE write")
                raise
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException:
            self.rollback()
            raise

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Every write inside commits together or not at all: an import stopped half way (a damaged
        frame further on, Ctrl-C) must not leave half a session in the store, looking like the whole."""
        if self.batching:
            yield  # nested: the outer batch commits or rolls back
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:  # locked by another writer, say: named with the file, as writes are
            raise translate(exc, self.path, self.timeout_s) from exc
        self.batching = True
        try:
            yield
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise translate(exc, self.path, self.timeout_s) from exc
        except BaseException:
            self.rollback()
            self.forget_uncommitted()
            raise
        finally:
            self.batching = False

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """One write of the store's that runs the application's code in its middle (a summarizer): all
        of it commits, or none of it, including what that code wrote through this store. Unlike
        batch(), the transaction begins with the first write, not before: a summarizer is a model call,
        and holding the file's write lock through it would make every other process's write wait it
        out (and fail after its busy timeout). Inside a batch or another step it is a savepoint."""
        if self.batching:
            self._begin_if_pending()
            self.conn.execute("SAVEPOINT step")
            try:
                yield
                self.conn.execute("RELEASE step")
            except BaseException:
                if self.conn.in_transaction:  # SQLite may have rolled it all back already (disk full)
                    self.conn.execute("ROLLBACK TO step")
                    self.conn.execute("RELEASE step")
                self.forget_uncommitted()
                raise
            return
        self.batching = True
        self.begin_pending = True
        try:
            yield
            if not self.begin_pending:
                try:
                    self.conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    raise translate(exc, self.path, self.timeout_s) from exc
        except BaseException:
            if not self.begin_pending:
                self.rollback()
                self.forget_uncommitted()
            raise
        finally:
            self.batching = False
            self.begin_pending = False

    def _begin_if_pending(self) -> None:
        if self.begin_pending:
            self.conn.execute("BEGIN IMMEDIATE")
            self.begin_pending = False

    def forget_uncommitted(self) -> None:
        """After a batch rolled back: the mirror and the caches were patched with rows that are gone,
        and SQLite may hand their ids to new rows, so everything is read again from the file."""
        self.items.clear()
        self.is_json.clear()
        self.last.clear()
        self.pending = None
        self.dirty = True
        for forget in self.on_forget:
            forget()
        try:
            gone = self.last_window_id and not self.conn.execute(
                "SELECT 1 FROM windows WHERE id=?", (self.last_window_id,)
            ).fetchone()
        except sqlite3.Error:  # the connection is failing (the cause of the rollback): keep that error
            gone = True
        if gone:
            self.last_window_id = 0  # its row was rolled back: record_binding must not name it

    def require_writable(self, what: str) -> None:
        if self.read_only:
            raise StoreError(
                f"{self.path} is read-only (its mode or its directory's): {what} needs write access; "
                "reading it (ctx get, ctx expand) works as it is"
            )

    def rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # no transaction was open (BEGIN itself failed): nothing to undo

    def read_turn(self) -> int:
        row = self.conn.execute("SELECT value FROM meta WHERE key='turn'").fetchone()
        return int(row[0]) if row else 0

    def current_data_version(self) -> int:
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def mirror_current(self) -> bool:
        """Is the in-memory metadata current? Then a write may patch it instead of forcing a reload."""
        return not self.dirty and self.current_data_version() == self.data_version

    # ---- rows ---------------------------------------------------------------------------------

    def item(self, item_id: int) -> Item:
        it = self.items.get(item_id)
        if it is not None:
            return it
        try:  # int(): an agent's expand tool call may carry the id as text ("12"), which always worked
            item_id = int(item_id)
        except (TypeError, ValueError):  # "invalid literal for int()" named neither the id nor the call
            raise TypeError(f"an item id must be an int such as 12, got {item_id!r}") from None
        row = None
        if 0 < item_id < _MAX_ID:  # SQLite cannot even look up an id past 64 bits (OverflowError)
            row = self.conn.execute(f"SELECT {_ITEM_COLUMNS} FROM items WHERE id=?", (item_id,)).fetchone()
        if row is None:
            raise UnknownItemError(item_id, self.path)
        it = self.row_item(row)
        self.items[it.id] = it
        return it

    def body_page(self, item_id: int, offset: int, limit: int) -> tuple[Kind, int, str] | None:
        """(kind, length, characters [offset, offset + limit)) of an item's body, streamed from the file
        a megabyte at a time (a 50 MB tool output, paged, is never held whole: SQLite's substr() and
        length() would each load the whole value). Lengths and offsets count characters. None when the
        file's text is not stored as UTF-8 (then the body is read whole)."""
        row = None
        if 0 < item_id < _MAX_ID:
            row = self.conn.execute("SELECT kind FROM items WHERE id=?", (item_id,)).fetchone()
        if row is None:
            raise UnknownItemError(item_id, self.path)
        kind = _kind(row[0], item_id, self.path)
        if self.conn.execute("PRAGMA encoding").fetchone()[0] != "UTF-8":
            return None
        decode = codecs.getincrementaldecoder("utf-8")().decode
        pos = 0  # characters decoded so far
        parts: list[str] = []
        end = offset + limit
        with self.conn.blobopen("items", "body", item_id, readonly=True) as blob:
            while True:
                raw = blob.read(_PAGE_READ)
                text = decode(raw, final=not raw)
                if pos < end and pos + len(text) > offset:
                    parts.append(text[max(0, offset - pos) : end - pos])
                pos += len(text)
                if not raw:
                    break
        return kind, pos, "".join(parts)

    def item_head(self, item_id: int) -> tuple[Kind, str | None]:
        """(kind, source) of an item without reading its body (a cached item's own)."""
        it = self.items.get(item_id)
        if it is not None:
            return it.kind, it.source
        row = self.conn.execute("SELECT kind, source FROM items WHERE id=?", (item_id,)).fetchone()
        if row is None:
            raise UnknownItemError(item_id, self.path)
        return _kind(row[0], item_id, self.path), row[1]

    def load_bodies(self) -> None:
        missing = [m.id for m in self.metas if m.id not in self.items]
        if not missing:
            return
        lo = min(missing)
        for row in self.conn.execute(f"SELECT {_ITEM_COLUMNS} FROM items WHERE id>=? ORDER BY id", (lo,)):
            it = self.row_item(row)
            self.items.setdefault(it.id, it)

    def row_item(self, row: Sequence[Any]) -> Item:
        return Item(
            int(row[0]),
            _kind(row[1], row[0], self.path),
            str(row[2]),
            str(row[3]),
            int(row[4]),
            None if row[5] is None else float(row[5]),
            row[6],
            row[7],
            bool(row[8]),
            float(row[9]),
        )

    def originals(self, summary_id: int) -> list[int]:
        return [
            int(r[0])
            for r in self.conn.execute(
                "SELECT dst FROM links WHERE src=? AND kind=? ORDER BY dst",
                (summary_id, LinkKind.SUMMARIZES.value),
            )
        ]

    def file_read_paths(self) -> list[str]:
        """Every path the agent has read, sorted (the files staleness tracks)."""
        return [
            str(r[0])
            for r in self.conn.execute(
                "SELECT DISTINCT source FROM items WHERE kind=? AND source IS NOT NULL ORDER BY source",
                (Kind.FILE_READ.value,),
            )
        ]

    def json_item(self, item_id: int) -> bool:
        is_json = self.is_json.get(item_id)
        if is_json is None:
            body = self.item(item_id).body
            is_json = body.lstrip()[:1] in ("{", "[") and json_shape(body) is not None
            self.is_json[item_id] = is_json
        return is_json

    # ---- metadata refresh -----------------------------------------------------------------------

    def refresh(self) -> None:
        """Reload body-less metadata if this process wrote, or another process committed, since last time."""
        dv = self.current_data_version()
        if not self.dirty and dv == self.data_version:
            return
        with collector_paused():  # thousands of rows become long-lived objects (see gc_pause)
            self._reload(dv)

    def _reload(self, dv: int) -> None:
        self.turn = self.read_turn()
        metas = [
            ItemMeta(int(r[0]), _kind(r[1], r[0], self.path), str(r[2]), int(r[3]), r[4], r[5], bool(r[6]), float(r[7]))
            for r in self.conn.execute(
                "SELECT id, kind, hash, turn, source, file_hash, pinned, importance FROM items ORDER BY id"
            )
        ]
        by_id = {m.id: m for m in metas}
        refs = tuple(k.value for k in REFERENCE_LINKS)
        superseded = {
            int(r[0])
            for r in self.conn.execute("SELECT dst FROM links WHERE kind=?", (LinkKind.SUPERSEDES.value,))
        }
        covering: set[int] = set()
        for src, dst, kind in self.conn.execute("SELECT src, dst, kind FROM links ORDER BY src, dst, kind"):
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
            for r in self.conn.execute(
                "SELECT i.id FROM items i JOIN file_state f ON f.path = i.source "
                "WHERE i.kind=? AND i.file_hash IS NOT NULL AND i.file_hash != f.hash",
                (Kind.FILE_READ.value,),
            )
        }
        if self.stale != frozenset(stale):
            self.last.clear()  # stale flags alter stub text; let the sticky path re-read the record
        self.metas, self.by_id = metas, by_id
        self.covering = frozenset(covering)
        self.stale = frozenset(stale)
        self.load_bodies()
        self.dirty = False
        self.data_version = dv
        self.gen += 1
        self.layout_gen += 1
        self.has_json = any(self.json_item(m.id) for m in metas if self.items[m.id].body.lstrip()[:1] in "{[")
