"""Droppable: a history's droppable rounds (rounds[1:-1]) read in place, as the list slice reads.

The rules that cut rounds (drop_rounds' drop_oldest, the budget guarantee's trim, cost_aware's cut)
sliced the droppable rounds out of the history's split every build: a copy of every round of the
conversation (wave 1 splits its whole conversation every turn). The view must read as the slice."""

from __future__ import annotations

from bisect import bisect_left

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.dropped_history import DROPPABLE_VIEW, Droppable, DroppedRounds, droppable


def _rounds(n: int) -> list[tuple[int, int]]:
    return [(2 * i, 2 * i + 2) for i in range(n)]


@given(n=st.integers(0, 12), data=st.data())
def test_reads_as_the_slice(n: int, data: st.DataObject) -> None:
    rounds = _rounds(n)
    want = rounds[1:-1]
    got = Droppable(rounds)
    assert len(got) == len(want) and bool(got) == bool(want)
    assert list(got) == want
    for i in range(-len(want), len(want)):
        assert got[i] == want[i]
    for i in (len(want), -len(want) - 1):
        with pytest.raises(IndexError):
            got[i]
    a = data.draw(st.integers(-n - 2, n + 2))
    b = data.draw(st.integers(-n - 2, n + 2))
    assert got[a:b] == want[a:b]
    x = data.draw(st.integers(-1, 2 * n + 2))
    assert bisect_left(got, x, key=lambda r: r[0]) == bisect_left(want, x, key=lambda r: r[0])


def test_over_a_dropped_rounds_view() -> None:
    base = _rounds(10)
    kept = DroppedRounds(base, 2, 5, 6)  # rounds 2-4 dropped, later ones 6 places down
    assert list(Droppable(kept)) == list(kept)[1:-1]


def test_droppable_slices_few_and_views_many() -> None:
    # A window's few rounds are sliced out (in C); an uncompacted conversation's many are read in place.
    few, many = _rounds(DROPPABLE_VIEW - 1), _rounds(DROPPABLE_VIEW)
    assert type(droppable(few)) is list and droppable(few) == few[1:-1]
    assert isinstance(droppable(many), Droppable) and list(droppable(many)) == many[1:-1]
    kept = DroppedRounds(_rounds(10), 2, 5, 6)
    assert list(droppable(kept)) == list(kept)[1:-1]
