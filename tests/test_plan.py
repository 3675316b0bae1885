"""Plan's budget allocation: what each section gives up when the request does not fit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.plan import SectionEstimate, _water_fill, allocate
from engine.types import CacheScope, Priority, SectionKind


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
