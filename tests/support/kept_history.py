"""A history drop_oldest kept, and the Measure that cut it, and the copy of its running sums that
engine.dropped_history.DroppedSums reads in place (the tests of the kept history's views read in place
from the cut one's: tests/test_dropped_sums_view.py, tests/test_dropped_rounds_view.py)."""

from __future__ import annotations

from itertools import islice, repeat
from operator import add

from engine.artifacts import Message, SectionItem, Text
from engine.assembly import Measure, Section
from engine.optimize.history_ops import drop_oldest
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind


def kept_after_drop() -> tuple[Measure, tuple[SectionItem, ...]]:
    """(the Measure, the kept history) of the 10 oldest droppable rounds dropped from a 61-message history."""
    raw = (Message("user", (Text("task"),)),) + tuple(
        Message(("assistant", "user")[k % 2], (Text("m" * (1 + k % 37)),)) for k in range(60)
    )
    m = Measure(TokenCounter(CharTokenizer()))
    sec = Section("history", "History", SectionKind.HISTORY, CacheScope.SESSION, Priority.NORMAL, raw)
    new, _ = drop_oldest((sec,), 0, 10, m)
    return m, new[0].items


def dropped_sums(sums: list[int], n: int, start: int, end: int, head: int) -> list[int]:
    """Measure.cumulative(raw[:start] + raw[end:]) from sums[:n + 1] = Measure.cumulative(raw), n =
    len(raw), when the first item's tokens differ by `head` from raw[0]'s (1 <= start <= end <= n), as a
    new list: what DroppedSums reads in place (the engine's copy before 698adb1, the tests' reference).

    Items before start are raw's (the first `head` tokens more); from start on they are raw[end:], whose
    running sums are raw's less sums[end], on top of the kept history's sum at start."""
    out = [0]
    out += map(add, islice(sums, 1, start + 1), repeat(head))
    out += map(add, islice(sums, end + 1, n + 1), repeat(out[-1] - sums[end]))
    return out
