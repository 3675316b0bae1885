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
reading a message: DroppedRounds and DroppedSums.

The module also holds the two other views Measure's rounds are read through rather than copied (each an
O(history) copy a turn at thousands of turns): Droppable, a history's droppable rounds (rounds[1:-1],
droppable()), and GrownRounds, the rounds of a history that only grew since the last split. `Rounds` is
what Measure.rounds hands out: a list or one of the views.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from operator import itemgetter
from typing import overload

_START = itemgetter(0)


Round = tuple[int, int]


def dropped_rounds(bounds: Rounds, start: int, end: int) -> Rounds | None:
    """history_rounds(raw[:start] + raw[end:]) from bounds = history_rounds(raw), or None when start or
    end is not where a round of raw starts (0 < start <= end < len(raw)). Read in place (DroppedRounds).

    A round runs from an assistant message to the next one. With whole rounds [start, end) gone, the
    round that ended at start still ends there (raw[end] is an assistant message: the next round starts
    at it), and every round from end on is the same messages, end - start places earlier. Swapping the
    first message for one of the same role changes no round."""
    i = bisect_left(bounds, start, key=_START)
    j = bisect_left(bounds, end, key=_START)
    if i == 0 or j >= len(bounds) or bounds[i][0] != start or bounds[j][0] != end:
        return None
    if end == start:
        return bounds[:]
    return DroppedRounds(bounds, i, j, end - start)


# Views over views a read passes through at most (a trim of a kept history cuts a view again); deeper,
# the base is copied once.
MAX_DEPTH = 3


class DroppedRounds(Sequence[Round]):
    """The rounds of a history drop_range kept, read in place from the cut history's (`base`, which is
    never modified: Measure.rounds makes a new list or view for a grown history): rounds [0, i) are
    base's, and round p >= i is base[p + j - i] moved d places down. The copy that shifted every kept
    round (a tuple each) was O(history) every turn wave 1's kept share moved (~2,100 of 6,000 turns),
    where the callers read a few rounds and a bisection. As a list of rounds: sliced (step 1) into a
    view, appended to and extended (Measure.rounds' _extend_rounds), compared by value.

    The view shows rounds [lo, hi) of that sequence, then `extra` (rounds appended later)."""

    __slots__ = ("_base", "_i", "_k", "_d", "_lo", "_hi", "_extra", "depth")
    depth: int  # views a read passes through (1: base is a list)

    def __init__(self, base: Rounds, i: int, j: int, d: int) -> None:
        if isinstance(base, DroppedRounds) and base.depth >= MAX_DEPTH:
            base = list(base)  # each level is a lookup more per read: a chain of cuts stays short
        self._base = base
        self._i = i
        self._k = j - i  # base index = p + k for p >= i
        self._d = d
        self._lo = 0
        self._hi = len(base) - self._k
        self._extra: list[Round] = []
        self.depth = base.depth + 1 if isinstance(base, DroppedRounds) else 1

    def _at(self, p: int) -> Round:
        if p < self._i:
            return self._base[p]
        a, b = self._base[p + self._k]
        d = self._d
        return (a - d, b - d)

    def __len__(self) -> int:
        return self._hi - self._lo + len(self._extra)

    @overload
    def __getitem__(self, i: int) -> Round: ...

    @overload
    def __getitem__(self, i: slice) -> DroppedRounds: ...

    def __getitem__(self, i: int | slice) -> Round | DroppedRounds:
        m = self._hi - self._lo
        if isinstance(i, slice):
            s, e, step = i.indices(len(self))
            if step != 1:
                raise ValueError("DroppedRounds: only step-1 slices")
            e = max(s, e)
            out = DroppedRounds.__new__(DroppedRounds)
            out._base, out._i, out._k, out._d, out.depth = self._base, self._i, self._k, self._d, self.depth
            out._lo = self._lo + min(s, m)
            out._hi = self._lo + min(e, m)
            out._extra = self._extra[max(s - m, 0) : max(e - m, 0)]
            return out
        if i < 0:
            i += len(self)
            if i < 0:
                raise IndexError("DroppedRounds index out of range")
        if i < m:
            return self._at(self._lo + i)
        return self._extra[i - m]

    def __iter__(self) -> Iterator[Round]:
        at = self._at
        for p in range(self._lo, self._hi):
            yield at(p)
        yield from self._extra

    def append(self, r: Round) -> None:
        self._extra.append(r)

    def extend(self, more: Iterable[Round]) -> None:
        self._extra.extend(more)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (list, DroppedRounds, GrownRounds)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # (mutable, as the list it stands for)

    def __repr__(self) -> str:
        return f"DroppedRounds({list(self)!r})"


