"""A turn's history scans cost what the turn changed, not the session's length (issues 12.5, 15.6), and
hold no history nobody else holds.

Two scans ran over the whole history every turn of a long session (the what-if's build pass at 3,000
turns spent seconds in them): drop_oldest summed the dropped range (or the section less what stays),
and Measure.first_over missed its memo when a what-if's build pass asked it of more column lineages than
it remembered, and scanned every message again. Now the dropped range is two lookups in the history's
running sums (extended by what a turn appended), and the memo keeps one entry per lineage
(engine/lineage_memo.py). The counts are read from the Measure's per-message memos (a message counted or
looked up once per read): on the code before, the first test reads ~half the history a turn and the
second the whole one.

Kept by recency, six lineages' entries pinned histories a replay had moved to disk (2123608, reverted:
tests/test_replay_text_window.py held +2.5 MB over the second half against +1.4 MB): an entry whose
history nothing else references is let go, which the last two tests hold (on the code before, the
memo of the last three calls still held the released history).
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure, Section
from engine.optimize.history_ops import drop_oldest
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind


class _CountingReads(dict[str, int]):
    """A message-hash memo that counts its reads (every lookup, in C or in Python)."""

    reads = 0

    def __getitem__(self, key: str) -> int:
        self.reads += 1
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.reads += 1
        return super().get(key, default)


def _round(tag: str, t: int, big: bool = False) -> tuple[Message, ...]:
    out = "y" * 5000 if big else f"output {t} " + "x" * (t % 7)
    return (
        Message("assistant", (Text(f"{tag} step {t}"), ToolCall(f"{tag}c{t}", "bash", "{}"))),
        Message("user", (ToolResult(f"{tag}c{t}", out),)),
    )


def _history_section(items: tuple[Message, ...]) -> Section:
    return Section("history", "history", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, items)


def _measure() -> Measure:
    return Measure(TokenCounter(CharTokenizer()))


def test_drop_oldest_reads_what_the_turn_appended_not_the_history() -> None:
    m = _measure()
    reads = m._msg = _CountingReads()
    items: tuple[Message, ...] = (Message("user", (Text("the task"),)),)
    for t in range(300):
        items += _round("a", t)
    per_turn: list[int] = []
    for t in range(300, 400):
        items += _round("a", t)  # the history grew by one round since the last turn
        hist = _history_section(items)
        count = len(m.rounds(items)) // 2  # most of a long history goes (wave 1 drops up to 3/4)
        before = reads.reads
        out, saved = drop_oldest((hist,), 0, count, m)
        per_turn.append(reads.reads - before)
        # The same figures as measured afresh: the kept history's total, and the tokens saved.
        fresh = _measure()
        assert m.section(out[0]) == fresh.section(out[0])
        assert saved == fresh.section(hist) - fresh.section(out[0])
    # The first turn measures the history once; every later one reads what it appended and the
    # swapped task message (a handful), not the ~300 rounds it drops or keeps.
    assert max(per_turn[1:]) <= 12, per_turn


def test_first_over_scans_each_column_lineage_from_where_it_ended() -> None:
    m = _measure()
    big = m._big = _CountingReads()
    limit = 1000
    # Five columns' histories (a what-if's build pass), each its own lineage, one with an over-limit
    # result; asked in turn, each turn after the history grew by one round.
    lineages: list[tuple[Message, ...]] = [(Message("user", (Text(f"task {c}"),)),) for c in range(5)]
    for c in range(5):
        for t in range(200):
            lineages[c] += _round(str(c), t, big=(c == 3 and t == 150))
    per_call: list[int] = []
    for t in range(200, 240):
        for c in range(5):
            lineages[c] += _round(str(c), t)
            items = lineages[c]
            before = big.reads
            got = m.first_over(items, limit)
            per_call.append(big.reads - before)
            assert got == _measure().first_over(items, limit)
            assert got == (1 + 2 * 150 + 1 if c == 3 else len(items))
    # After each lineage's first scan, a call reads the round appended since (two messages).
    assert max(per_call[5:]) <= 2, per_call


def _released_after(m: Measure, scan: Any, links: bool = False) -> bool:
    """Whether a history asked about with `scan` (cumulative or first_over) and then let go of is freed
    once the memo is next used for another lineage: weakly watched through a message only it holds.
    Without `links`, the verified-prefix links (Measure.starts_with) are not followed: every prefix is
    compared by value."""
    if not links:
        m.prefix_min = 1 << 30
    items: tuple[Message, ...] = (Message("user", (Text("the released task"),)),)
    for t in range(300):
        items += _round("r", t, big=(t % 50 == 0))
    watched = weakref.ref(items[-1])
    for t in range(300, 305):  # a few turns of the lineage, each appending a round
        items += _round("r", t)
        scan(m, items)
    other: tuple[Message, ...] = (Message("user", (Text("the live task"),)),) + _round("o", 0)
    scan(m, other)
    del items
    gc.collect()
    other += _round("o", 1)  # the live lineage's next turn
    scan(m, other)
    return watched() is None


def test_running_sums_let_go_of_a_history_nobody_holds() -> None:
    m = _measure()
    assert _released_after(m, lambda m, items: m.cumulative(items))
    assert m.cache_sizes()["longest item tuple held"] <= 5


def test_first_over_lets_go_of_a_history_nobody_holds() -> None:
    m = _measure()
    assert _released_after(m, lambda m, items: m.first_over(items, 1000))
    assert m.cache_sizes()["longest item tuple held"] <= 5


def test_a_lineage_a_caller_still_holds_keeps_its_sums() -> None:
    # Only a history nobody else holds goes: the columns a what-if keeps asking about are remembered
    # (five lineages and the raw history), each extended by what its turn appended.
    m = _measure()
    reads = m._msg = _CountingReads()
    lineages: list[tuple[Message, ...]] = [(Message("user", (Text(f"task {c}"),)),) for c in range(6)]
    for c in range(6):
        for t in range(100):
            lineages[c] += _round(str(c), t)
        m.cumulative(lineages[c])
    for t in range(100, 110):
        for c in range(6):
            lineages[c] += _round(str(c), t)
            before = reads.reads
            got = m.cumulative(lineages[c])
            assert reads.reads - before <= 4  # the round appended (two messages), not the history
            assert got[: len(lineages[c]) + 1] == _measure().cumulative(lineages[c])


def test_the_verified_prefixes_let_go_of_a_history_nobody_holds() -> None:
    """The same with Measure.starts_with's links followed (a history past PREFIX_MIN items): a link
    holds its history and the one it starts with, and held a released history (and so the running
    sums' entry of it) until the links were next cleared, 16 links later."""
    m = _measure()
    assert _released_after(m, lambda m, items: m.cumulative(items), links=True)
    assert m.cache_sizes()["longest item tuple held"] <= 5
