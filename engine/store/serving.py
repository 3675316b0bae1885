"""Serving a window: `context_get` picks the sticky or the fresh path, records the window, moves the turn."""

from __future__ import annotations

from typing import Any

from engine.store import recorder
from engine.store.budget import parse_budget, tokenizer_for
from engine.store.forms import Forms
from engine.store.items import lone_surrogate, replace_surrogates
from engine.store.scoring import bm25_relevance, query_terms
from engine.store.solve import Solver
from engine.store.stale_checks import StaleChecks
from engine.store.state import StoreState
from engine.store.sticky import Sticky
from engine.store.window import Window
from engine.tokens import Budget, Tokenizer


class Server:
    """Serves windows: the sticky path first, the solver when it gives up; records every window."""

    def __init__(
        self, state: StoreState, forms: Forms, solver: Solver, sticky: Sticky, staleness: StaleChecks
    ) -> None:
        self.state = state
        self.forms = forms
        self.solver = solver
        self.sticky = sticky
        self.staleness = staleness
        self._encoder = recorder.ManifestEncoder()

    def context_get(
        self,
        budget: int | Budget,
        model: str | Tokenizer | None = None,
        query: str | None = None,
        *,
        sticky: bool = True,
        advance_turn: bool = True,
    ) -> Window:
        st = self.state
        b = parse_budget(budget)
        tok = tokenizer_for(model)
        lane = f"{tok.name}:{b.limit}:{b.margin}"
        self.staleness.drain_watcher()
        st.refresh()
        if query and not query.isascii() and lone_surrogate(query) >= 0:
            # The query only ranks (and is recorded in the manifest, as UTF-8): a lone surrogate from
            # undecodable bytes in the agent's latest message must not fail the window.
            query = replace_surrogates(query)
        terms = query_terms(query)
        window: Window | None = None
        notes: list[str] = []
        mode = "fresh"
        prev: Window | dict[str, Any] | None = None
        if sticky:
            prev = st.last.get(lane)
            if prev is None:
                prev = recorder.last_for_lane(st.conn, lane)
            if prev is not None:
                window, why = self.sticky.extend(prev, b, tok, lane, query)
                if window is None:
                    mode = "resolved"
                    notes.append(why)
        if window is None:
            relevance = bm25_relevance(st.conn, terms, len(st.metas)) if terms else {}
            window = self.solver.solve(b, tok, lane, query, terms, relevance, mode, sticky, notes)
        if not advance_turn and self._only_read(window, prev, sticky):
            # Nothing this get would write is new: the turn stays, and the lane's sticky window is the
            # one already recorded (sticky, nothing appended) or is left as it is (a fresh look). So no
            # write lock: in WAL mode this get runs beside another process's long write (a batch, an
            # import) instead of waiting for it and failing after the busy timeout. A fresh window is
            # recorded only if record_binding asks for it (see record_pending).
            st.pending = window if not sticky else None
            if sticky:
                st.last[lane] = window
            return window
        self._record(window, lane, advance_turn)
        return window

    @staticmethod
    def _only_read(window: Window, prev: Window | dict[str, Any] | None, sticky: bool) -> bool:
        """Would recording `window` (with the turn left as it is) add nothing another get needs? A fresh
        window continues nothing and nothing continues from it unless recorded; a sticky window that
        appended nothing to the lane's previous window is that window again."""
        if not sticky:
            return True
        if window.mode != "sticky" or prev is None:
            return False
        prev_n = len(prev.entries) if isinstance(prev, Window) else len(prev["items"])
        return len(window.entries) == prev_n

    def record_pending(self) -> None:
        """Record the fresh window a read-only get served last (record_binding names it)."""
        window = self.state.pending
        if window is not None:
            self._record(window, window.lane, False)

    def _record(self, window: Window, lane: str, advance_turn: bool) -> None:
        st = self.state
        with st.transaction() as conn:
            window_id = recorder.record(conn, window, self._encoder)
            self.forms.flush_counts()
            if advance_turn:
                # Read under the write lock: another process sharing the file may have moved the turn
                # on since refresh(), and writing our stale turn + 1 would undo its advance.
                turn = st.read_turn() + 1
                conn.execute("UPDATE meta SET value=? WHERE key='turn'", (str(turn),))
        st.last_window_id = window_id
        st.pending = None
        if advance_turn:
            st.turn = turn
        st.last[lane] = window
        # st.data_version stays what refresh() read: this connection's own commit does not change
        # PRAGMA data_version, and a commit another process made while this window was solved must
        # still make the next refresh() reload (setting it to the current value here hid that item
        # from every later window until the other process committed again).
