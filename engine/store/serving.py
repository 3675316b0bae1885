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
        if sticky:
            prev: Window | dict[str, Any] | None = st.last.get(lane)
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
        with st.transaction() as conn:
            st.last_window_id = recorder.record(conn, window, self._encoder)
            self.forms.flush_counts()
            if advance_turn:
                # Read under the write lock: another process sharing the file may have moved the turn
                # on since refresh(), and writing our stale turn + 1 would undo its advance.
                turn = st.read_turn() + 1
                conn.execute("UPDATE meta SET value=? WHERE key='turn'", (str(turn),))
        if advance_turn:
            st.turn = turn
        st.last[lane] = window
        # st.data_version stays what refresh() read: this connection's own commit does not change
        # PRAGMA data_version, and a commit another process made while this window was solved must
        # still make the next refresh() reload (setting it to the current value here hid that item
        # from every later window until the other process committed again).
        return window
