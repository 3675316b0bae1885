"""A re-solve that reuses the previous solve's scores, step efficiencies and step order where they cannot
have changed; the same floats and the same order a from-scratch solve computes (see `solve`).

Why it is exact. An item's score is its static part (from the plan) plus `w_recency * decay**age`,
times the stale factor for a stale read. Once that recency term is below half a unit in the last place
of the smallest static part, adding it rounds back to the static part exactly (IEEE round to nearest;
the unit in the last place only grows with the value), so the score is the static part whatever the
turn. Items are in id order and, in a store whose turns never go backwards, in turn order: every item
older than the oldest turn whose term is not absorbed has a score that no longer changes. Their
weights (score x size), their steps' values per token and those steps' relative order are then the
previous solve's; only the newer items are re-scored (at 5,000 items a few hundred, not all of them).

The order: the general solve sorts all step indices by value per token, best first, ties by index
(a stable sort of `range`). Here the unchanged steps, already in that order, are followed by the
re-scored steps in index order, and the same stable sort runs over them: ties keep index order (every
unchanged step has a smaller index than every re-scored one), and the long sorted run costs one pass.

Entered only when provably equivalent: the same plan lists (the planner extends them in place over
appended items; anything else builds new ones), no query (relevance and JSON summaries depend on it),
turns never decreasing, finite positive static parts and no NaN value per token. Otherwise the caller
uses the general path and this cache is left as it was or dropped.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator
from itertools import chain, islice
from operator import add, attrgetter, le, mul

from engine.store.solve_plan import SolvePlan
from engine.store.window import Entry

_size = attrgetter("size")
_MIN_HEAD = 512  # steps of the order computed before the knapsack asks for more
_HEAD_PER_STEP = 2  # ... and this many per step the last walk took
# Newly frozen steps are sorted with the live ones every solve until there are this many; then they are
# merged into the sorted frozen steps once (a run-merging sort over all of them).
_FOLD_STEPS = 1024


class _Cache:
    """What earlier reusing solves computed over one plan's lists (they grow in place with appends).

    Each array has its own bound: metas [0, bound) had frozen scores when its values were computed,
    so those values are turn-independent and still what a from-scratch solve computes.
    """

    __slots__ = (
        "static_ref",
        "totals",
        "totals_frozen",
        "w",
        "effs",
        "w_frozen",
        "size",
        "monotone_upto",
        "min_static",
        "fsorted",
        "f_sp",
        "head",
        "entries",
    )

    def __init__(self, plan: SolvePlan) -> None:
        self.static_ref = plan.static  # identity: the planner builds new lists on any non-append change
        self.totals: list[float] = []  # per meta index
        self.totals_frozen = 0
        self.w: list[float] = []  # per candidate position: score x size (a group's best member)
        self.effs: list[float] = []  # per step: value per token (computed with w)
        self.w_frozen = 0
        self.size: list[float] = []  # per candidate position (shapes never change)
        self.monotone_upto = 0  # plan.turns[0:monotone_upto] is known to be nondecreasing
        self.min_static = math.inf  # over plan.static[0:monotone_upto]
        # Steps [0, f_sp), all of frozen candidates, sorted best first (ties by index), and how many
        # steps of the order the knapsack is handed at first (it walks ~900 of ~5,000, see `order`).
        self.fsorted: list[int] = []
        self.f_sp = 0
        self.head = _MIN_HEAD
        # Candidate position -> (form, entry) of a chosen item whose score was frozen and that was not
        # recent when the entry was built: its score and reasons are the same whenever that holds.
        self.entries: dict[int, tuple[str, Entry]] = {}


class Reuse:
    """Scores and knapsack order for a re-solve, from the previous solve's where provably unchanged.

    `rescored`, `reweighed` and `resorted` count what the last reusing solve recomputed (items
    re-scored, candidates re-weighed, steps not taken from the previous order); tests read them.
    """

    def __init__(self) -> None:
        self._c: _Cache | None = None
        self.frozen_now = 0  # metas whose score is frozen at the turn of the last `totals` call
        self.rescored = -1
        self.reweighed = -1
        self.resorted = -1

    def drop(self) -> None:
        self._c = None

    def totals(self, plan: SolvePlan, rec_w: dict[int, float], stale_factor: float) -> list[float] | None:
        """Every meta's score (no query), recomputing only the items whose score can have changed;
        None when this plan cannot be reused (then the caller computes them all).

        The list is the cache's own: the caller must not change it.
        """
        c = self._c
        static, turns = plan.static, plan.turns
        if c is None or c.static_ref is not static:
            c = self._c = _Cache(plan)
        n = len(static)
        k = c.monotone_upto
        if len(turns) != n or k > n:
            self._c = None
            return None
        if k < n:
            # The new part: turns never decrease (then "older than turn t" is a prefix of the metas),
            # and the smallest static part (its half-ulp is the absorption bound).
            lo = k - 1 if k else 0
            if not all(map(le, islice(turns, lo, n - 1), islice(turns, lo + 1, n))):
                self._c = None
                return None
            c.min_static = min(c.min_static, min(islice(static, k, n)))
            c.monotone_upto = n
        s = c.min_static
        if not 0.0 < s < math.inf:
            self._c = None
            return None
        half_ulp = math.ulp(s) / 2
        # The oldest turn whose recency term is not absorbed; every meta before its first item is frozen.
        live = [t for t, x in rec_w.items() if not x < half_ulp]
        frozen_now = bisect_left(turns, min(live)) if live else n
        r = min(c.totals_frozen, frozen_now, len(c.totals))
        tail = list(map(add, islice(static, r, n), map(rec_w.__getitem__, islice(turns, r, n))))
        for i in plan.stale_idx:
            if i >= r:
                tail[i - r] *= stale_factor
        c.totals[r:] = tail
        c.totals_frozen = self.frozen_now = frozen_now
        self.rescored = n - r
        return c.totals

    def weights(self, plan: SolvePlan) -> tuple[list[float], list[float]] | None:
        """(w per candidate, value per token per step) for the scores the last `totals` call returned,
        recomputed from the first candidate that is not frozen both now and when they were last
        computed; None (and the cache dropped) on a NaN value per token."""
        c = self._c
        assert c is not None
        totals, cand_midx = c.totals, plan.cand_midx
        if len(c.size) < len(plan.shapes):
            c.size.extend(map(_size, islice(plan.shapes, len(c.size), None)))
        size, w = c.size, c.w
        # Candidates whose score and group members' scores are frozen (members are older copies).
        pc = min(bisect_left(cand_midx, min(c.w_frozen, self.frozen_now)), len(w))
        w[pc:] = map(mul, map(totals.__getitem__, islice(cand_midx, pc, None)), islice(size, pc, None))
        for p, members in plan.dup:
            if p >= pc:
                w[p] = max(totals[i] for i in members) * size[p]
        step_cand = plan.step_cand
        sp = min(bisect_left(step_cand, pc), len(c.effs))
        tail = list(
            map(mul, map(w.__getitem__, islice(step_cand, sp, None)), islice(plan.step_ratio, sp, None))
        )
        if any(map(math.isnan, tail)):
            self._c = None
            return None
        c.effs[sp:] = tail
        c.w_frozen = self.frozen_now
        self.reweighed = len(w) - pc
        return w, c.effs

    def order(self, plan: SolvePlan, effs: list[float]) -> Iterator[int]:
        """Every step index by value per token, best first, ties by index, as `sorted(range(n),
        key=..., reverse=True)` orders them, computed as the knapsack walks it.

        The knapsack stops after about as many steps as it takes items (~900 of ~5,000), so only the
        first `head` positions are sorted up front: they come from the first `head` sorted frozen
        steps and the other steps (every step of the first `head` of the whole order is among them);
        the whole order is sorted only if the walk goes on past them. Call `walked` with how far it went.
        """
        c = self._c
        assert c is not None
        n = len(effs)
        s_fz = bisect_left(plan.step_cand, bisect_left(plan.cand_midx, self.frozen_now))
        if c.f_sp > s_fz:  # fewer steps are frozen than when they were sorted (a smaller static part)
            c.fsorted, c.f_sp = [], 0
        key = effs.__getitem__
        if s_fz - c.f_sp > _FOLD_STEPS or not c.f_sp:
            # Sort the newly frozen steps into the frozen ones: a stable sort of two sorted runs...
            # (the first time, of every frozen step).
            c.fsorted = sorted(c.fsorted + list(range(c.f_sp, s_fz)), key=key, reverse=True)
            c.f_sp = s_fz
        fsorted, f_sp, k = c.fsorted, c.f_sp, c.head
        rest = list(range(f_sp, n))
        self.resorted = len(rest)
        if len(fsorted) <= k:
            return iter(sorted(fsorted + rest, key=key, reverse=True))
        head = sorted(fsorted[:k] + rest, key=key, reverse=True)

        def beyond() -> Iterator[int]:
            yield from islice(sorted(fsorted + rest, key=key, reverse=True), k, None)

        return chain(islice(head, k), beyond())

    def walked(self, steps: int) -> None:
        """How many steps of the order the knapsack took: the next solve sorts twice that up front."""
        if self._c is not None:
            self._c.head = max(_MIN_HEAD, _HEAD_PER_STEP * steps)

    def kept_entries(self) -> dict[int, tuple[str, Entry]] | None:
        """Candidate position -> (form, entry) of chosen items that were frozen and not recent when
        their entry was built; the solve hands one back for the same form while that still holds."""
        return self._c.entries if self._c is not None else None
