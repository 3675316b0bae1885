"""Plan's budget allocation: what each section gives up when the request does not fit."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.plan import Plan, Reserves, SectionEstimate, Thresholds, _water_fill, allocate, plan_of
from engine.types import CacheScope, Priority, SectionKind, Tier


@given(st.lists(st.integers(0, 50_000), min_size=1, max_size=8), st.data())
def test_water_fill_frees_exactly_the_cut_and_takes_from_the_largest(
    sizes: list[int], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, sum(sizes)))
    kept = _water_fill(sizes, cut)
    assert sum(kept) == sum(sizes) - cut
    assert all(0 <= k <= s for k, s in zip(kept, sizes, strict=True))
    # Max-min fair: a section keeps all of itself unless it is at least as big as every cut one's budget.
    for k, s in zip(kept, sizes, strict=True):
        if k < s:
            assert all(kept[j] <= k + 1 for j in range(len(sizes)) if sizes[j] >= s)
            assert all(kept[j] == sizes[j] for j in range(len(sizes)) if sizes[j] < k)


def _sec(sid: str, kind: SectionKind, prio: Priority, tokens: int) -> SectionEstimate:
    return SectionEstimate(sid, sid, kind, CacheScope.SESSION, prio, tokens)


def test_history_shrinks_before_a_small_memory_section() -> None:
    secs = (
        _sec("identity", SectionKind.IDENTITY, Priority.NEVER, 30),
        _sec("memory", SectionKind.MEMORY, Priority.NORMAL, 17),
        _sec("history", SectionKind.HISTORY, Priority.NORMAL, 40_000),
        _sec("notes", SectionKind.CONTEXT, Priority.FIRST, 500),
    )
    b = allocate(secs, 8_000)
    assert b["identity"] == 30 and b["memory"] == 17  # Never keeps its size; the small section is untouched
    assert b["notes"] == 0  # First-priority content gives up everything before Normal content is cut
    assert sum(b.values()) == 8_000 and b["history"] == 8_000 - 30 - 17


def _allocate_reference(sections: tuple[SectionEstimate, ...], ceiling: int) -> dict[str, int]:
    """allocate as it was written before its fast paths (2026-12-06): every priority's group through
    _water_fill, one section or many."""
    budgets = {s.id: s.tokens if s.max_tokens is None else min(s.tokens, s.max_tokens) for s in sections}
    excess = sum(budgets.values()) - ceiling
    for prio in (Priority.FIRST, Priority.NORMAL, Priority.LAST_RESORT):
        if excess <= 0:
            break
        group = [s.id for s in sections if s.priority == prio and s.kind != SectionKind.GOAL]
        sizes = [budgets[sid] for sid in group]
        cut = min(excess, sum(sizes))
        for sid, new in zip(group, _water_fill(sizes, cut), strict=True):
            budgets[sid] = new
        excess -= cut
    return budgets


_ESTIMATES = st.builds(
    SectionEstimate,
    st.sampled_from(("identity", "tools", "memory", "history", "goal", "notes")),  # ids repeat at times
    st.just("s"),
    st.sampled_from((SectionKind.IDENTITY, SectionKind.HISTORY, SectionKind.GOAL, SectionKind.MEMORY)),
    st.just(CacheScope.SESSION),
    st.sampled_from(tuple(Priority)),
    st.one_of(st.integers(-50, 50), st.integers(0, 200_000)),
    st.one_of(st.none(), st.integers(0, 100_000)),
)


@given(st.lists(_ESTIMATES, max_size=7).map(tuple), st.integers(-1_000, 400_000))
def test_allocate_fast_paths_give_what_water_filling_every_group_gives(
    sections: tuple[SectionEstimate, ...], ceiling: int
) -> None:
    # The fast paths (everything fits; a priority with one section) answer as the general one does,
    # budgets and their order, on any sections: repeated ids, capped ones, a goal, negative sizes.
    got = allocate(sections, ceiling)
    want = _allocate_reference(sections, ceiling)
    assert list(got.items()) == list(want.items())


def test_plan_of_gives_the_plan_the_dataclass_fields_describe() -> None:
    secs = (
        _sec("identity", SectionKind.IDENTITY, Priority.NEVER, 30),
        _sec("history", SectionKind.HISTORY, Priority.NORMAL, 140_000),
    )
    p = plan_of(128_000, 125_440, Thresholds(), Reserves(40, 0, 0), secs)
    assert (p.ceiling, p.estimated_tokens, p.budgets) == (125_400, 140_030, {"identity": 30, "history": 125_370})
    assert p == Plan(**{f.name: getattr(p, f.name) for f in fields(Plan)})
    assert replace(p, reason="x").reason == "x" and replace(p, reason="x").budgets == p.budgets
    assert Plan(0.1, 0.1, Tier.NORMAL, Tier.NORMAL, Tier.NORMAL, False, "r", 1, 0).budgets == {}
    with pytest.raises(FrozenInstanceError):
        p.ceiling = 1  # type: ignore[misc]
