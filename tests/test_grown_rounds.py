"""Measure.rounds of a history that only grew: the closed rounds of the one it grew from are not copied
(GrownRounds), one list of them per lineage, appended to in place. Every split must read as
history_rounds' of the same history, whichever history of a lineage is asked again or grown again (a
branch: another column's history, last turn's again), and the view must read as the list."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text
from engine.assembly import Measure
from engine.dropped_history import GrownRounds
from engine.history_rounds import history_rounds
from engine.tokens import CharTokenizer, TokenCounter

_ROLES = st.lists(st.sampled_from(["assistant", "user", "user"]), min_size=1, max_size=4)


def _msgs(roles: list[str], k: int) -> tuple[Message, ...]:
    return tuple(Message(r, (Text(f"{r} {k}.{i}"),)) for i, r in enumerate(roles))


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 6), _ROLES), min_size=1, max_size=25))
def test_every_split_is_history_rounds(steps: list[tuple[int, list[str]]]) -> None:
    m = Measure(TokenCounter(CharTokenizer()))
    m.prefix_min = 1
    seen: list[tuple[Any, ...]] = [(Message("user", (Text("the task"),)),)]
    asked: list[tuple[tuple[Any, ...], Any]] = []
    for k, (back, roles) in enumerate(steps):
        base = seen[max(0, len(seen) - 1 - back)]  # the newest, or an older one: a branch
        items = base + _msgs(roles, k)
        seen.append(items)
        got = m.rounds(items)
        assert got == history_rounds(items) and list(got) == history_rounds(items)
        asked.append((items, got))
    for items, got in asked:  # what was handed out earlier still reads as it did
        assert list(got) == history_rounds(items)


@given(n=st.integers(0, 8), data=st.data())
def test_the_view_reads_as_the_list(n: int, data: st.DataObject) -> None:
    closed = [(2 * i, 2 * i + 2) for i in range(n + 3)]  # longer than the view: read only the first n
    view = GrownRounds(closed, n, (2 * n, 2 * n + 5))
    want = closed[:n] + [(2 * n, 2 * n + 5)]
    assert len(view) == len(want) and list(view) == want and view == want
    for i in range(-len(want), len(want)):
        assert view[i] == want[i]
    with pytest.raises(IndexError):
        view[len(want)]
    a = data.draw(st.integers(-n - 3, n + 3))
    b = data.draw(st.integers(-n - 3, n + 3))
    step = data.draw(st.sampled_from([None, 1, 2, -1]))
    assert view[a:b:step] == want[a:b:step]


def test_a_branch_does_not_see_the_other_branchs_rounds() -> None:
    closed = [(0, 1), (1, 3)]
    v = GrownRounds(closed, 2, (3, 5))
    a = v.grown([6, 8], 9)  # in place: closed is v's own to its end
    b = v.grown([7], 8)  # closed was extended past v's n: a copy
    assert list(a) == [(0, 1), (1, 3), (3, 6), (6, 8), (8, 9)]
    assert list(b) == [(0, 1), (1, 3), (3, 7), (7, 8)]
    assert list(v) == [(0, 1), (1, 3), (3, 5)]
