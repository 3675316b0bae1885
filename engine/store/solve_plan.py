"""The solve plan: everything a fresh solve needs that does not depend on the turn or the query's scores.

Exclusions (superseded, covered by a summary, duplicates), the dedup groups, each item's shape, its
hull steps and the static part of its score are recomputed only after a write; per call only the
turn-dependent recency, the query's BM25 and the knapsack walk run (see `solve`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from engine.store.forms import Forms
from engine.store.gc_pause import collector_paused
from engine.store.items import ItemMeta
from engine.store.state import StoreState
from engine.store.window import Shape
from engine.tokens import Tokenizer

_INF_RATIO = 1e300  # a free step (0 extra tokens) comes first, like an infinite value per token


class SolvePlan(NamedTuple):
    """Built once per change of the items (and per query only when JSON summaries depend on it), as flat
    parallel lists so a solve is a few list comprehensions, one sort and a short walk.
    """

    pins: list[ItemMeta]
    pin_cost: list[tuple[int, int]]
    excluded: list[tuple[ItemMeta, int, str]]  # (item, full cost, reason) never offered to the solver
    # Candidates (one per dedup group, the newest copy), in id order:
    cand: list[ItemMeta]
    cand_ids: list[int]
    cand_midx: list[int]  # index into the store's metas (and the per-call score list)
    shapes: list[Shape]
    full_cost: list[int]
    dup: list[tuple[int, tuple[int, ...]]]  # (candidate position, member meta indices) for groups > 1
    # Hull steps of every candidate, ordered by (candidate, level): cost of the step and value per token
    # of the step per unit of the candidate's weight (score x size).
    step_cand: list[int]
    step_level: list[int]
    step_dt: list[int]
    step_ratio: list[float]
    # Score parts that change only when the items do: base + refs + importance, the turn, staleness.
    static: list[float]
    turns: list[int]
    distinct_turns: frozenset[int]
    stale_idx: list[int]
    midx: dict[int, int]  # item id -> meta index
    pos_of: dict[int, int]  # meta index -> candidate position


class Planner:
    """Builds and caches the solve plan (one per tokenizer, and per query when JSON summaries need it)."""

    def __init__(self, state: StoreState, forms: Forms) -> None:
        self.state = state
        self.forms = forms
        self._cache: tuple[tuple[Any, ...], SolvePlan] | None = None
        # What the cached plan was built over, to extend it when items were only appended since:
        # (tokenizer, layout generation, query variant, the metas list it read, how many it read).
        self._built: tuple[str, int, tuple[str, ...], list[ItemMeta], int] | None = None
        self._live_hashes: set[str] = set()  # content hashes of the cached plan's candidates
        self._pinned_hashes: set[str] = set()

    def plan(self, tok: Tokenizer, terms: tuple[str, ...]) -> SolvePlan:
        """The plan for this tokenizer (and query, when JSON summaries depend on it), cached until the
        items change, and extended in place when the only change is items appended since.

        Appends are what an agent does every turn; rebuilding the plan over every item for them made
        each re-solve cost a pass over the whole store (about 45 ms at 5,000 items).
        """
        st = self.state
        variant = terms if st.has_json else ()
        key = (tok.name, st.gen, variant)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        extended = self._extend(tok, terms, variant)
        if extended is not None:
            self._cache = (key, extended)
            return extended
        with collector_paused():  # a build allocates an object graph with no cycles (see gc_pause)
            plan = self._build(tok, terms)
        self._cache = (key, plan)
        self._built = (tok.name, st.layout_gen, variant, st.metas, len(st.metas))
        self._live_hashes = {m.dedup_key for m in plan.cand}
        self._pinned_hashes = {m.dedup_key for m in plan.pins}
        return plan

    def _extend(self, tok: Tokenizer, terms: tuple[str, ...], variant: tuple[str, ...]) -> SolvePlan | None:
        """The cached plan plus the items appended since it was built, or None when it must be rebuilt.

        Exact only for plain appends: no pin, no link to an older item, no summary, no reload (each of
        those bumps `layout_gen` or replaces the metas list), and no new copy of a known body (a copy
        takes over its group from an older candidate, which moves candidate positions).
        """
        st = self.state
        if self._cache is None or self._built is None:
            return None
        name, layout, built_variant, metas_ref, n_built = self._built
        metas = st.metas
        if (name, layout, built_variant) != (tok.name, st.layout_gen, variant) or metas_ref is not metas:
            return None
        new = metas[n_built:]
        seen = self._live_hashes
        fresh_hashes: set[str] = set()
        for m in new:
            if m.pinned or m.superseded or m.covered_by is not None or m.id in st.stale:
                return None
            key = m.dedup_key
            if key in seen or key in self._pinned_hashes or key in fresh_hashes:
                return None
            fresh_hashes.add(key)
        plan = self._cache[1]
        cfg = st.config
        base, wf, wi = cfg.base, cfg.w_refs, cfg.w_importance
        for mi in range(n_built, len(metas)):
            m = metas[mi]
            plan.midx[m.id] = mi
            plan.static.append(_static_score(m, base, wf, wi))
            plan.turns.append(m.turn)
            pos = len(plan.cand)
            shape = self.forms.shape(tok, m.id, False, terms)
            plan.cand.append(m)
            plan.cand_ids.append(m.id)
            plan.cand_midx.append(mi)
            plan.pos_of[mi] = pos
            plan.shapes.append(shape)
            plan.full_cost.append(shape.options[0].tokens)
            _add_steps(plan.step_cand, plan.step_level, plan.step_dt, plan.step_ratio, pos, shape)
        seen |= fresh_hashes
        self._built = (name, layout, variant, metas, len(metas))
        return plan._replace(
            distinct_turns=plan.distinct_turns | {metas[i].turn for i in range(n_built, len(metas))}
        )

    def _build(self, tok: Tokenizer, terms: tuple[str, ...]) -> SolvePlan:
        cfg = self.state.config
        metas = self.state.metas
        midx = {m.id: i for i, m in enumerate(metas)}
        pins = [m for m in metas if m.pinned]
        pin_cost = [(m.id, self.forms.cost(tok, m.id)) for m in pins]
        excluded: list[tuple[ItemMeta, int, str]] = []
        pinned_hashes = {m.dedup_key: m.id for m in pins}
        # Dedup: the newest copy of each content hash represents the group (it sits where the agent
        # last saw it); older copies cost nothing. A copy of a pinned item is represented by the pin.
        members: dict[str, list[int]] = {}
        live: list[ItemMeta] = []
        for m in metas:
            if m.pinned:
                continue
            if m.superseded:
                excluded.append((m, self.forms.cost(tok, m.id), "superseded by a rolled-forward summary"))
            elif m.covered_by is not None:
                excluded.append((m, self.forms.cost(tok, m.id), f"covered by summary #{m.covered_by}"))
            elif m.dedup_key in pinned_hashes:
                excluded.append(
                    (m, self.forms.cost(tok, m.id), f"duplicate of pinned #{pinned_hashes[m.dedup_key]}")
                )
            else:
                live.append(m)
                members.setdefault(m.dedup_key, []).append(m.id)
        cand: list[ItemMeta] = []
        cand_midx: list[int] = []
        shapes: list[Shape] = []
        full_cost: list[int] = []
        dup: list[tuple[int, tuple[int, ...]]] = []
        step_cand: list[int] = []
        step_level: list[int] = []
        step_dt: list[int] = []
        step_ratio: list[float] = []
        for m in live:
            group = members[m.dedup_key]
            rep = group[-1]  # metas are in id order: the last is the newest copy
            if rep != m.id:
                excluded.append((m, self.forms.cost(tok, m.id), f"duplicate of #{rep}"))
                continue
            pos = len(cand)
            shape = self.forms.shape(tok, m.id, m.id in self.state.stale, terms)
            cand.append(m)
            cand_midx.append(midx[m.id])
            shapes.append(shape)
            full_cost.append(shape.options[0].tokens)
            if len(group) > 1:
                dup.append((pos, tuple(midx[i] for i in group)))
            _add_steps(step_cand, step_level, step_dt, step_ratio, pos, shape)
        base, wf, wi = cfg.base, cfg.w_refs, cfg.w_importance
        static = [_static_score(m, base, wf, wi) for m in metas]
        turns = [m.turn for m in metas]
        stale_idx = [midx[i] for i in sorted(self.state.stale) if i in midx]
        plan = SolvePlan(
            pins,
            pin_cost,
            excluded,
            cand,
            [m.id for m in cand],
            cand_midx,
            shapes,
            full_cost,
            dup,
            step_cand,
            step_level,
            step_dt,
            step_ratio,
            static,
            turns,
            frozenset(turns),
            stale_idx,
            midx,
            {mi: p for p, mi in enumerate(cand_midx)},
        )
        return plan


def _static_score(m: ItemMeta, base: float, wf: float, wi: float) -> float:
    """The part of an item's score that changes only when the item does (refs saturate: the first
    citation counts most)."""
    refs = wf * (1.0 - 1.0 / (1.0 + m.inbound)) if m.inbound else 0.0
    return base + refs + wi * (m.importance if m.importance < 1.0 else 1.0)


def _add_steps(
    step_cand: list[int],
    step_level: list[int],
    step_dt: list[int],
    step_ratio: list[float],
    pos: int,
    shape: Shape,
) -> None:
    prev_t, prev_v = 0, 0.0
    for lv, o in enumerate(shape.hull):
        dt = o.tokens - prev_t
        step_cand.append(pos)
        step_level.append(lv)
        step_dt.append(dt)
        step_ratio.append((o.value - prev_v) / (dt if lv == 0 else max(1, dt)) if dt > 0 else _INF_RATIO)
        prev_t, prev_v = o.tokens, o.value
