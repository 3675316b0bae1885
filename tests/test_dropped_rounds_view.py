"""DroppedRounds: a kept history's rounds read in place from the cut history's (Measure.rounds of a
history drop_range kept), round for round what history_rounds splits of the kept history itself, through
the slices, appends and extensions its readers make, and the path Measure.rounds takes for a kept history
(no copy of every kept round)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, SectionItem, Text
from engine.dropped_history import MAX_DEPTH, DroppedRounds, Rounds, dropped_rounds
from engine.history_rounds import _extend_rounds, history_rounds
from tests.support.kept_history import kept_after_drop


def _history(roles: list[bool]) -> tuple[SectionItem, ...]:
    """A task message, then one message a role (True: assistant)."""
    return (Message("user", (Text("task"),)),) + tuple(
        Message("assistant" if a else "user", (Text(f"m{k}"),)) for k, a in enumerate(roles)
    )


def _cut(items: tuple[SectionItem, ...], pick: tuple[int, int]) -> tuple[int, int] | None:
    """Whole rounds [start, end) of items to drop (never the task's round, never the newest), by pick."""
    bounds = history_rounds(items)
    if len(bounds) < 3:
        return None
    a = 1 + pick[0] % (len(bounds) - 2)
    b = a + pick[1] % (len(bounds) - 1 - a)
    return bounds[a][0], bounds[b][0]


@settings(max_examples=300, deadline=None)
@given(
    roles=st.lists(st.booleans(), min_size=2, max_size=40),
    picks=st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)), min_size=1, max_size=5),
    grown=st.lists(st.booleans(), max_size=6),
    sl=st.tuples(st.integers(-45, 45), st.integers(-45, 45)),
)
def test_the_view_reads_as_the_split(
    roles: list[bool], picks: list[tuple[int, int]], grown: list[bool], sl: tuple[int, int]
) -> None:
    items = _history(roles)
    bounds: Rounds = history_rounds(items)
    for pick in picks:  # a cut of a kept history is a view of a view (flattened past MAX_DEPTH)
        cut = _cut(items, pick)
        if cut is None:
            break
        start, end = cut
        items = items[:start] + items[end:]
        got = dropped_rounds(bounds, start, end)
        assert got is not None
        want = history_rounds(items)
        assert len(got) == len(want)
        assert [got[i] for i in range(len(got))] == want == list(got) == got[:]
        assert [got[-i] for i in range(1, len(got) + 1)] == [want[-i] for i in range(1, len(want) + 1)]
        assert not isinstance(got, DroppedRounds) or got.depth <= MAX_DEPTH
        bounds = got
    # The readers' slices, and slices of slices, are views reading the same rounds.
    want = history_rounds(items)
    a, b = sl
    assert list(bounds[a:b]) == want[a:b] and bounds[a:b] == want[a:b]
    assert list(bounds[1:-1][a:b]) == want[1:-1][a:b] and len(bounds[1:-1]) == len(want[1:-1])
    # A grown history's split extends the view (Measure.rounds' _extend_rounds: [:-1], append, extend).
    if grown:
        more = items + tuple(Message("assistant" if x else "user", (Text("n"),)) for x in grown)
        ext = _extend_rounds(bounds, more, len(items))
        assert ext == history_rounds(more) and list(ext[1:-1]) == history_rounds(more)[1:-1]
        assert list(bounds) == want  # the view it was extended from is unchanged
        if len(ext) > 2:
            assert ext[-2] == history_rounds(more)[-2] and ext[len(ext) - 1] == history_rounds(more)[-1]


def test_a_cut_where_no_round_starts_is_refused() -> None:
    items = _history([True, False, True, False, True, False])
    bounds = history_rounds(items)  # rounds start at 0 (the task), 1, 3, 5
    assert dropped_rounds(bounds, 2, 3) is None and dropped_rounds(bounds, 1, 2) is None
    assert dropped_rounds(bounds, 1, len(items)) is None  # no round starts at the end
    assert dropped_rounds(bounds, 1, 3) == history_rounds(items[:1] + items[3:])


def test_a_kept_histories_rounds_are_the_view() -> None:
    m, kept = kept_after_drop()
    got = m.rounds(kept)
    assert isinstance(got, DroppedRounds)
    assert got == history_rounds(kept) and isinstance(got[1:-1], DroppedRounds)
    # A history grown from the kept one is split from the view: the same rounds as a fresh split.
    grown = kept + (Message("assistant", (Text("next"),)), Message("user", (Text("r"),)))
    assert m.rounds(grown) == history_rounds(grown)