class Droppable(Sequence[Round]):
    """rounds[1:-1] read in place: a history's droppable rounds (not the task's, not the newest), which
    the rules that cut rounds read a few of (the first, the k-th, a bisection). The slice copied every
    round of the history every build that cut (wave 1 splits its whole conversation: ~6,000 rounds a
    turn at 6,000 turns, twice a build). `rounds` must not change while the view is read (a rule reads it
    within its own call; Measure.rounds never modifies a split it handed out)."""

    __slots__ = ("_rounds", "_n")

    def __init__(self, rounds: Sequence[Round]) -> None:
        self._rounds = rounds
        self._n = max(0, len(rounds) - 2)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Round: ...

    @overload
    def __getitem__(self, i: slice) -> list[Round]: ...

    def __getitem__(self, i: int | slice) -> Round | list[Round]:
        n = self._n
        if isinstance(i, slice):
            return [self._rounds[j + 1] for j in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("droppable round index out of range")
        return self._rounds[i + 1]


# Rounds at least, for droppable() to read them through a view rather than slice them out: below it the
# slice (in C) costs less than the view's reads (a bisection and a few rounds, each a Python call).
DROPPABLE_VIEW = 128


def droppable(rounds: Sequence[Round]) -> Sequence[Round]:
    """rounds[1:-1], the droppable rounds: sliced out when there are few (a window's history), read in
    place (Droppable) when there are many (an uncompacted conversation's)."""
    if isinstance(rounds, list) and len(rounds) < DROPPABLE_VIEW:
        return rounds[1:-1]
    return Droppable(rounds)


class GrownRounds(Sequence[Round]):
    """The rounds of a history that only grew since the one they were split from: `closed[:n]` (rounds an
    assistant message after them ended: an append changes none of them), then `last`, the open newest
    round (it runs to the history's end). Measure.rounds' split of a grown history (_extend_rounds), which
    copied the rounds before into a new list every turn (~6,000 at 6,000 turns, several times a wave-1
    build). `closed` is shared along a lineage and only ever appended to past every view's n (a view whose n is not its end
    gets its own copy when it grows): a view reads only its own first n."""

    __slots__ = ("_closed", "_n", "_last")

    def __init__(self, closed: list[Round], n: int, last: Round) -> None:
        self._closed = closed
        self._n = n
        self._last = last

    def grown(self, new: list[int], end: int) -> GrownRounds:
        """The rounds once messages were appended up to `end`, `new` the positions of the assistant
        messages among them (ascending): each ends the round before it, the last one is the open round."""
        if not new:
            return GrownRounds(self._closed, self._n, (self._last[0], end))
        closed = self._closed if len(self._closed) == self._n else self._closed[: self._n]
        closed.append((self._last[0], new[0]))
        closed.extend(zip(new, new[1:], strict=False))
        return GrownRounds(closed, len(closed), (new[-1], end))

    def __len__(self) -> int:
        return self._n + 1

    @overload
    def __getitem__(self, i: int) -> Round: ...

    @overload
    def __getitem__(self, i: slice) -> list[Round]: ...

    def __getitem__(self, i: int | slice) -> Round | list[Round]:
        n = self._n
        if isinstance(i, slice):
            a, b, step = i.indices(n + 1)
            if step != 1:
                return list(self)[i]
            out = self._closed[a : min(b, n)] if a < n else []
            if a <= n < b:
                out.append(self._last)
            return out
        if i < 0:
            i += n + 1
        if not 0 <= i <= n:
            raise IndexError("round index out of range")
        return self._closed[i] if i < n else self._last

    def __iter__(self) -> Iterator[Round]:
        yield from islice(self._closed, self._n)
        yield self._last

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (list, DroppedRounds, GrownRounds)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # (equal to lists, as DroppedRounds)

    def __repr__(self) -> str:
        return f"GrownRounds({list(self)!r})"


# A history's rounds (Measure.rounds): a list, a kept history's read from the cut one's, or a grown
# history's on the closed rounds of the one it grew from.
Rounds = list[Round] | DroppedRounds | GrownRounds


class DroppedSums(Sequence[int]):
    """Measure.cumulative(raw[:start] + raw[end:]) from sums[:n + 1] = Measure.cumulative(raw), n =
    len(raw), when the first item's tokens differ by `head` from raw[0]'s (1 <= start <= end <= n): items
    before start are raw's (the first `head` tokens more); from start on they are raw[end:], whose
    running sums are raw's less sums[end], on top of the kept history's sum at start.

    Read in place: each figure one lookup in `sums` (the cut history's running sums, whose first n + 1
    values never change: its lineage only extends them), not a copy of every kept item's. Wave 1's budget guarantee trims the history the drop rule kept, which
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
