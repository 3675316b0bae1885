"""Serving a window: `context_get` picks the sticky or the fresh path, records the window, moves the turn."""

from __future__ import annotations

from typing import Any

from engine.store import recorder
from engine.store.budget import parse_budget, tokenizer_for
from engine.store.scoring import bm25_relevance, query_terms
from engine.store.solve import FreshSolve
from engine.store.stale_checks import StaleChecks
from engine.store.state import translating
from engine.store.sticky import StickyWindows
from engine.store.window import Window
from engine.tokens import Budget, Tokenizer


class WindowServing(FreshSolve, StickyWindows, StaleChecks):
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
        Each served window is recorded; with advance_turn the store's turn counter moves on.
        """
        b = parse_budget(budget)
        tok = tokenizer_for(model)
        lane = f"{tok.name}:{b.limit}:{b.margin}"
        self._drain_watcher()
        self._refresh()
        terms = query_terms(query)
        window: Window | None = None
        notes: list[str] = []
        mode = "fresh"
        if sticky:
            prev: Window | dict[str, Any] | None = self._last.get(lane)
            if prev is None:
                prev = recorder.last_for_lane(self._conn, lane)
            if prev is not None:
                window, why = self._sticky(prev, b, tok, lane, query)
                if window is None:
                    mode = "resolved"
                    notes.append(why)
        if window is None:
            relevance = bm25_relevance(self._conn, terms, len(self._metas)) if terms else {}
            window = self._solve(b, tok, lane, query, terms, relevance, mode, sticky, notes)
        with self._transaction() as conn:
            self.last_window_id = recorder.record(conn, window)
            self._flush_counts()
            if advance_turn:
                conn.execute("UPDATE meta SET value=? WHERE key='turn'", (str(self._turn + 1),))
        if advance_turn:
            self._turn += 1
        self._last[lane] = window
        self._data_version = self._current_data_version()
        return window
