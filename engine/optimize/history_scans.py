"""Scans of the history that Optimize rules make every turn, carried from turn to turn (a helper
module, not a rule).

A rule that decides from the whole history (wave 1's trim_schemas and clear_tool_results; simulate's
wave-1 column) would read every message of the conversation each turn. Between rewrites the history
only grows, so what such a scan found in last turn's history holds for the same messages now, and a
turn reads only the messages appended since. Each scan has a full version (the reference the tests
compare with); the carried one is kept on the turn's Measure, next to its other per-history memos, and
extends a remembered result only when Measure.starts_with says the history starts with the one it was
found in (by value: an edited, compacted or switched history is scanned afresh).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from engine.artifacts import Message, SectionItem, ToolResult
from engine.assembly import Measure

T = TypeVar("T")
Items = tuple[SectionItem, ...]
# Remembered results per scan, newest first. Each entry pins one item tuple (a whole conversation in a
# long session), so this stays small: the raw history of this turn and the last, and a what-if's
# columns (simulate builds several from one Measure).
RECENT_SCANS = 4


def called_names(items: Items, start: int = 0) -> frozenset[str]:
    """Names of the tools called in items[start:] (the full scan: start=0)."""
    names: set[str] = set()
    for i in range(start, len(items)):
        it = items[i]
        if isinstance(it, Message):
            names.update(c.name for c in it.tool_calls)
    return frozenset(names)


def full_results(items: Items, start: int = 0) -> tuple[tuple[int, int], ...]:
    """(message index, part index) of every full (not cleared or spilled) tool result in
    items[start:], oldest first (the full scan: start=0)."""
    return tuple(
        (i, j)
        for i in range(start, len(items))
        if isinstance(it := items[i], Message)
        for j, p in enumerate(it.parts)
        if isinstance(p, ToolResult) and p.form == "full"
    )


def carried_names(m: Measure, items: Items) -> frozenset[str]:
    """called_names(items), from the remembered scan of a history `items` extends."""
    return _carried(m, "called_names", items, called_names, frozenset.union)


# A scan's positions as (a list, how many of it): the positions are list[:n]. One list per lineage of
# histories, extended in place by what a turn appended (a remembered entry of the same lineage reads
# only its own first n); joined as tuples, every turn copied every position of the conversation.
Positions = tuple[list[tuple[int, int]], int]


def carried_results(m: Measure, items: Items) -> Positions:
    """full_results(items) as (positions, n): the first n of `positions`, from the remembered scan of a
    history `items` extends (the positions of the older messages are the same: an append changes no
    index before it). Read positions[:n] only (the list may already be longer, for a longer history)."""
    return _carried(m, "full_results", items, _positions, _extended)


def _positions(items: Items, start: int) -> Positions:
    got = list(full_results(items, start))
    return got, len(got)


def _extended(found: Positions, more: Positions) -> Positions:
    got, n = found
    if len(got) != n:  # another history of the lineage extended it past n: this one's own copy
        got = got[:n]
    got += more[0]
    return got, len(got)


def _carried(
    m: Measure, name: str, items: Items, scan: Callable[[Items, int], T], join: Callable[[T, T], T]
) -> T:
    memo: list[tuple[Items, T]] = m.scans.setdefault(name, [])
    for j, (prev, found) in enumerate(memo):
        k = len(prev)
        if k == 0 or not m.starts_with(items, prev):
            continue
        if k == len(items):
            if j:
                memo.insert(0, memo.pop(j))
            return found
        out = join(found, scan(items, k))
        break
    else:
        out = scan(items, 0)
    memo.insert(0, (items, out))
    del memo[RECENT_SCANS:]
    return out
