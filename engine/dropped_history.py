"""A history with a range of rounds dropped, measured from the history it was cut from (a helper of
engine/assembly.py's Measure).

drop_range keeps raw[:start] + raw[end:] of a history (its first message swapped for the same-role task
message carrying the omission marker). The budget guarantee then splits and sums that kept history: when
the cut moved since the last build (simulate's wave-1 column drops a share of the rounds that grows with
the conversation, then trims what is left), the kept history starts no lineage the memos know, and it
was split into rounds and summed from its first message again, every such turn (3,000 turns: ~1,000
times, each over a kept history of up to ~1,000 messages). The history it was cut from was split and
summed a moment before (drop_oldest and oldest_to_drop ask for both), so the kept history's answers are
those with the dropped range taken out and the later indices moved down: the same integers, without
reading a message.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import islice, repeat
from operator import add, itemgetter
from typing import overload

_START = itemgetter(0)


def dropped_rounds(bounds: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]] | None:
    """history_rounds(raw[:start] + raw[end:]) from bounds = history_rounds(raw), or None when start or
    end is not where a round of raw starts (0 < start <= end < len(raw)).

    A round runs from an assistant message to the next one. With whole rounds [start, end) gone, the
    round that ended at start still ends there (raw[end] is an assistant message: the next round starts
    at it), and every round from end on is the same messages, end - start places earlier. Swapping the
    first message for one of the same role changes no round."""
    i = bisect_left(bounds, start, key=_START)
    j = bisect_left(bounds, end, key=_START)
    if i == 0 or j >= len(bounds) or bounds[i][0] != start or bounds[j][0] != end:
        return None
    d = end - start
    if d == 0:
        return list(bounds)
    return bounds[:i] + [(a - d, b - d) for a, b in islice(bounds, j, None)]


def dropped_sums(sums: list[int], n: int, start: int, end: int, head: int) -> list[int]:
    """Measure.cumulative(raw[:start] + raw[end:]) from sums[:n + 1] = Measure.cumulative(raw), n =
    len(raw), when the first item's tokens differ by `head` from raw[0]'s (1 <= start <= end <= n).

    Items before start are raw's (the first `head` tokens more); from start on they are raw[end:], whose
    running sums are raw's less sums[end], on top of the kept history's sum at start. Read in C."""
    out = [0]
    out += map(add, islice(sums, 1, start + 1), repeat(head))
    out += map(add, islice(sums, end + 1, n + 1), repeat(out[-1] - sums[end]))
    return out


class DroppedSums(Sequence[int]):
    """dropped_sums(sums, n, start, end, head) read in place: each figure one lookup in `sums` (the cut
    history's running sums, whose first n + 1 values never change: its lineage only extends them), not
    a copy of every kept item's. Wave 1's budget guarantee trims the history the drop rule kept, which
    keeps a growing share of the conversation (a quarter and more): the copy was O(history) every turn
    the kept share moved, where oldest_to_drop reads a few figures and a bisection. Extended in place
    (`extend`) by the figures of items appended later, as Measure.cumulative extends a lineage's list."""

    __slots__ = ("_base", "_start", "_shift", "_head", "_mid", "_n0", "_extra")

    def __init__(self, sums: Sequence[int], n: int, start: int, end: int, head: int) -> None:
        self._base = sums
        self._start = start
        self._shift = end - start
        self._head = head
        self._mid = sums[start] + head - sums[end]  # what each later figure adds to sums[i + shift]
        self._n0 = 1 + start + n - end  # figures read from `sums`
        self._extra: list[int] = []

    def __len__(self) -> int:
        return self._n0 + len(self._extra)

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> list[int]: ...

    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
            if i < 0:
                raise IndexError("DroppedSums index out of range")
        if i <= self._start:
            return self._base[i] + self._head if i else 0
        if i < self._n0:
            return self._base[i + self._shift] + self._mid
        return self._extra[i - self._n0]

    def extend(self, more: Iterable[int]) -> None:
        self._extra.extend(more)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (list, DroppedSums)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # (mutable, as the list it stands for)


# A lineage's running sums (engine/lineage_memo.py): a list, or a kept history's read from the cut one's.
Sums = list[int] | DroppedSums
