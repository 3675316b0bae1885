"""Windows: the greedy multiple-choice knapsack, the Window value, its manifest and its messages.

Each candidate item may enter as nothing, a stub, a summary or its full body. The solver takes the
upper convex hull of each item's (tokens, value) options, then repeatedly applies the upgrade with
the best value per extra token across all items, while it fits. Per item, hull upgrades have
decreasing efficiency, so pushing only an item's next upgrade onto the heap keeps the global order
exact. Ties break on item id, so the result never depends on dict or set order.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FORMS = ("nothing", "stub", "summary", "full")


@dataclass(frozen=True)
class Option:
    form: str  # "stub" | "summary" | "full"
    tokens: int  # what this form costs in the window, including per-message overhead
    value: float


@dataclass(frozen=True)
class Candidate:
    id: int
    options: tuple[Option, ...]


def _hull(options: Sequence[Option]) -> list[Option]:
    """Upper convex hull of (tokens, value) starting at (0, 0): the options worth upgrading through."""
    pts = sorted(options, key=lambda o: (o.tokens, -o.value, FORMS.index(o.form)))
    hull: list[Option] = []
    for o in pts:
        last_v = hull[-1].value if hull else 0.0
        if o.value <= last_v:
            continue  # costs at least as much as the current top and is worth no more
        while hull:
            a_t, a_v = (hull[-2].tokens, hull[-2].value) if len(hull) >= 2 else (0, 0.0)
            b = hull[-1]
            # Drop b if going a -> o directly is at least as efficient as a -> b (b is under the chord).
            if (b.value - a_v) * (o.tokens - a_t) <= (o.value - a_v) * (b.tokens - a_t):
                hull.pop()
            else:
                break
        hull.append(o)
    return hull


def solve(candidates: Sequence[Candidate], capacity: int) -> dict[int, Option]:
    """Greedy multiple-choice knapsack. Returns the chosen option per item (absent = nothing)."""
    hulls: dict[int, list[Option]] = {}
    all_opts: dict[int, tuple[Option, ...]] = {}
    heap: list[tuple[float, int, int]] = []
    for c in candidates:
        h = _hull(c.options)
        if not h:
            continue
        hulls[c.id] = h
        all_opts[c.id] = c.options
        first = h[0]
        eff = first.value / first.tokens if first.tokens > 0 else float("inf")
        heap.append((-eff, c.id, 0))
    heapq.heapify(heap)
    chosen: dict[int, Option] = {}
    remaining = capacity
    while heap and remaining > 0:
        _, cid, level = heapq.heappop(heap)
        h = hulls[cid]
        cur = chosen.get(cid)
        step = h[level]
        extra = step.tokens - (cur.tokens if cur is not None else 0)
        if extra > remaining:
            # The next hull step does not fit; a cheaper off-hull form of this item still might
            # (e.g. its summary when the full body is too big). Take the most valuable that fits.
            best: Option | None = None
            base_t = cur.tokens if cur is not None else 0
            base_v = cur.value if cur is not None else 0.0
            for o in sorted(all_opts[cid], key=lambda o: (-o.value, o.tokens, o.form)):
                if o.value > base_v and o.tokens - base_t <= remaining:
                    best = o
                    break
            if best is not None:
                remaining -= best.tokens - base_t
                chosen[cid] = best
            continue
        remaining -= extra
        chosen[cid] = step
        if level + 1 < len(h):
            nxt = h[level + 1]
            eff = (nxt.value - step.value) / max(1, nxt.tokens - step.tokens)
            heapq.heappush(heap, (-eff, cid, level + 1))
    return chosen


@dataclass(frozen=True)
class Entry:
    """One item as it appears in a window, in send order."""

    id: int
    kind: str
    role: str
    form: str  # "stub" | "summary" | "full"
    text: str
    tokens: int  # text tokens plus per-message overhead: what it costs in the window
    score: float
    reasons: tuple[str, ...]
    pinned: bool = False
    stale: bool = False
    duplicate_of: int | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "role": self.role,
            "form": self.form,
            "tokens": self.tokens,
            "score": round(self.score, 6),
            "pinned": self.pinned,
            "stale": self.stale,
            "reasons": list(self.reasons),
        }
        if self.duplicate_of is not None:
            d["duplicate_of"] = self.duplicate_of
        return d


@dataclass(frozen=True)
class Dropped:
    id: int
    kind: str
    score: float
    tokens: int  # full-form cost it would have had
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "score": round(self.score, 6),
            "tokens": self.tokens,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Window:
    """A served window: entries in send order plus everything needed to explain it."""

    budget: int
    usable: int
    used: int
    mode: str  # "fresh" (non-sticky solve), "sticky" (previous + appended) or "resolved" (sticky overflowed)
    turn: int
    lane: str
    tokenizer: str
    query: str | None
    entries: tuple[Entry, ...]
    dropped: tuple[Dropped, ...]
    text_hash: str
    max_item_id: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(e.id for e in self.entries)

    def entry(self, item_id: int) -> Entry | None:
        for e in self.entries:
            if e.id == item_id:
                return e
        return None

    def manifest(self, max_dropped: int | None = None) -> dict[str, Any]:
        dropped = sorted(self.dropped, key=lambda d: (-d.score, d.id))
        shown = dropped if max_dropped is None else dropped[:max_dropped]
        return {
            "budget": self.budget,
            "usable": self.usable,
            "used": self.used,
            "mode": self.mode,
            "sticky": self.mode == "sticky",
            "turn": self.turn,
            "lane": self.lane,
            "tokenizer": self.tokenizer,
            "query": self.query,
            "text_hash": self.text_hash,
            "max_item_id": self.max_item_id,
            "items": [e.as_dict() for e in self.entries],
            "dropped": [d.as_dict() for d in shown],
            "dropped_total": len(self.dropped),
            "notes": list(self.notes),
        }


def window_as_messages(window: Window) -> list[dict[str, str]]:
    """OpenAI-style {"role", "content"} dicts in send order (the engine's Bind adapter wraps this)."""
    return [{"role": e.role, "content": e.text} for e in window.entries]


def window_manifest(window: Window) -> dict[str, Any]:
    """The manifest as a plain, JSON-ready dict."""
    return window.manifest()
