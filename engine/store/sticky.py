"""The sticky path: serve the previous window of a lane plus the items added since, unchanged.

Keeping the earlier window's bytes in place is what lets the provider's prefix cache hit turn after
turn; the window is re-solved (see `solve`) only when the appends overflow or something the previous
window relied on changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.store.forms import Forms
from engine.store.items import ItemMeta, Kind
from engine.store.scoring import query_terms, score_items
from engine.store.state import StoreState
from engine.store.window import Dropped, Entry, Window
from engine.tokens import REPLY_PRIMING_TOKENS, Budget, Tokenizer


class Sticky:
    """Continues a lane's previous window; gives up (returns None and why) when it must be re-solved."""

    def __init__(self, state: StoreState, forms: Forms) -> None:
        self.state = state
        self.forms = forms
        # Per lane, the last window this path served, with what it was built over (layout generation,
        # metas list) and its in-window content hashes: the next turn's check of that window would
        # find the same (see `extend`), so only the items appended since are checked.
        self._served: dict[str, tuple[Window, int, list[ItemMeta], dict[str, int]]] = {}

    def extend(
        self,
        prev: Window | dict[str, Any],
        b: Budget,
        tok: Tokenizer,
        lane: str,
        query: str | None,
    ) -> tuple[Window | None, str]:
        """Previous window + items added since, if it still fits and nothing it relied on changed.

        Returns (None, why) when it must be re-solved. Retained entries keep their text, form and
        score from the window that chose them: their bytes must not move (that is the point), and
        re-scoring them would only churn the manifest.
        """
        prev_dropped: Sequence[Dropped] | None
        if isinstance(prev, Window):
            prev_entries = list(prev.entries)
            max_id = prev.max_item_id
            prev_dropped = prev.dropped  # immutable: shared, never copied
        else:  # from the flight recorder (another process served it): re-render from ids and forms
            prev_entries = []
            prev_terms = query_terms(prev.get("query"))
            for e in prev["items"]:
                m0 = self.state.by_id.get(int(e["id"]))
                if m0 is None:
                    return None, f"re-solved: item #{e['id']} of the previous window is unknown"
                dup = e.get("duplicate_of")
                prev_entries.append(
                    self.forms.entry(
                        tok,
                        m0,
                        str(e["form"]),
                        float(e["score"]),
                        tuple(e["reasons"]),
                        prev_terms,
                        stale=bool(e["stale"]),
                        duplicate_of=int(dup) if dup is not None else None,
                    )
                )
            max_id = int(prev["max_item_id"])
            prev_dropped = None
        st = self.state
        served = self._served.get(lane)
        if served is not None and served[0] is prev and served[1] == st.layout_gen and served[2] is st.metas:
            # This path served `prev` and nothing but appends happened since (a pin, link, summary,
            # staleness change or reload bumps the layout generation or replaces the metas): the pins,
            # and every entry's item, flags and hash are as they were when it was built.
            in_window_hash = dict(served[3])
        else:
            pins = [m.id for m in st.metas if m.pinned]
            if [e.id for e in prev_entries if e.pinned] != pins:
                return None, "re-solved: the set of pinned items changed"
            in_window_hash = {}
            for e in prev_entries:
                m = st.by_id.get(e.id)
                if m is None:
                    return None, f"re-solved: item #{e.id} of the previous window is unknown"
                if not m.pinned and (m.covered_by is not None or m.superseded):
                    return None, f"re-solved: #{m.id} is now covered by summary #{m.covered_by}"
                if e.form in ("full", "summary"):
                    in_window_hash.setdefault(m.dedup_key, m.id)
        new_metas: list[ItemMeta] = []
        for m in reversed(self.state.metas):  # only the tail is new: stop at the first old id
            if m.id <= max_id:
                break
            new_metas.append(m)
        new_metas.reverse()
        scores = score_items(new_metas, self.state.turn, {}, self.state.stale, self.state.config)
        entries: list[Entry] = list(prev_entries)
        # A served window's `used` is this same sum over its entries.
        used = (
            prev.used if isinstance(prev, Window) else REPLY_PRIMING_TOKENS + sum(e.tokens for e in entries)
        )
        for m in new_metas:
            if m.superseded:
                continue
            if m.kind is Kind.SUMMARY and m.id in self.state.covering:
                return None, f"re-solved: new summary #{m.id} replaces items"
            if m.covered_by is not None:
                continue
            if m.dedup_key in in_window_hash:
                e = self.forms.entry(
                    tok,
                    m,
                    "stub",
                    scores[m.id].total,
                    ("appended; duplicate content",),
                    (),
                    duplicate_of=in_window_hash[m.dedup_key],
                )
            else:
                e = self.forms.entry(
                    tok, m, "full", scores[m.id].total, ("appended since previous window",), ()
                )
                in_window_hash.setdefault(m.dedup_key, m.id)
            entries.append(e)
            used += e.tokens
            if used > b.usable:
                return (
                    None,
                    f"re-solved: previous window plus new items needs more than {b.usable} usable tokens",
                )
        if prev_dropped is None:
            included = {e.id for e in entries}
            prev_dropped = [
                Dropped(
                    m.id,
                    m.kind.value,
                    0.0,
                    self.forms.cost(tok, m.id),
                    "left out at the last re-solve (sticky window)",
                )
                for m in self.state.metas
                if m.id not in included
            ]
        window = self.forms.window(b, tok, lane, query, "sticky", entries, prev_dropped, [])
        self._served[lane] = (window, st.layout_gen, st.metas, in_window_hash)
        return window, ""
