"""Item scores: recency decay, inbound references, BM25 relevance (FTS5) and application importance."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from .config import StoreConfig
from .items import ItemMeta

_TERM = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
MAX_QUERY_TERMS = 48


@dataclass(frozen=True)
class Score:
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
        if t not in seen:
            seen[t] = None
            if len(seen) >= MAX_QUERY_TERMS:
                break
    return tuple(seen)


def bm25_relevance(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[int, float]:
    """Relevance in [0, 1] per matching item: FTS5 bm25() normalised by the best match.

    bm25() is negative (more negative = better), so dividing by the minimum maps the best hit to 1.
    """
    if not terms:
        return {}
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    rows = conn.execute(
        "SELECT rowid, bm25(items_fts) FROM items_fts WHERE items_fts MATCH ?", (match,)
    ).fetchall()
    if not rows:
        return {}
    best = min(r[1] for r in rows)
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
    decay = 0.5 ** (1.0 / cfg.half_life_turns)
    out: dict[int, Score] = {}
    for m in metas:
        rec = decay ** max(0, now_turn - m.turn)
        refs = 1.0 - 1.0 / (1.0 + m.inbound)  # saturating: the 1st citation matters most
        rel = relevance.get(m.id, 0.0)
        imp = min(1.0, max(0.0, m.importance))
        total = (
            cfg.base
            + cfg.w_recency * rec
            + cfg.w_refs * refs
            + cfg.w_relevance * rel
            + cfg.w_importance * imp
        )
        stale = m.id in stale_ids
        if stale:
            total *= cfg.stale_factor
        out[m.id] = Score(total, rec, refs, rel, imp, stale)
    return out
