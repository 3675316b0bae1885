"""The `ContextStore` facade: add originals, link them, and serve explained, budgeted windows.

The class is assembled from one mixin per concern, each in the module named for it:

    state         connection, caches, row loading, metadata refresh, transactions (the base)
    writes        add, add_file_read, link, pin, set_importance
    summaries     summarize, collapse_subtask
    stale_checks  check_stale, watch, stale_ids
    forms         token counts and each item's text per form; window entries
    plan          the cached solve plan;  solve: the fresh solve;  sticky: the sticky path
    serving       context_get
    budget        parse_budget, tokenizer_for (re-exported here)

Reading items and the flight recorder's queries are here.
"""

from __future__ import annotations

from typing import Any

from engine.store import recorder
from engine.store.budget import MAX_BUDGET, parse_budget, tokenizer_for
from engine.store.compaction import render_full
from engine.store.errors import StoreError
from engine.store.items import Item, Kind
from engine.store.serving import WindowServing
from engine.store.state import translating
from engine.store.summaries import Summaries

__all__ = ["MAX_BUDGET", "ContextStore", "parse_budget", "tokenizer_for"]


class ContextStore(WindowServing, Summaries):
    """One SQLite file per run. Originals are never rewritten; windows, stubs and summaries are views.

    Not thread-safe: use one ContextStore per thread (several processes may share the file; SQLite's
    WAL mode and the busy timeout arbitrate).
    """

    # ---- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self._conn.close()

    def __enter__(self) -> ContextStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- reading ----------------------------------------------------------------------------

    @translating
    def get(self, item_id: int) -> Item:
        return self._item(item_id)

    @translating
    def expand(self, item_id: int) -> str:
        """The original behind a stub or summary. For a summary item: the originals it stands for."""
        item = self._item(item_id)
        if item.kind is Kind.SUMMARY:
            originals = self._originals(item_id)
            if originals:
                return "\n\n".join(render_full(self._item(i)) for i in originals)
        return item.body

    @staticmethod
    def expand_tool_schema() -> dict[str, Any]:
        """The JSON tool definition (OpenAI function style) that lets an agent call `expand`."""
        return {
            "type": "function",
            "function": {
                "name": "expand",
                "description": (
                    "Return the full original text of a context item that is shown only as a stub or "
                    "summary. Stubs and summaries start with [#ID kind ...]; pass that ID."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer", "description": "the number after # in the stub"}
                    },
                    "required": ["id"],
                    "additionalProperties": False,
                },
            },
        }

    @translating
    def advance_turn(self) -> int:
        """Move the turn counter on without serving a window (importers replaying a past run)."""
        with self._transaction() as conn:
            t = self._read_turn() + 1
            conn.execute("UPDATE meta SET value=? WHERE key='turn'", (str(t),))
        self._dirty = True
        return t

    @property
    def turn(self) -> int:
        self._refresh()
        return self._turn

    def __len__(self) -> int:
        self._refresh()
        return len(self._metas)

    # ---- flight recorder --------------------------------------------------------------------

    @translating
    def windows(self, turn: int) -> list[dict[str, Any]]:
        """Manifests of every window served at `turn` (flight recorder)."""
        return recorder.for_turn(self._conn, turn)

    @translating
    def recorded_turns(self) -> list[int]:
        return recorder.turns(self._conn)

    @translating
    def record_binding(self, source: str, pipe_turn: int, window_id: int | None = None) -> None:
        """Key a served window (default: the last one) by a Pipeline section and the pipeline's turn."""
        wid = self.last_window_id if window_id is None else int(window_id)
        if wid <= 0:
            raise StoreError("no window has been served yet: call context_get before record_binding")
        with self._transaction() as conn:
            recorder.bind(conn, source, pipe_turn, wid)

    @translating
    def bound_window(self, source: str, pipe_turn: int) -> dict[str, Any] | None:
        """The manifest of the window bound into pipeline section `source` at `pipe_turn`, if any."""
        return recorder.bound(self._conn, source, pipe_turn)

    @translating
    def bound_turns(self, source: str) -> list[int]:
        return recorder.bound_turns(self._conn, source)
