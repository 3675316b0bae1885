"""The express lane's remembered cut, carried or counted on from the history it grew from; and its
lineage, extended from the raw history it grew from.

The lane's applied history is the last turn's plus what was appended (cost_aware._extend builds it so),
so it hands that last history to cost_aware._choose_cut (`grown`): a cut remembered in it is carried
(the tokens to drop still fall between what one round fewer and the chosen rounds hold) or counted on
(they outgrew it) without comparing the two histories, and a carried cut is remembered again in the new
history, so the next turn's history grew from its memo's too. A hypothesis test drives random histories
through _choose_cut that way and from scratch (no memo) with a target that moves turn by turn (the
calibration moves it), and requires the same cut and the same remembered bounds each turn; it also
requires the memo to be followed that way on most turns (the comparison is what it saves).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text
from engine.assembly import Measure, Section
from engine.policy import CompactionState, cost_aware
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind
from tests.support.counting import LaneTurns, steady_rounds
from tests.test_held_turn_work import _round

SLOT = 7  # any hashable: _choose_cut keys its memo by it


def _history(items: tuple[Message, ...]) -> tuple[Section, ...]:
    return (Section("history", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, items),)


class _NoCompare:
    """Counts Measure.starts_with calls (what `grown` leaves out) while the block runs."""

    def __init__(self, m: Measure) -> None:
        self.m, self.calls, self.real = m, 0, m.starts_with

    def __enter__(self) -> _NoCompare:
        def counting(items: Any, prev: Any) -> bool:
            self.calls += 1
            return self.real(items, prev)

        self.m.starts_with = counting  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.m.starts_with


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.lists(st.integers(1, 400), min_size=0, max_size=3),  # sizes of the rounds appended
            st.booleans(),  # a plain user message after them
            st.integers(-60, 60),  # the target's move this turn (the calibration)
        ),
        min_size=2,
        max_size=40,
    ),
    first=st.lists(st.integers(1, 400), min_size=0, max_size=12),
    target=st.integers(0, 3_000),
)
def test_a_cut_from_the_history_it_grew_from_equals_choosing_afresh(
    steps: list[tuple[list[int], bool, int]], first: list[int], target: int
) -> None:
    m = Measure(TokenCounter(CharTokenizer()))
    task = Message("user", (Text("Fix the bug."),))
    items: tuple[Message, ...] = (task,) + tuple(x for i, n in enumerate(first) for x in _round(i, n))
    carry: dict[str, Any] = {}
    state = CompactionState()
    t = len(first)
    prev: tuple[Message, ...] | None = None
    for sizes, user, move in steps:
        new: list[Message] = []
        for n in sizes:
            new.extend(_round(t, n))
            t += 1
        if user or not new:
            new.append(Message("user", (Text(f"also {t}"),)))
        items = items + tuple(new)  # appended to the last history, as _extend makes it
        target = max(0, target + move)
        asm = _history(items)
        full = len(items)
        got = cost_aware._choose_cut(asm, state, target, m, full, carry, SLOT, None, prev)
        want = cost_aware._choose_cut(asm, state, target, m, full)
        assert got == want
        memo = carry.get(cost_aware.CUT_CARRY, {}).get(SLOT)
        if memo is not None and memo.items is items:
            # Remembered in this history (carried, counted on or chosen): its bounds are this history's.
            droppable = m.rounds(items)[1:-1]
            cum = m.cumulative(items)
            k = memo.cut.dropped_rounds
            assert got is not None and memo.cut[:4] == got[:4]
            below = cum[droppable[k - 1][0]] - cum[droppable[0][0]] if k > 1 else -math.inf
            assert memo.below == below
            assert memo.cut.dropped_tokens == cum[droppable[k - 1][1]] - cum[droppable[0][0]]
        prev = items


def test_the_lane_follows_its_memo_without_comparing_histories() -> None:
    """A steady run (rounds of one size above the target): after the first choice every turn's cut is
    carried or counted on from the history it grew from, with no comparison of histories."""
    m = Measure(TokenCounter(CharTokenizer()))
    task = Message("user", (Text("Fix the bug."),))
    items: tuple[Message, ...] = (task,) + tuple(x for i in range(6) for x in _round(i, 200))
    carry: dict[str, Any] = {}
    prev = None
    followed = 0
    for t in range(6, 60):
        items = items + _round(t, 200)
        asm = _history(items)
        known = (0, m.total(asm))  # (the lane's: the history's index and the request's tokens)
        with _NoCompare(m) as seen:
            got = cost_aware._choose_cut(asm, CompactionState(), 900, m, len(items), carry, SLOT, known, prev)
        assert got == cost_aware._choose_cut(asm, CompactionState(), 900, m, len(items))
        memo = carry[cost_aware.CUT_CARRY][SLOT]
        assert memo.items is items  # remembered in this very history, for the next turn's `grown`
        followed += prev is not None and seen.calls == 0
        prev = items
    assert followed >= 50, followed


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_lane_turn_extends_its_lineage_without_comparing_the_raw_histories(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lane makes the turn's raw history as the last one's plus the appended messages and tells
    cost_aware._extend so (`appended`): no lane turn compares the two (Measure.starts_with), which on the
    old code each lane turn did once over the whole raw history since the cut."""
    lane_raw: list[Any] = []
    compared: list[int] = []
    real = Measure.starts_with

    def starts_with(self: Measure, items: Any, prev: Any) -> bool:
        if lane.inside and lane_raw and prev is lane_raw[-1]:
            compared.append(len(prev))
        return real(self, items, prev)

    def before(pipe: Any, c: Any) -> None:
        lane_raw.append(c.full[c.hidx].items)

    lane = LaneTurns(monkeypatch, before=before)
    monkeypatch.setattr(Measure, "starts_with", starts_with)
    steady_rounds(provider)
    assert lane.taken >= 20, lane.taken
    assert compared == []
