"""Item scores: recency decay, inbound references, BM25 relevance (FTS5) and application importance."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import NamedTuple

from engine.store.config import StoreConfig
from engine.store.items import ItemMeta

_TERM = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
MAX_QUERY_TERMS = 48
# Words so common that BM25 gives them almost no weight, yet matching them makes FTS5 score nearly
# every row: dropping them keeps a query over 5,000 items cheap without changing the ranking much.
STOPWORDS = frozenset(
    "the and for are but not you all any can had her was one our out has him his how its may new now "
    "see two who did get let say she too use that this with from have they will your what when which "
    "there their then than them these those into some such only also just been were would could should "
    "about after before while where here very more most other over same each does done".split()
)
_new = tuple.__new__


class Score(NamedTuple):
    total: float
    recency: float
    refs: float
    relevance: float
    importance: float
    stale: bool

    def as_dict(self) -> dict[str, float | bool]:
        return {
            "total": round(self.total, 6),
            "recency": round(self.recency, 6),
            "refs": round(self.refs, 6),
            "relevance": round(self.relevance, 6),
            "importance": round(self.importance, 6),
            "stale": self.stale,
        }


def query_terms(query: str | None) -> tuple[str, ...]:
    """Terms of a free-text query, in first-seen order (deterministic), lower-cased, capped.

    Free text is reduced to word-like terms so that anything a user or agent types is a valid
    FTS5 query: punctuation such as quotes, colons or parentheses would otherwise be FTS syntax.
    """
    if not query:
        return ()
    seen: dict[str, None] = {}
    for m in _TERM.finditer(query):
        t = m.group(0).lower()
        if t not in seen and t not in STOPWORDS:
            seen[t] = None
            if len(seen) >= MAX_QUERY_TERMS:
                break
    return tuple(seen)


# Only the best this-many BM25 matches get a relevance score (computed and sorted inside SQLite, no
# Python object per match); the rest of the matches score 0, as they would a fraction of a percent.
RELEVANCE_TOP_K = 256


def informative_terms(conn: sqlite3.Connection, terms: Sequence[str], n_items: int) -> list[str]:
    """The terms worth matching: present in some item and, when any term is rarer than that, in
    fewer than half of them.

    FTS5's BM25 clamps the idf of a term found in half the items or more to 1e-6, so next to a rarer
    term it cannot change the ranking; it only makes nearly every row a match and costs time. If
    every term is that common they are all kept (relevance is normalised by the best match, so
    their small scores still rank). One indexed fts5vocab lookup per term (an IN list would scan
    the whole vocabulary).
    """
    present: list[tuple[str, int]] = []
    for t in terms:
        row = conn.execute("SELECT doc FROM items_vocab WHERE term=?", (t,)).fetchone()
        if row is not None and int(row[0]) > 0:
            present.append((t, int(row[0])))
    rare = [t for t, df in present if 2 * df < n_items]
    return rare if rare else [t for t, _ in present]


def bm25_relevance(
    conn: sqlite3.Connection,
    terms: Sequence[str],
    n_items: int = 0,
    top_k: int = RELEVANCE_TOP_K,
) -> dict[int, float]:
    """Relevance in (0, 1] for the top_k matching items: FTS5 bm25() normalised by the best match.

    bm25() is negative (more negative = better), so dividing by the minimum maps the best hit to 1.
    Ties at the cut are broken by id, so the result is deterministic.
    """
    useful = informative_terms(conn, terms, n_items)
    if not useful:
        return {}
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in useful)
    rows = conn.execute(
        "SELECT rowid, bm25(items_fts) AS s FROM items_fts WHERE items_fts MATCH ? ORDER BY s, rowid LIMIT ?",
        (match, int(top_k)),
    ).fetchall()
    if not rows:
        return {}
    best = float(rows[0][1])
    if best >= 0:
        return {int(r[0]): 1.0 for r in rows}
    return {int(r[0]): float(r[1]) / best for r in rows}


def score_items(
    metas: Sequence[ItemMeta],
    now_turn: int,
    relevance: dict[int, float],
    stale_ids: frozenset[int],
    cfg: StoreConfig,
) -> dict[int, Score]:
    # Hot loop (5,000 items per call inside a 20 ms budget): locals only, no per-term attribute lookups.
    decay = 0.5 ** (1.0 / cfg.half_life_turns)
    base, wr, wf, wl, wi, sf = (
        cfg.base,
        cfg.w_recency,
        cfg.w_refs,
        cfg.w_relevance,
        cfg.w_importance,
        cfg.stale_factor,
    )
    rel_get = relevance.get
    out: dict[int, Score] = {}
    for m in metas:
        age = now_turn - m.turn
        rec = decay**age if age > 0 else 1.0
        inbound = m.inbound
        refs = 1.0 - 1.0 / (1.0 + inbound) if inbound else 0.0  # saturating: the 1st citation matters most
        rel = rel_get(m.id, 0.0)
        imp = m.importance if m.importance < 1.0 else 1.0
        total = base + wr * rec + wf * refs + wl * rel + wi * imp
        stale = m.id in stale_ids
        if stale:
            total *= sf
        # tuple.__new__ skips the NamedTuple's Python-level __new__ (5,000 of these per call).
        out[m.id] = _new(Score, (total, rec, refs, rel, imp, stale))
    return out
