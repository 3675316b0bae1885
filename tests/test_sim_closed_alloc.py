"""The carried gates-closed build's history budget, remembered while only the history grows
(engine/sim/closed_cut.py, ClosedCut.history_budget and _Alloc).

The remembered budget must be what allocate gives from scratch for every larger history, under the same
ceiling and the same sections before the history; where another section shares the history's priority
(the water-filling then moves the history's budget with its size) nothing is remembered. And a carried
build whose remembered budget is off is caught by the turn-by-turn equality with the rule's builds.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import pipeline_closed_reads as closed_reads
from engine.assembly import Section
from engine.plan import SectionEstimate, allocate
from engine.sim import closed_cut
from engine.sim.closed_cut import ClosedCut, _Lane
from engine.tokens import REPLY_PRIMING_TOKENS
from engine.types import CacheScope, Priority, SectionKind
from tests.support.sim_builds import closed_builds, rounds_session


class _Measure:
    """Section totals by id (what history_budget reads of a Measure)."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes

    def section(self, s: Section) -> int:
        return self.sizes[s.id]


class _Pipe:
    def __init__(self, sizes: dict[str, int]) -> None:
        self.measure = _Measure(sizes)

    def _estimate(self, s: Section) -> SectionEstimate:
        return SectionEstimate(s.id, s.name, s.kind, s.scope, s.priority, self.measure.section(s))


_KINDS = [SectionKind.IDENTITY, SectionKind.MEMORY, SectionKind.GOAL, SectionKind.CONTEXT]
_PRIOS = [Priority.NEVER, Priority.LAST_RESORT, Priority.NORMAL, Priority.FIRST]


def _fresh(pipe: _Pipe, sources: tuple[Section, ...], k: Section, size: int, ceiling: int) -> int | None:
    """The history's budget as carried works it out from scratch (no memo), None where it hands back."""
    m = pipe.measure
    ests = (
        *(closed_reads.estimate(pipe, s) for s in sources),
        SectionEstimate(k.id, k.name, k.kind, k.scope, k.priority, size),
    )
    if sum(e.tokens for e in ests) + REPLY_PRIMING_TOKENS <= ceiling and len({e.id for e in ests}) == len(
        ests
    ):
        return None
    budgets = allocate(ests, ceiling)
    for s in sources:
        b = budgets.get(s.id)
        if b is not None and not closed_cut.protected(s) and m.section(s) > b:
            return None
    budget = budgets.get(k.id)
    if budget is None or size <= budget:
        return None
    return budget


def _sections(spec: list[tuple[int, int, int]]) -> tuple[tuple[Section, ...], dict[str, int]]:
    sources, sizes = [], {}
    for i, (kind, prio, tokens) in enumerate(spec):
        sid = f"s{i}"
        sources.append(Section(sid, sid, _KINDS[kind], CacheScope.NONE, _PRIOS[prio], ()))
        sizes[sid] = tokens
    return tuple(sources), sizes


_HIST = Section("history", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, ())


@settings(max_examples=200, deadline=None)
@given(
    spec=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3000)), max_size=5),
    ceilings=st.lists(st.sampled_from([3000, 5000, 8000]), min_size=1, max_size=3),
    steps=st.lists(st.integers(0, 900), min_size=1, max_size=25),
    start=st.integers(0, 6000),
)
def test_the_remembered_budget_equals_allocate_from_scratch(
    spec: list[tuple[int, int, int]], ceilings: list[int], steps: list[int], start: int
) -> None:
    sources, sizes = _sections(spec)
    pipe = _Pipe(sizes)
    lane = _Lane(None)  # type: ignore[arg-type]
    size = start
    for j, step in enumerate(steps):
        size += step
        ceiling = ceilings[j % len(ceilings)]
        want = _fresh(pipe, sources, _HIST, size, ceiling)
        got = ClosedCut.history_budget(pipe, lane, sources, _HIST, size, ceiling)  # type: ignore[arg-type]
        assert got == want, (j, size, ceiling)


def test_the_budget_is_remembered_where_only_the_history_gives() -> None:
    # Never; a First goal (kept); LastResort
    sources, sizes = _sections([(0, 0, 800), (2, 3, 500), (3, 1, 300)])
    pipe = _Pipe(sizes)
    lane = _Lane(None)  # type: ignore[arg-type]
    first = ClosedCut.history_budget(pipe, lane, sources, _HIST, 9000, 5000)  # type: ignore[arg-type]
    assert first == 5000 - 800 - 500 - 300 and lane.alloc is not None
    # Answered from the memo now: allocate is not called again while only the history grows.
    calls = []
    real = closed_cut.allocate
    try:
        closed_cut.allocate = lambda e, c: calls.append(c) or real(e, c)  # type: ignore[assignment]
        for size in (9000, 9500, 20000):
            assert ClosedCut.history_budget(pipe, lane, sources, _HIST, size, 5000) == first  # type: ignore[arg-type]
        assert not calls
        # Another ceiling (the calibration moves it every turn): the ceiling less what the others keep.
        assert ClosedCut.history_budget(pipe, lane, sources, _HIST, 9000, 6000) == 6000 - 1600  # type: ignore[arg-type]
        assert not calls
        # A history within that budget: worked out again (None: nothing to cut).
        assert ClosedCut.history_budget(pipe, lane, sources, _HIST, 3000, 5000) is None  # type: ignore[arg-type]
    finally:
        closed_cut.allocate = real  # type: ignore[assignment]


def test_nothing_is_remembered_where_another_section_shares_the_history_priority() -> None:
    """Another Normal section (here a protected one) water-fills with the history: not the case the
    memo's reasoning covers, so each answer is worked out afresh."""
    sources, sizes = _sections([(0, 2, 4500)])
    pipe = _Pipe(sizes)
    lane = _Lane(None)  # type: ignore[arg-type]
    for n in (3700, 5000, 6000, 9000):
        got = ClosedCut.history_budget(pipe, lane, sources, _HIST, n, 8001)  # type: ignore[arg-type]
        assert got == _fresh(pipe, sources, _HIST, n, 8001)
        assert lane.alloc is None


def test_a_wrong_remembered_budget_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    events = rounds_session("deepseek", 60, [1, 2], [8, 40, 20], 2, 7, 0)
    want = closed_builds(events, 6000, carry=False)
    assert closed_builds(events, 6000, carry=True) == want
    real = closed_cut._Alloc

    def off(*a: Any) -> Any:
        return real(*a[:-1], a[-1] - 300)

    monkeypatch.setattr(closed_cut, "_Alloc", off)
    assert closed_builds(events, 6000, carry=True) != want
