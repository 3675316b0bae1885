"""A call's prefix keys held as runs of consecutive keys (`KeyPath`), not as a list of ints.

The intern table hands prefix keys out in runs (engine/sim/key_table.py): a call's keys are a few runs of
consecutive numbers, one per stretch of a table run it walks. clear_tool_uses past its window comes back
every few calls to a start an earlier call had (~1,060 of a 6,000-turn what-if's calls): its ~4,700 known
prefixes, made into ints in a list (from the earlier call's keys, held as a range, or walked from the
table's runs), were ~75 us of such a call and their free later ~20 us, for a path of a handful of runs.
A KeyPath makes, copies and cuts them in what the runs number. It stands in for the chain's list (the
operations the key chain and the policies use on it: indexing, slices, append, += a range, del [i:]), so a
call's keys are a list or a KeyPath: the same keys either way."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import overload

from engine.sim.held_prefixes import runs_of


class KeyPath(Sequence[int]):
    """Ascending-by-run keys as runs: run r is the keys _lo[r], _lo[r] + 1, ... at the positions from
    _at[r] - _base up to the next run's (the last run's up to len). Runs are maximal (a key that follows
    the last one is the last run's), so `runs()` is runs_of of the keys."""

    __slots__ = ("_lo", "_at", "_base", "_n")

    def __init__(self) -> None:
        self._lo: list[int] = []
        self._at: list[int] = []  # each run's first position, + _base (a slice moves the base, not these)
        self._base = 0
        self._n = 0

    @classmethod
    def of(cls, keys: Sequence[int]) -> KeyPath:
        """`keys` (a path's keys, ascending: a list, or a KeyPath, copied in what its runs number) as a
        KeyPath of its own."""
        if type(keys) is KeyPath:
            return keys[:]
        out = cls()
        if keys:
            out._extend_runs(runs_of(keys))
        return out

    def _extend_runs(self, spans: Iterable[tuple[int, int]]) -> None:
        for lo, hi in spans:
            self._add(lo, hi - lo)

    def _last(self) -> int:
        return self._lo[-1] + self._n + self._base - self._at[-1] - 1

    def _add(self, lo: int, n: int) -> None:
        """Append the keys lo .. lo + n - 1."""
        if n <= 0:
            return
        if not self._n or lo != self._last() + 1:
            self._lo.append(lo)
            self._at.append(self._n + self._base)
        self._n += n

    def append(self, key: int) -> None:
        self._add(key, 1)

    def __iadd__(self, other: Iterable[int]) -> KeyPath:
        if type(other) is range and other.step == 1:
            self._add(other.start, len(other))
        elif type(other) is KeyPath:
            self._extend_runs(other.runs())
        else:
            for k in other:
                self._add(k, 1)
        return self

    def __add__(self, other: Iterable[int]) -> list[int]:
        return [*self, *other]

    def __len__(self) -> int:
        return self._n

    def _run_of(self, j: int) -> int:
        """The run holding position j (0 <= j < len)."""
        return bisect_right(self._at, j + self._base) - 1

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> KeyPath: ...

    def __getitem__(self, i: int | slice) -> int | KeyPath:
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if step != 1:
                raise ValueError("a KeyPath is sliced with step 1")
            return self._cut(start, stop)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("KeyPath index out of range")
        r = bisect_right(self._at, i + self._base) - 1
        return self._lo[r] + i + self._base - self._at[r]

    def _cut(self, start: int, stop: int) -> KeyPath:
        """self[start:stop], in what the runs between them number (list slices, in C)."""
        out = KeyPath()
        if stop <= start:
            return out
        r0, r1 = self._run_of(start), self._run_of(stop - 1)
        base = start + self._base
        lo = self._lo[r0 : r1 + 1]
        lo[0] += base - self._at[r0]
        at = self._at[r0 : r1 + 1]
        at[0] = base
        out._lo, out._at, out._base, out._n = lo, at, base, stop - start
        return out

    def __delitem__(self, i: slice) -> None:
        """del self[i:] (the only deletion the chain makes: a line's keys cut where a call parts)."""
        if not isinstance(i, slice) or i.stop is not None or i.step is not None:
            raise ValueError("a KeyPath is only cut at its end: del keys[i:]")
        start = i.indices(self._n)[0]
        if start >= self._n:
            return
        r = self._run_of(start)
        keep = r + 1 if self._at[r] < start + self._base else r
        del self._lo[keep:], self._at[keep:]
        self._n = start

    def position(self, key: int, lo: int, hi: int) -> int:
        """Where `key` is among positions [lo, hi), else -1 (a path's keys ascend: a run's first keys
        do, so the run that may hold it is found by bisection, in C)."""
        r = bisect_right(self._lo, key) - 1
        if r < 0:
            return -1
        p = self._at[r] - self._base + key - self._lo[r]
        end = self._at[r + 1] - self._base if r + 1 < len(self._at) else self._n
        return p if p < end and lo <= p < hi else -1

    def pieces(self, i: int, j: int) -> list[tuple[int, int, int]]:
        """Positions [i, j) as the runs they cross: (first position, its key, how many), in order."""
        if j <= i:
            return []
        cut = self._cut(i, j)
        return [(a - self._base, lo, e - a) for lo, a, e in zip(cut._lo, cut._at, cut.ends(), strict=True)]

    def ends(self) -> list[int]:
        """Each run's end position (+ _base), in order."""
        return [*self._at[1:], self._n + self._base]

    def runs(self) -> list[tuple[int, int]]:
        """The keys as maximal runs [(lo, hi), ...] (runs_of of them)."""
        if not self._n:
            return []
        return [(lo, lo + e - a) for lo, a, e in zip(self._lo, self._at, self.ends(), strict=True)]

    def __iter__(self) -> Iterator[int]:
        return chain.from_iterable(range(lo, hi) for lo, hi in self.runs())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == self._n and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (equal to lists, which do not hash)

    def __repr__(self) -> str:
        return f"KeyPath({list(self)!r})"


def key_position(keys: Sequence[int], key: int, lo: int, hi: int) -> int:
    """Where `key` is among keys[lo:hi] (a path's keys, ascending: a list or a KeyPath), else -1."""
    if type(keys) is KeyPath:
        return keys.position(key, lo, hi)
    p = bisect_left(keys, key, lo, hi)
    return p if p < hi and keys[p] == key else -1
