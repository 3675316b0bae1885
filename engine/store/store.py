"""The `ContextStore` facade: add originals, link them, and serve explained, budgeted windows.

The facade holds a few named collaborators, each in the module named for it, and delegates to them:

    state      (state)         connection, item metadata mirror, row loading, refresh, transactions
    forms      (forms)         token counts and each item's text per form; window entries and windows
    planner    (solve_plan)    the cached `SolvePlan` a fresh solve runs on
    solver     (solve)         the fresh solve (scores + knapsack)
    sticky     (sticky)        continuing a lane's previous window
    staleness  (stale_checks)  check_stale, watch, stale_ids
    writer     (writes)        add, add_file_read, link, pin, set_importance
    summaries  (summaries)     summarize, collapse_subtask
    server     (serving)       context_get: sticky or fresh, recorded, turn moved on

Every collaborator shares the one `StoreState`; none inherits from another. Reading items and the
flight recorder's queries are here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from engine.store import recorder, schema
from engine.store.budget import MAX_BUDGET, parse_budget, tokenizer_for
from engine.store.compaction import Summarizer, full_prefix, render_full
from engine.store.config import StoreConfig
from engine.store.errors import StoreError
from engine.store.forms import Forms
from engine.store.items import Item, Kind, LinkKind
from engine.store.paging import (
    EXPAND_PAGE_CHARS,
    ExpandPage,
    Piece,
    check_window,
    cut,
    page_of,
    page_of_pieces,
    past_end,
)
from engine.store.serving import Server
from engine.store.solve import Solver
from engine.store.solve_plan import Planner
from engine.store.stale_checks import StaleChecks
from engine.store.staleness import StaleWatcher
from engine.store.state import StoreState, translating
from engine.store.sticky import Sticky
from engine.store.summaries import Summaries
from engine.store.window import Window
from engine.store.writes import Writer
from engine.tokens import Budget, Tokenizer

__all__ = ["MAX_BUDGET", "ContextStore", "ExpandPage", "Reindexed", "parse_budget", "tokenizer_for"]

_ORIGINALS_SEPARATOR = "\n\n"  # between a summary's originals in expand() (and its pages)


@dataclass(frozen=True)
class Reindexed:
    """What ContextStore.reindex did. Sizes in bytes; file sizes only when it vacuumed (else 0)."""

    items: int  # items indexed
    cut: int  # of them, bodies over the bound: only their head and tail are indexed
    index_before: int
    index_after: int
    file_before: int = 0
    file_after: int = 0


class ContextStore:
    """One SQLite file per run. Originals are never rewritten; windows, stubs and summaries are views.

    Threads may share one ContextStore: its public calls run one at a time, and a batch() holds the
    others off until it ends. Several processes may share the file; SQLite's WAL mode and the busy
    timeout arbitrate.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        config: StoreConfig | None = None,
        summarizer: Summarizer | None = None,
        summary_prompt_version: str = "v1",
        timeout_s: float = 5.0,
    ) -> None:
        self.state = StoreState(path, config=config, timeout_s=timeout_s)
        self.forms = Forms(self.state)
        self.planner = Planner(self.state, self.forms)
        self.solver = Solver(self.state, self.forms, self.planner)
        self.sticky = Sticky(self.state, self.forms)
        self.staleness = StaleChecks(self.state)
        self.writer = Writer(self.state)
        self.summaries = Summaries(self.state, self.writer, summarizer, summary_prompt_version)
        self.server = Server(self.state, self.forms, self.solver, self.sticky, self.staleness)

    # ---- configuration ------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self.state.path

    @property
    def timeout_s(self) -> float:
        return self.state.timeout_s

    @property
    def config(self) -> StoreConfig:
        return self.state.config

    @property
    def summarizer(self) -> Summarizer | None:
        return self.summaries.summarizer

    @property
    def last_window_id(self) -> int:
        """Flight-recorder row of the last window served (0 before the first)."""
        return self.state.last_window_id

    # ---- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file. Closing twice is harmless; any other call afterwards raises StoreError."""
        with self.state.lock:
            self.staleness.stop()
            self.state.close()

    def __enter__(self) -> ContextStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing ------------------------------------------------------------------------------

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """`with store.batch(): ...`: the writes inside commit together when the block ends, or none of
        them if it raises (an import that fails or is interrupted half way leaves the store as it was).
        Nested batches join the outer one."""
        return self._batch()

    @contextlib.contextmanager
    def _batch(self) -> Iterator[None]:
        st = self.state
        with st.lock:  # held to the end: another thread's write would join the batch (or its rollback)
            if st.closed:
                raise st.closed_error()
            st.require_writable("a batch of writes")
            with st.batch():
                yield

    @translating
    def add(
        self,
        body: str,
        kind: Kind | str = Kind.USER,
        *,
        pin: bool = False,
        importance: float = 0.0,
        source: str | None = None,
        file_hash: str | None = None,
        timestamp: float | None = None,
        links: Iterable[tuple[LinkKind | str, int]] = (),
    ) -> int:
        """Store an original and return its id. `links` are (kind, target id) from the new item."""
        return self.writer.add(
            body,
            kind,
            pin=pin,
            importance=importance,
            source=source,
            file_hash=file_hash,
            timestamp=timestamp,
            links=links,
        )

    @translating
    def add_file_read(self, path: str | Path, body: str | None = None, **kw: Any) -> int:
        """Record that the agent read `path` (its current bytes are hashed for staleness checks)."""
        return self.writer.add_file_read(path, body, **kw)

    @translating
    def link(self, src: int, dst: int, kind: LinkKind | str = LinkKind.CITES) -> None:
        self.writer.link(src, dst, kind)

    @translating
    def pin(self, item_id: int, pinned: bool = True) -> None:
        self.writer.pin(item_id, pinned)

    @translating
    def set_importance(self, item_id: int, importance: float) -> None:
        self.writer.set_importance(item_id, importance)

    @translating
    def summarize(self, ids: Sequence[int], *, roll_from: int | None = None) -> int:
        """Summarise items through the application's callback into a new summary item (see `summaries`)."""
        return self.summaries.summarize(ids, roll_from=roll_from)

    @translating
    def collapse_subtask(self, step_ids: Sequence[int], result_id: int) -> int:
        """A finished subtask becomes one item: its result plus a link to its steps (no model needed)."""
        return self.summaries.collapse_subtask(step_ids, result_id)

    # ---- staleness ------------------------------------------------------------------------------

    @translating
    def check_stale(self, paths: Iterable[str] | None = None) -> list[int]:
        """Re-hash tracked files (or just `paths`); return ids of file reads whose content is now old."""
        return self.staleness.check_stale(paths)

    @translating
    def watch(self) -> StaleWatcher:
        """Start a watchfiles thread over the directories of every file read so far."""
        return self.staleness.watch()

    @translating
    def stale_ids(self) -> list[int]:
        return self.staleness.stale_ids()

    # ---- serving ------------------------------------------------------------------------------

    @translating
    def context_get(
        self,
        budget: int | Budget,
        model: str | Tokenizer | None = None,
        query: str | None = None,
        *,
        sticky: bool = True,
        advance_turn: bool = True,
    ) -> Window:
        """Serve a window that fits `budget`: pins first (id order), then history in time order.

        sticky=True (default): reuse the previous window of this (tokenizer, budget) lane plus the
        items added since, and re-solve only when that would overflow; a re-solve fills to
        `resolve_fill` of the budget so the next turns can append again (the provider's prefix cache
        breaks once per compaction, not once per turn). sticky=False solves from scratch.
        With advance_turn (default) the store's turn counter moves on and the window is recorded.
        Without it, a get that would write nothing new takes no write lock, so it is served while
        another process holds a long write (a batch, `ctx import`): a fresh window (sticky=False) is
        then not recorded and does not become the lane's sticky window (record_binding records it),
        and a sticky window that appended nothing is the lane's recorded window again. A sticky get
        that changed the window records it, as every get with advance_turn does.
        """
        if query is not None and not isinstance(query, str):  # an AttributeError from deep in the solve
            raise TypeError(f"query must be text or None, got {type(query).__name__}")
        if model is not None and not isinstance(model, str) and not callable(getattr(model, "count", None)):
            raise TypeError(f"model must be a model name, a Tokenizer or None, got {type(model).__name__}")
        return self.server.context_get(budget, model, query, sticky=sticky, advance_turn=advance_turn)

    # ---- reading ----------------------------------------------------------------------------

    @translating
    def get(self, item_id: int) -> Item:
        """The item as stored now. Bodies never change, so the cached row is reused, but its pin and
        importance are taken from the metadata refresh() keeps current: another process may have
        changed them since the row was cached (windows already followed; get() did not)."""
        st = self.state
        st.refresh()
        it = st.item(item_id)
        m = st.by_id.get(it.id)
        if m is not None and (m.pinned != it.pinned or m.importance != it.importance):
            it = replace(it, pinned=m.pinned, importance=m.importance)
            st.items[it.id] = it
        return it

    @translating
    def expand(self, item_id: int) -> str:
        """The original behind a stub or summary. For a summary item: the originals it stands for."""
        item = self.state.item(item_id)
        if item.kind is Kind.SUMMARY:
            originals = self.state.originals(item_id)
            if originals:
                return _ORIGINALS_SEPARATOR.join(render_full(self.state.item(i)) for i in originals)
        return item.body

    @translating
    def expand_page(self, item_id: int, offset: int = 0, limit: int = EXPAND_PAGE_CHARS) -> ExpandPage:
        """At most `limit` characters of what expand(item_id) returns, from character `offset`; the page
        says how many are left and where the next starts (`next_offset`, None at the end), and pages
        followed that way join to exactly expand(item_id). A page ends after a newline when one is in
        its second half. A plain item's body is read from the file a megabyte at a time (StoreState.body_page):
        a 50 MB body is not read whole."""
        offset, limit = check_window(offset, limit)
        st = self.state
        it = st.items.get(item_id)
        if it is None:
            try:
                iid = int(item_id)  # as get/expand: an agent's tool call may carry the id as text
            except (TypeError, ValueError):
                raise TypeError(f"an item id must be an int such as 12, got {item_id!r}") from None
            got = st.body_page(iid, offset, limit)
            kind = got[0] if got is not None else st.item(iid).kind
            if got is not None and kind is not Kind.SUMMARY:
                _kind, total, chunk = got
                if offset > total:
                    raise ValueError(past_end(iid, offset, total))
                return ExpandPage(iid, cut(chunk, offset + len(chunk) >= total), offset, total)
        else:
            iid, kind = it.id, it.kind
        originals = st.originals(iid) if kind is Kind.SUMMARY else []
        if originals:
            return page_of_pieces(iid, self._expand_pieces(originals), offset, limit)
        return page_of(iid, st.item(iid).body, offset, limit)

    def _expand_pieces(self, originals: list[int]) -> Iterator[Piece]:
        """expand()'s text for a summary as pieces: the separators and headers as text, each original's
        body as it is in memory or, when not, read from the file a page at a time (not held whole)."""
        st = self.state
        for n, oid in enumerate(originals):
            if n:
                yield _ORIGINALS_SEPARATOR
            kind, source = st.item_head(oid)
            prefix = full_prefix(oid, kind, source)
            if prefix:
                yield prefix
            cached = st.items.get(oid)
            yield cached.body if cached is not None else partial(self._body_reader, oid)

    def _body_reader(self, item_id: int, start: int, count: int) -> tuple[int, str]:
        got = self.state.body_page(item_id, start, count)
        if got is None:  # a file not stored as UTF-8: read whole (see body_page)
            body = self.state.item(item_id).body
            return len(body), body[start : start + count]
        return got[1], got[2]

    @staticmethod
    def expand_tool_schema() -> dict[str, Any]:
        """The JSON tool definition (OpenAI function style) that lets an agent call `expand`."""
        return {
            "type": "function",
            "function": {
                "name": "expand",
                "description": (
                    "Return the full original text of a context item that is shown only as a stub or "
                    "summary. Stubs and summaries start with [#ID kind ...]; pass that ID. A long text "
                    f"comes a page at a time (at most {EXPAND_PAGE_CHARS:,} characters), ending with a "
                    "line that says what is left and the offset to call again with."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer", "description": "the number after # in the stub"},
                        "offset": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "character to start from (0, or the offset a previous page gave)",
                        },
                    },
                    "required": ["id"],
                    "additionalProperties": False,
                },
            },
        }

    @translating
    def advance_turn(self) -> int:
        """Move the turn counter on without serving a window (importers replaying a past run)."""
        st = self.state
        with st.transaction() as conn:
            t = st.read_turn() + 1
            conn.execute("UPDATE meta SET value=? WHERE key='turn'", (str(t),))
        # Only the turn changed, as after a served window: set it rather than mark the mirror dirty, which
        # reloaded every item's metadata and body (Bind moves the turn this way once per engine turn).
        # Another process's commit still changes data_version, so refresh() reloads for that.
        st.turn = t
        return t

    @property
    def turn(self) -> int:
        return self._turn()

    @translating
    def _turn(self) -> int:
        self.state.refresh()
        return self.state.turn

    @translating
    def __len__(self) -> int:
        self.state.refresh()
        return len(self.state.metas)

    # ---- full-text index ---------------------------------------------------------------------

    @translating
    def index_is_current(self) -> bool:
        """Was every item indexed for search as this version indexes it? False for a store an older
        version made: items it added over 1.1 M characters may be indexed whole (a large index file,
        and their middle is found where a new item's is not) until reindex() runs."""
        return schema.index_is_current(self.state.conn)

    @translating
    def reindex(self, *, vacuum: bool = False) -> Reindexed:
        """Index every item for search again, as this version indexes a new one (at most the first
        FTS_HEAD_CHARS and last FTS_TAIL_CHARS characters of a body, cut at word boundaries). One
        transaction: other writers wait for it (seconds on a store of hundreds of MB), and a failure
        leaves the index as it was. The space freed stays inside the file for later writes; with
        `vacuum` the file is rewritten to give it back (that needs free disk space about the file's
        size, and no other process reading the store). Bodies, windows and ids are unchanged."""
        st = self.state
        st.require_writable("reindexing")
        if vacuum and st.batching:
            raise StoreError("reindex(vacuum=True) cannot run inside a batch (VACUUM rewrites the whole file); "
                             "call it after the batch ends")
        before = schema.index_bytes(st.conn)
        with st.transaction() as conn:
            items, cut = schema.reindex(conn)
        after = schema.index_bytes(st.conn)
        file_before = file_after = 0
        if vacuum and st.path != ":memory:":
            file_before = _file_bytes(st.path)
            st.conn.execute("VACUUM")
            # In WAL mode VACUUM writes the new pages to the log: the file shrinks at the checkpoint.
            st.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            file_after = _file_bytes(st.path)
        return Reindexed(items, cut, before, after, file_before, file_after)

    # ---- flight recorder --------------------------------------------------------------------

    @translating
    def windows(self, turn: int) -> list[dict[str, Any]]:
        """Manifests of every window served at `turn` (flight recorder)."""
        return recorder.for_turn(self.state.conn, turn)

    @translating
    def recorded_turns(self) -> list[int]:
        return recorder.turns(self.state.conn)

    @translating
    def record_binding(self, source: str, pipe_turn: int, window_id: int | None = None) -> None:
        """Key a served window (default: the last one) by a Pipeline section and the pipeline's turn."""
        if window_id is None:
            self.server.record_pending()  # a fresh window served without a write is recorded now
        wid = self.last_window_id if window_id is None else int(window_id)
        if wid <= 0:
            raise StoreError("no window has been served yet: call context_get before record_binding")
        with self.state.transaction() as conn:
            recorder.bind(conn, source, pipe_turn, wid)

    @translating
    def bound_window(self, source: str, pipe_turn: int) -> dict[str, Any] | None:
        """The manifest of the window bound into pipeline section `source` at `pipe_turn`, if any."""
        return recorder.bound(self.state.conn, source, pipe_turn)

    @translating
    def bound_turns(self, source: str) -> list[int]:
        return recorder.bound_turns(self.state.conn, source)


def _file_bytes(path: str) -> int:
    """The store's size on disk: the file plus its write-ahead log."""
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
