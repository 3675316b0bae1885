"""The solve plan: everything a fresh solve needs that does not depend on the turn or the query's scores.

Exclusions (superseded, covered by a summary, duplicates), the dedup groups, each item's shape, its
hull steps and the static part of its score are recomputed only after a write; per call only the
turn-dependent recency, the query's BM25 and the knapsack walk run (see `solve`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from engine.store.forms import Forms
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

    def plan(self, tok: Tokenizer, terms: tuple[str, ...]) -> SolvePlan:
        """The plan for this tokenizer (and query, when JSON summaries depend on it), cached until the
        items change."""
        key = (tok.name, self.state.gen, terms if self.state.has_json else ())
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        cfg = self.state.config
        metas = self.state.metas
        midx = {m.id: i for i, m in enumerate(metas)}
        pins = [m for m in metas if m.pinned]
        pin_cost = [(m.id, self.forms.cost(tok, m.id)) for m in pins]
        excluded: list[tuple[ItemMeta, int, str]] = []
        pinned_hashes = {m.hash: m.id for m in pins}
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
            elif m.hash in pinned_hashes:
                excluded.append(
                    (m, self.forms.cost(tok, m.id), f"duplicate of pinned #{pinned_hashes[m.hash]}")
                )
            else:
                live.append(m)
                members.setdefault(m.hash, []).append(m.id)
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
            group = members[m.hash]
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
            prev_t, prev_v = 0, 0.0
            for lv, o in enumerate(shape.hull):
                dt = o.tokens - prev_t
                step_cand.append(pos)
                step_level.append(lv)
                step_dt.append(dt)
                step_ratio.append(
                    (o.value - prev_v) / (dt if lv == 0 else max(1, dt)) if dt > 0 else _INF_RATIO
                )
                prev_t, prev_v = o.tokens, o.value
        base, wf, wi = cfg.base, cfg.w_refs, cfg.w_importance
        static = [
            base
            + (
                wf * (1.0 - 1.0 / (1.0 + m.inbound)) if m.inbound else 0.0
            )  # saturating: 1st citation counts most
            + wi * (m.importance if m.importance < 1.0 else 1.0)
            for m in metas
        ]
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
        self._cache = (key, plan)
        return plan
