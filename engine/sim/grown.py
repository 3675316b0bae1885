"""A request's Blocks as an extension of the last request's, made without copying what the two share.

The paper column sends the whole conversation every call, and clear_tool_uses (until its window fills)
the last request with a result cleared near its end and the new messages: each request is the last one
with a few Blocks changed near its end and a few appended. Made as a list per request (and as a tuple per
call in the simulator), each call copied and freed the whole conversation several times (a reference
count touched per Block, thousands of scattered objects): per-call work that grew with the session, so
those columns were quadratic in it (a 6,000-turn what-if's paper column: ~40% of its CPU in list and
tuple copies and frees). A `Grown` is run[:k] + tail, where the run is a list only ever appended to and
the tail a short tuple of the newest items (those the next request may change): the next request that
keeps at least run[:k] is made by appending to the run, in O(what it adds + the tail).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import TypeVar, cast, overload

T = TypeVar("T")

# Items a Grown keeps in its tail, out of the run: a request that changes one of its last TAIL items
# (clear_tool_uses clears the fourth newest result: ~8 Blocks from the end) still extends the run.
TAIL = 32


class Grown(Sequence[T]):
    """run[:k] + tail as a read-only Sequence. The run is only ever appended to (by `extended`, from the
    view at its end), so run[:k] stays what it was while the view lives. A slice is a tuple; equal to
    any sequence (a list, a tuple, a Grown, a Conversation) of equal items, by value."""

    __slots__ = ("_run", "_k", "_tail")

    def __init__(self, run: list[T], k: int, tail: tuple[T, ...]) -> None:
        self._run = run
        self._k = k
        self._tail = tail

    @classmethod
    def of(cls, items: Sequence[T], own: bool = False) -> Grown[T]:
        """`items` (copied once) as a Grown on a run of its own. own=True: `items`, a list nothing else
        holds, becomes the run itself (not copied)."""
        run = cast(list[T], items) if own and type(items) is list else list(items)
        cut = max(0, len(run) - TAIL)
        tail = tuple(run[cut:])
        del run[cut:]
        return cls(run, cut, tail)

    def extended(self, shared: int, new: Sequence[T]) -> Grown[T]:
        """self[:shared] + new: on this view's run when this view is at the run's end and keeps all of
        the run's part (shared >= k), in O(len(new) + TAIL); else copied (Grown.of)."""
        run, k = self._run, self._k
        if not (k <= shared <= len(self) and len(run) == k):
            return Grown.of([*self[:shared], *new], own=True)
        items = [*self._tail[: shared - k], *new]
        cut = max(0, len(items) - TAIL)
        run += items[:cut]
        return Grown(run, k + cut, tuple(items[cut:]))

    def items(self, i: int, j: int) -> list[T]:
        """self[i:j] (0 <= i <= j <= len(self)) as a new list, made in one copy (a slice is a tuple, and
        a slice across the run's end two copies)."""
        run, k = self._run, self._k
        if j <= k:
            return run[i:j]
        out = run[i:k] if i < k else []
        out += self._tail[max(i - k, 0) : j - k]
        return out

    def shared_run(self, other: Grown[T]) -> int:
        """How many leading items this view and `other` share as the same objects, known from their run
        (any two views on one run share its first items as far as the shorter one's run part goes); -1
        when they are on different runs (not known)."""
        if other._run is not self._run:
            return -1
        return min(self._k, other._k)

    def head(self) -> tuple[list[T], int]:
        """(run, k): self[i] is run[i] for 0 <= i < k (read from the list, not through __getitem__)."""
        return self._run, self._k

    def __len__(self) -> int:
        return self._k + len(self._tail)

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...

    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:
        k = self._k
        if isinstance(i, slice):
            # A tuple, as a tuple's slice: simulate compares slices of a call's Blocks (a tuple or a
            # Grown) with slices of the last call's, and a list is never equal to a tuple.
            start, stop, step = i.indices(k + len(self._tail))
            if step != 1:
                return tuple(self)[i]
            if stop <= k:
                return tuple(self._run[start:stop])
            if start >= k:
                return self._tail[start - k : stop - k]
            return (*self._run[start:k], *self._tail[: stop - k])
        if i < 0:
            i += k + len(self._tail)
            if i < 0:
                raise IndexError("Grown index out of range")
        if i < k:
            return self._run[i]
        return self._tail[i - k]

    def __iter__(self) -> Iterator[T]:
        return chain(islice(self._run, self._k), self._tail)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == len(self) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (equal to tuples, which hash otherwise: never a key)

    def __repr__(self) -> str:
        return f"Grown({list(self)!r})"
