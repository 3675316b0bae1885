"""DroppedSums: a kept history's running sums read in place from the cut history's (Measure.cumulative
of a history drop_range kept), figure for figure what dropped_sums copies, extended as a lineage's list
is, and the path Measure.cumulative takes for a kept history (no copy of every kept item's figure)."""

from __future__ import annotations

from itertools import accumulate

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text
from engine.assembly import Measure
from engine.dropped_history import DroppedSums
from engine.tokens import CharTokenizer, TokenCounter
from tests.support.kept_history import dropped_sums, kept_after_drop


@settings(max_examples=300, deadline=None)
@given(
    counts=st.lists(st.integers(0, 50), min_size=1, max_size=30),
    cut=st.tuples(st.integers(1, 30), st.integers(0, 30)),
    head=st.integers(-5, 40),
    more=st.lists(st.integers(0, 50), max_size=5),
    grown=st.lists(st.integers(0, 50), max_size=5),
)
def test_the_view_reads_as_the_copy(
    counts: list[int], cut: tuple[int, int], head: int, more: list[int], grown: list[int]
) -> None:
    n = len(counts)
    start = min(cut[0], n)
    end = min(n, start + cut[1])
    sums = list(accumulate(counts, initial=0))
    want = dropped_sums(sums, n, start, end, head)
    view = DroppedSums(sums, n, start, end, head)
    # The cut history's lineage may grow later (its first n + 1 figures stay): the view does not move.
    sums += accumulate(grown, initial=sums[-1])
    assert len(view) == len(want)
    assert [view[i] for i in range(len(view))] == want == view[:] == list(view)
    assert view[-1] == want[-1] and view == want
    view.extend(accumulate(more, initial=want[-1]))
    want += accumulate(more, initial=want[-1])
    assert list(view) == want and view[len(want) - 1] == want[-1]


def test_a_kept_histories_sums_are_the_view() -> None:
    m, kept = kept_after_drop()
    got = m.cumulative(kept)
    assert isinstance(got, DroppedSums)
    fresh = Measure(TokenCounter(CharTokenizer())).cumulative(kept)
    assert list(got) == list(fresh)
    # A history grown from the kept one extends the same lineage's figures.
    grown = kept + (Message("assistant", (Text("next"),)),)
    assert list(m.cumulative(grown)) == list(Measure(TokenCounter(CharTokenizer())).cumulative(grown))
