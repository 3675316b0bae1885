"""A kept history drop_range made is split and summed from the history it was cut from
(engine/dropped_history.py, Measure.dropped_from): on random grow / cut / rewrite sequences the carried
answers are the from-scratch ones (history_rounds, and the running sums of a Measure that never saw the
raw history), and the carried path is the one taken."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, SectionItem, Text, ToolCall, ToolResult
from engine.assembly import Measure, Section
from engine.dropped_history import dropped_rounds
from engine.history_rounds import history_rounds
from engine.optimize.history_ops import drop_oldest, drop_range
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind
from tests.support.kept_history import dropped_sums


def _measure() -> Measure:
    return Measure(TokenCounter(CharTokenizer()))


def _msg(rng: random.Random, k: int) -> Message:
    role = rng.choice(("assistant", "user", "assistant"))
    if role == "assistant":
        return Message("assistant", (ToolCall(f"c{k}", "bash", "x" * rng.randrange(40)),))
    return Message("user", (ToolResult(f"c{k}", "y" * rng.randrange(300)),))


def _section(items: tuple[SectionItem, ...]) -> Section:
    return Section("history", "History", SectionKind.HISTORY, CacheScope.SESSION, Priority.NORMAL, items)


def _fresh_sums(items: tuple[SectionItem, ...]) -> list[int]:
    return list(_measure().cumulative(items))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.lists(st.sampled_from(("grow", "cut", "rewrite", "cut_range")), max_size=30))
def test_carried_split_and_sums_equal_fresh(seed: int, steps: list[str]) -> None:
    rng = random.Random(seed)
    m = _measure()
    raw: tuple[SectionItem, ...] = (Message("user", (Text("the task " * rng.randrange(1, 9)),)),)
    raw += tuple(_msg(rng, k) for k in range(rng.randrange(12)))
    for step in steps:
        if step == "grow":
            raw += tuple(_msg(rng, len(raw) + k) for k in range(rng.randrange(1, 6)))
        elif step == "rewrite" and len(raw) > 1:
            i = rng.randrange(1, len(raw))
            raw = raw[:i] + (_msg(rng, -i),) + raw[i + 1 :]
        # The raw history's split and sums, as drop_oldest / oldest_to_drop ask for them first.
        assert m.rounds(raw) == history_rounds(raw)
        assert m.cumulative(raw)[: len(raw) + 1] == _fresh_sums(raw)
        bounds = history_rounds(raw)
        if len(bounds) < 3:
            continue
        asm = (_section(raw),)
        if step == "cut_range":  # any whole rounds [start, end), not only the oldest
            i = rng.randrange(1, len(bounds) - 1)
            j = rng.randrange(i, len(bounds) - 1)
            start, end = bounds[i][0], bounds[j][1] if j > i else bounds[i][0]
            cum = m.cumulative(raw)
            new, _ = drop_range(asm, 0, start, end, max(1, j - i), cum[end] - cum[start], m)
        else:
            new, _ = drop_oldest(asm, 0, rng.randrange(1, len(bounds) - 1), m)
        kept = new[0].items
        assert m.rounds(kept) == history_rounds(kept)
        assert m.cumulative(kept)[: len(kept) + 1] == _fresh_sums(kept)
        assert m.section(new[0]) == _fresh_sums(kept)[-1]


def test_derived_path_is_taken(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A cut that starts a new lineage is split and summed from the raw history's memos, not afresh."""
    rng = random.Random(7)
    raw: tuple[SectionItem, ...] = (Message("user", (Text("task"),)),) + tuple(
        Message(("assistant", "user")[k % 2], (Text("m" * rng.randrange(1, 90)),)) for k in range(40)
    )
    m = _measure()
    new, _ = drop_oldest((_section(raw),), 0, 6, m)
    kept = new[0].items
    want_rounds, want_sums = history_rounds(kept), _fresh_sums(kept)
    import engine.assembly as assembly

    def fresh(*_: object) -> object:
        raise AssertionError("split or summed afresh")

    monkeypatch.setattr(assembly, "history_rounds", fresh)
    monkeypatch.setattr(m, "item", fresh)
    monkeypatch.setattr(m, "_msg", {})  # (the fresh sums read the message counts first)
    assert m.rounds(kept) == want_rounds == [(0, 1)] + [(k, k + 2) for k in range(1, len(kept) - 1, 2)]
    assert m.cumulative(kept)[: len(kept) + 1] == want_sums


def test_pure_derivations() -> None:
    bounds = [(0, 1), (1, 3), (3, 6), (6, 8), (8, 9)]
    assert dropped_rounds(bounds, 1, 6) == [(0, 1), (1, 3), (3, 4)]
    assert dropped_rounds(bounds, 3, 3) == bounds
    assert dropped_rounds(bounds, 2, 6) is None  # not a round start: computed afresh
    sums = [0, 5, 7, 10, 11, 20]
    # raw tokens 5,2,3,1,9; keep raw[:2] + raw[4:] with the first 1 token more: 6,2,9
    assert dropped_sums(sums, 5, 2, 4, 1) == [0, 6, 8, 17]
