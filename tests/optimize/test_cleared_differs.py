"""A history holding a message the last cleared history cleared is told apart from that cleared history
in one lookup (Measure.starts_with), not by comparing the two conversations up to the cleared result:
wave 1 splits each turn's raw history after clearing it (Measure.cleared_from), and the rounds memo asked
whether it starts with last turn's cleared history (5,871 times over the 6,000-turn what-if, by value
most of the conversation each time). The answer must be the comparison's."""

from __future__ import annotations

from typing import Any

from engine.optimize import OptimizeLimits
from tests.optimize.test_cleared_links import _cleared, _round, _start


class _NoSlices(tuple[Any, ...]):
    """A history whose whole-prefix comparison (a slice) fails the test: only items are read."""

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            raise AssertionError("compared by value")
        return super().__getitem__(i)


def test_a_raw_history_is_told_from_the_cleared_one_without_a_comparison() -> None:
    m, items = _start(30)
    limits = OptimizeLimits(max_clear_tokens=10**9)
    cleared = _cleared(m, items, limits)
    assert cleared != items and cleared[-1] == items[-1]
    grown = items + _round(99, 800)
    assert grown[: len(cleared)] != cleared
    assert not m.starts_with(_NoSlices(grown), cleared)


def test_the_answers_are_the_comparisons_turn_by_turn() -> None:
    m, items = _start(20)
    prev: tuple[Any, ...] = ()
    for t in range(30):
        raw = items
        got = _cleared(m, items, OptimizeLimits(max_clear_tokens=3_000 if t % 4 else 10**9))
        for a, b in ((raw, got), (got, raw), (items, prev), (prev, items), (got, prev)):
            assert m.starts_with(a, b) == (a[: len(b)] == b)
        prev = got
        items = items + _round(100 + t, 800 if t % 3 else 10)
