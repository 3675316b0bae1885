"""Windows: item shapes (forms, hull) for the knapsack, the Window value, its manifest and its messages.

Each candidate item may enter as nothing, a stub, a summary or its full body. The solver (see
`solve`) works on the upper convex hull of each item's (tokens, value) options: per item, hull
upgrades have decreasing efficiency, so taking upgrades in order of value per extra token across
all items is exact for the hull. Ties break on item id, so the result never depends on dict or set
order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import le
from typing import Any, NamedTuple, overload

FORMS = ("nothing", "stub", "summary", "full")


class Option(NamedTuple):
    form: str  # "stub" | "summary" | "full"
    tokens: int  # what this form costs in the window, including per-message overhead
    value: float


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


class Shape(NamedTuple):
    """An item's forms (full first) with value *factors*, its hull, and its size factor.

    Every form's value is score x size x factor, so the hull (which forms are worth upgrading
    through, in which order) does not depend on the score and can be cached per item.
    """

    options: tuple[Option, ...]
    hull: tuple[Option, ...]
    size: float
    by_value: tuple[Option, ...]  # options, most valuable first (the "does not fit" fallback order)


def make_shape(options: Sequence[Option], size: float) -> Shape:
    by_value = tuple(sorted(options, key=lambda o: (-o.value, o.tokens, o.form)))
    return Shape(tuple(options), tuple(_hull(options)), size, by_value)


# After this many consecutive upgrades that do not fit, the budget is within a stub of full: stop
# rather than pop every remaining item (a deterministic cut, it only ever leaves a few tokens unused).
MAX_CONSECUTIVE_MISSES = 64


class Entry(NamedTuple):
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


class Dropped(NamedTuple):
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


class DroppedList(Sequence[Dropped]):
    """The items a window left out, in id order, materialised only when someone reads them.

    A fresh solve over 5,000 items leaves thousands out; building a Dropped per item per call is most
    of a millisecond budget, and the flight recorder only needs the best few (`top`). `explicit`
    entries are given whole; the implicit ones are (id, score) pairs whose kind, cost and reason
    `lookup(id)` returns when the list is first read.
    """

    __slots__ = ("_explicit", "_ids", "_scores", "_lookup", "_all", "_top")

    def __init__(
        self,
        explicit: Sequence[Dropped] = (),
        ids: Sequence[int] = (),
        scores: Sequence[float] = (),
        lookup: Callable[[int], tuple[str, int, str]] | None = None,
    ) -> None:
        if len(ids) != len(scores) or (ids and lookup is None):
            raise ValueError("DroppedList needs one score per id and a lookup for implicit ids")
        self._explicit = tuple(explicit)
        self._ids = ids
        self._scores = scores
        self._lookup = lookup
        self._all: tuple[Dropped, ...] | None = None
        self._top: dict[int | None, list[Dropped]] = {}  # a sticky window re-serves the same list

    def _materialise(self) -> tuple[Dropped, ...]:
        if self._all is None:
            out = list(self._explicit)
            look = self._lookup
            if self._ids and look is not None:
                for i, sc in zip(self._ids, self._scores, strict=True):
                    kind, tokens, reason = look(i)
                    out.append(Dropped(i, kind, sc, tokens, reason))
            out.sort(key=lambda d: d.id)
            self._all = tuple(out)
        return self._all

    def __len__(self) -> int:
        return len(self._explicit) + len(self._ids)

    @overload
    def __getitem__(self, i: int) -> Dropped: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Dropped]: ...
    def __getitem__(self, i: int | slice) -> Dropped | Sequence[Dropped]:
        return self._materialise()[i]

    def __iter__(self) -> Iterator[Dropped]:
        return iter(self._materialise())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def top(self, n: int | None) -> list[Dropped]:
        """The n best-scored dropped items, best first (ties by id), without materialising the rest."""
        cached = self._top.get(n)
        if cached is None:
            cached = self._top[n] = self._compute_top(n)
        return list(cached)

    def _compute_top(self, n: int | None) -> list[Dropped]:
        if n is None or n >= len(self):
            return sorted(self, key=lambda d: (-d.score, d.id))
        best_implicit = _best_implicit(n, self._scores, self._ids)
        pool = [(-d.score, d.id, d) for d in self._explicit]
        look = self._lookup
        for neg, i in best_implicit:
            assert look is not None
            kind, tokens, reason = look(i)
            pool.append((neg, i, Dropped(i, kind, -neg, tokens, reason)))
        pool.sort(key=lambda t: (t[0], t[1]))
        return [t[2] for t in pool[:n]]


def _best_implicit(n: int, scores: Sequence[float], ids: Sequence[int]) -> list[tuple[float, int]]:
    """`heapq.nsmallest(n, zip(-scores, ids))`: the n best (negated score, id) pairs, best first.

    A re-solve leaves ~4,000 items out and the recorder wants the best 50; building a tuple per item
    for the heap was ~1 ms of a ~10 ms re-solve. Only items scoring at least the n-th best score can
    be among the n smallest pairs (fewer than n score strictly more; ties at the cut go by id), so the
    cut is found with a C-level sort of the bare floats and only those items get a tuple. A NaN
    (the sum is NaN) has no consistent order: the heap decides, as before.
    """
    if n <= 0:
        return []
    total = sum(scores)
    if len(scores) <= n or total != total:
        return heapq.nsmallest(n, zip([-x for x in scores], ids, strict=True))
    cut = sorted(scores, reverse=True)[n - 1]
    picked = compress(zip(scores, ids, strict=True), map(le, repeat(cut), scores))
    return sorted([(-x, i) for x, i in picked])[:n]


def top_dropped(dropped: Sequence[Dropped], n: int | None) -> list[Dropped]:
    if isinstance(dropped, DroppedList):
        return dropped.top(n)
    ordered = sorted(dropped, key=lambda d: (-d.score, d.id))
    return ordered if n is None else ordered[:n]


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
    dropped: Sequence[Dropped]  # in id order (a DroppedList when the solver produced it)
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

    def manifest(self, max_dropped: int | None = None, *, with_items: bool = True) -> dict[str, Any]:
        shown = top_dropped(self.dropped, max_dropped)
        out = {
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
            "dropped": [d.as_dict() for d in shown],
            "dropped_total": len(self.dropped),
            "notes": list(self.notes),
        }
        if with_items:  # the recorder encodes the items itself, from cached fragments
            out["items"] = [e.as_dict() for e in self.entries]
        return out


def window_as_messages(window: Window) -> list[dict[str, str]]:
    """OpenAI-style {"role", "content"} dicts in send order (the engine's Bind adapter wraps this)."""
    return [{"role": e.role, "content": e.text} for e in window.entries]


def window_manifest(window: Window) -> dict[str, Any]:
    """The manifest as a plain, JSON-ready dict."""
    return window.manifest()
