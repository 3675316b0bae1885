"""The fresh solve: score every item, keep the recent turns, then fill the budget by value per token.

Used for the first window of a lane, with sticky=False, and whenever the sticky path gives up (see
`sticky`). Scores are the plan's static part plus recency and the query's BM25; the knapsack walks
the plan's hull steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress
from operator import add, attrgetter, mul

from engine.store.errors import PinsExceedBudgetError
from engine.store.forms import Forms
from engine.store.solve_plan import Planner, SolvePlan
from engine.store.solve_reuse import Reuse
from engine.store.state import StoreState
from engine.store.window import MAX_CONSECUTIVE_MISSES, Dropped, DroppedList, Entry, Option, Window
from engine.tokens import REPLY_PRIMING_TOKENS, Budget, Tokenizer
from engine.wording import counted

_size = attrgetter("size")
_NO_FIT = "did not fit: lower value per token than what was kept"


class Solver:
    """The fresh solve over a cached `SolvePlan`; the window text comes from `Forms`."""

    def __init__(self, state: StoreState, forms: Forms, planner: Planner) -> None:
        self.state = state
        self.forms = forms
        self.planner = planner
        self.reuse = Reuse()

    def solve(
        self,
        b: Budget,
        tok: Tokenizer,
        lane: str,
        query: str | None,
        terms: tuple[str, ...],
        relevance: dict[int, float],
        mode: str,
        sticky: bool,
        notes: list[str],
    ) -> Window:
        cfg = self.state.config
        plan = self.planner.plan(tok, terms)
        pins, pin_cost = plan.pins, plan.pin_cost
        pinned_tokens = sum(t for _, t in pin_cost)
        if pinned_tokens + REPLY_PRIMING_TOKENS > b.usable:
            raise PinsExceedBudgetError(pinned_tokens + REPLY_PRIMING_TOKENS, b.usable, b.limit, pin_cost)

        # ---- scores: one float per item, from the cached static part, the turn and the query
        now = self.state.turn
        decay = 0.5 ** (1.0 / cfg.half_life_turns)
        pw = {t: (decay ** (now - t) if now > t else 1.0) for t in plan.distinct_turns}
        wr = cfg.w_recency
        rec_w = {t: wr * v for t, v in pw.items()}
        # Without a query, the previous solve's scores, weights and step order are reused where they
        # cannot have changed (see solve_reuse); the general path below computes the same floats.
        reuse: Reuse | None = self.reuse if not relevance and not terms else None
        reused = reuse.totals(plan, rec_w, cfg.stale_factor) if reuse is not None else None
        if reused is not None:
            totals = reused  # the cache's own list: read below, never written
        else:
            reuse = None
            # C-level maps over ~5,000 items; the same additions.
            totals = list(map(add, plan.static, map(rec_w.__getitem__, plan.turns)))
            if relevance:
                wl = cfg.w_relevance
                midx = plan.midx
                for item_id, rel in relevance.items():
                    i = midx.get(item_id)
                    if i is not None:
                        totals[i] += wl * rel
            if plan.stale_idx:
                sf = cfg.stale_factor
                for i in plan.stale_idx:
                    totals[i] *= sf

        cand, cand_midx, shapes, full_cost = plan.cand, plan.cand_midx, plan.shapes, plan.full_cost
        n = len(cand)
        room = b.usable - REPLY_PRIMING_TOKENS - pinned_tokens
        everything = sum(full_cost)
        chosen: dict[int, Option] = {}  # candidate position -> form
        if everything <= room:
            chosen = {p: shapes[p].options[0] for p in range(n)}  # all fit in full: nothing to decide
        else:
            if sticky:
                # Leave headroom so the next turns append without another cache-breaking re-solve.
                headroom = self._headroom(plan, b.usable)
                room = max(0, room - headroom)
                notes.append(
                    f"compacted: history needs {everything} tokens, {room} left after pins "
                    f"({headroom} tokens of headroom kept for the next turns' appends)"
                )
            if cfg.keep_recent_turns > 0:
                for p in range(n - 1, -1, -1):  # newest first
                    if now - cand[p].turn >= cfg.keep_recent_turns:
                        break
                    full = shapes[p].options[0]
                    if full.tokens <= room:
                        chosen[p] = full
                        room -= full.tokens
            knapsack(plan, totals, chosen, room, reuse)

        # ---- the window: pins, then chosen candidates in id order
        entries: list[Entry] = []
        imp_cap = 1.0
        for m in pins:
            entries.append(self.forms.entry(tok, m, "full", totals[plan.midx[m.id]], ("pinned",), terms))
        # Why each entry is in, written out in the loop rather than a method call per entry (~900 per
        # re-solve): recent, relevant, referenced, important, else kept for its value per token.
        entry, rel_get = self.forms.entry, relevance.get
        # A chosen item whose score is frozen (see solve_reuse) and that is not recent gets the same
        # Entry as when it was last chosen in the same form: it is handed back instead of rebuilt.
        frozen = reuse.frozen_now if reuse is not None else 0
        kept = reuse.kept_entries() if reuse is not None else None
        for p in sorted(chosen):
            m = cand[p]
            mi = cand_midx[p]
            recent = pw[m.turn] >= 0.5
            if kept is not None and mi < frozen and not recent:
                form = chosen[p].form
                hit = kept.get(p)
                if hit is not None and hit[0] == form:
                    entries.append(hit[1])
                    continue
            total = totals[mi]
            out: list[str] = []
            if recent:
                ago = now - m.turn
                out.append("recent (this turn)" if ago == 0 else f"recent ({ago} turn{'' if ago == 1 else 's'} ago)")
            rel = rel_get(m.id, 0.0)
            if rel > 0:
                out.append(f"relevant to query (bm25 {rel:.2f})")
            if m.inbound:
                out.append(f"referenced by {counted(m.inbound, 'item')}")
            if min(m.importance, imp_cap) > 0:
                out.append(f"importance {min(m.importance, imp_cap):g}")
            if not out:
                out.append(f"best value per token among the rest (score {total:.3f})")
            e = entry(tok, m, chosen[p].form, total, tuple(out), terms)
            entries.append(e)
            if kept is not None and mi < frozen and not recent:
                kept[p] = (e.form, e)

        explicit = [
            Dropped(m.id, m.kind.value, totals[plan.midx[m.id]], cost, reason)
            for m, cost, reason in plan.excluded
        ]
        if len(chosen) == n:
            nofit_ids: list[int] = []
            nofit_scores: list[float] = []
        else:
            keep = bytearray(b"\x01") * n  # C-level filtering: thousands of items are left out
            for p in chosen:
                keep[p] = 0
            nofit_ids = list(compress(plan.cand_ids, keep))
            nofit_scores = list(compress(map(totals.__getitem__, cand_midx), keep))
        by_id = self.state.by_id
        midx = plan.midx

        def lookup(item_id: int) -> tuple[str, int, str]:
            return by_id[item_id].kind.value, full_cost[plan.pos_of[midx[item_id]]], _NO_FIT

        dropped = DroppedList(explicit, nofit_ids, nofit_scores, lookup)
        return self.forms.window(b, tok, lane, query, mode, entries, dropped, notes)

    def _headroom(self, plan: SolvePlan, usable: int) -> int:
        """Tokens a sticky re-solve leaves free so the next turns can append without re-solving.

        Adaptive: the recent growth per turn (full cost of the items added over the last
        `growth_window_turns` turns) times `headroom_turns`, capped at (1 - resolve_fill) of the
        budget. When even that cap cannot hold one turn's growth, the next turn re-solves anyway, so
        no headroom is kept and the whole budget holds context instead.
        """
        cfg = self.state.config
        cap = int(usable * (1.0 - cfg.resolve_fill))
        if cap <= 0:
            return 0
        span = max(1, int(cfg.growth_window_turns))
        since = self.state.turn - span
        recent = 0
        for p in range(len(plan.cand) - 1, -1, -1):
            if plan.cand[p].turn < since:
                break
            recent += plan.full_cost[p]
        growth = recent / span
        if growth <= 0:
            return cap
        if growth > cap:
            return 0
        return min(cap, int(growth * cfg.headroom_turns))


def knapsack(
    plan: SolvePlan, totals: list[float], chosen: dict[int, Option], capacity: int, reuse: Reuse | None = None
) -> None:
    """Greedy multiple-choice knapsack over the plan's hull steps; adds to `chosen` in place.

    Each candidate's hull steps have strictly decreasing value per token, so sorting every step
    by (value per token desc, candidate, level) is exactly the order in which a heap over each
    candidate's next step would pop them (the sort is stable and steps are pre-ordered by
    candidate and level). A step that does not fit ends that candidate's upgrades; its most
    valuable cheaper off-hull form is taken if it fits. After MAX_CONSECUTIVE_MISSES misses in a
    row the budget is within a stub of full and the walk stops. With `reuse` (the totals are its
    own), the weights, values per token and their order come from it: the same lists.
    """
    if capacity <= 0:
        return
    if reuse is not None:
        reused = reuse.weights(plan)
        if reused is not None:
            w, effs = reused
            reuse.walked(_walk(plan, w, reuse.order(plan, effs), chosen, capacity))
            return
    # C-level maps (the same products as a loop, a few thousand per re-solve).
    size = list(map(_size, plan.shapes))
    w = list(map(mul, map(totals.__getitem__, plan.cand_midx), size))
    for p, members in plan.dup:  # a duplicate group is worth its best member
        w[p] = max(totals[i] for i in members) * size[p]
    effs = list(map(mul, map(w.__getitem__, plan.step_cand), plan.step_ratio))
    order = sorted(range(len(effs)), key=effs.__getitem__, reverse=True)
    _walk(plan, w, order, chosen, capacity)


def _walk(
    plan: SolvePlan, w: list[float], order: Iterable[int], chosen: dict[int, Option], capacity: int
) -> int:
    """The knapsack's walk over steps in `order`; returns how many steps of it were taken."""
    done: set[int] = set(chosen)
    if min(w, default=1.0) <= 0:
        done.update(p for p, x in enumerate(w) if x <= 0)
    level_of: dict[int, int] = {}
    shapes, step_cand, step_level, step_dt = plan.shapes, plan.step_cand, plan.step_level, plan.step_dt
    remaining = capacity
    misses = 0
    taken = 0
    for j in order:
        taken += 1
        c = step_cand[j]
        if c in done:
            continue
        dt = step_dt[j]
        if dt > remaining:
            misses += 1
            done.add(c)
            shape = shapes[c]
            lv = level_of.get(c)
            cur_t = shape.hull[lv].tokens if lv is not None else 0
            cur_f = shape.hull[lv].value if lv is not None else 0.0
            for o in shape.by_value:
                if o.value <= cur_f:
                    break
                if o.tokens - cur_t <= remaining:
                    remaining -= o.tokens - cur_t
                    level_of[c] = -1 - shape.options.index(o)  # negative = an off-hull option
                    misses = 0
                    break
            if misses >= MAX_CONSECUTIVE_MISSES or remaining <= 0:
                break
            continue
        misses = 0
        remaining -= dt
        level_of[c] = step_level[j]
        if remaining <= 0:
            break
    for c, lv in level_of.items():
        shape = shapes[c]
        chosen[c] = shape.hull[lv] if lv >= 0 else shape.options[-1 - lv]
    return taken
