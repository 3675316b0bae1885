"""A history drop_oldest kept, and the Measure that cut it (the tests of the kept history's views read
in place from the cut one's: tests/test_dropped_sums_view.py, tests/test_dropped_rounds_view.py)."""

from __future__ import annotations

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
