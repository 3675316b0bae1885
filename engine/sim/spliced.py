"""`Spliced`: head + base[lo:hi] + tail as one read-only sequence of ints, the middle a place in an array
that is only ever appended to (a Block run's hash ids or sums, engine/sim/run_hashes.py), not a copy.

A Window (engine/sim/grown.py) is a few head Blocks, a stretch of the conversation's run, then the newest
ones: clear_tool_uses past its window sends ~4,700 Blocks a call, and the key chain carried each call's hash
ids and running sums to the next as arrays of its own, the run's part copied in (two slices and two copies
a call, ~19 KB of ids and ~38 KB of sums, then freed a call later) though the next call reads only the few
around where it parts. Held as a place in the run's arrays, a call's ids and sums cost what its head and
tail hold; a slice of them (what the next call or an earlier line's comeback reads) is an array made of
just that part.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import overload


class Spliced(Sequence[int]):
    """head + base[lo:hi] + tail (arrays of one typecode; `base` only ever appended to, hi <= len(base)):
    indexed and sliced as the array it stands for (a slice, of step 1, is a new array of that typecode),
    iterated, measured. Never changed in place: a caller that must extend or cut it makes an array of
    it first (`array_of`)."""

    __slots__ = ("_head", "_base", "_lo", "_mid", "_tail", "_hn", "_n")

    def __init__(self, head: array[int], base: array[int], lo: int, hi: int, tail: array[int]) -> None:
        self._head, self._base, self._lo, self._tail = head, base, lo, tail
        self._hn = len(head)
        self._mid = hi - lo
        self._n = self._hn + self._mid + len(tail)

    def __len__(self) -> int:
        return self._n

    def own(self) -> int:
        """How many of its items it holds in arrays of its own (the head's and the tail's): what making
        it copied, where the base's part is read in place."""
        return self._hn + len(self._tail)

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> array[int]: ...

    def __getitem__(self, i: int | slice) -> int | array[int]:
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if step != 1:
                return array(self._head.typecode, list(self))[i]
            return self._part(start, stop)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("Spliced index out of range")
        hn = self._hn
        if i < hn:
            return self._head[i]
        i -= hn
        if i < self._mid:
            return self._base[self._lo + i]
        return self._tail[i - self._mid]

    def _part(self, i: int, j: int) -> array[int]:
        """self[i:j] (0 <= i, j <= len) as a new array: each part's share copied once, in C."""
        hn, mid, lo = self._hn, self._mid, self._lo
        out = self._head[i:j] if i < hn else array(self._head.typecode)
        if j > hn and i < hn + mid:
            out += self._base[lo + max(i - hn, 0) : lo + min(j - hn, mid)]
        if j > hn + mid:
            out += self._tail[max(i - hn - mid, 0) : j - hn - mid]
        return out

    def __iter__(self) -> Iterator[int]:
        lo = self._lo
        return chain(self._head, self._base[lo : lo + self._mid], self._tail)


def array_of(x: array[int] | Spliced) -> array[int]:
    """`x` as an array: itself when it is one, else a new one of what it stands for."""
    return x if type(x) is array else x[:]
