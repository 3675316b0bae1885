"""A request's Blocks as an extension of the last request's, made without copying what the two share.

The paper column sends the whole conversation every call, and clear_tool_uses (until its window fills)
the last request with a result cleared near its end and the new messages: each request is the last one
with a few Blocks changed near its end and a few appended. Made as a list per request (and as a tuple per
call in the simulator), each call copied and freed the whole conversation several times (a reference
count touched per Block, thousands of scattered objects): per-call work that grew with the session, so
those columns were quadratic in it (a 6,000-turn what-if's paper column: ~40% of its CPU in list and
tuple copies and frees). A `Grown` is run[:k] + tail, where the run is a list only ever appended to and
the tail a short tuple of the newest items (those the next request may change): the next request that
keeps at least run[:k] is made by appending to the run, in O(what it adds + the tail). A `Window` is
head + run[lo:k] + tail on such a run: a request that sends the conversation from a start that moves
(clear_tool_uses past its window), made by `shifted` from the last one in what it adds, not a copy of
the stretch it keeps.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain, islice
from operator import is_
from typing import TypeVar, cast, overload

T = TypeVar("T")

# Items a Grown keeps in its tail, out of the run: a request that changes one of its last TAIL items
# (clear_tool_uses clears the fourth newest result: ~8 Blocks from the end) still extends the run.
TAIL = 32


class _Items(Sequence[T]):
    """What a Grown and a Window share: read-only, equal to any sequence (a list, a tuple, a Grown, a
    Window, a Conversation) of equal items, by value."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == len(self) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (equal to tuples, which hash otherwise: never a key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class Grown(_Items[T]):
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

    def parts(self) -> tuple[tuple[T, ...], list[T], int, int, tuple[T, ...]]:
        """(head, run, lo, k, tail): self is head + run[lo:k] + tail (a Grown: no head, from 0)."""
        return (), self._run, 0, self._k, self._tail


class Window(_Items[T]):
    """head + run[lo:k] + tail as a read-only Sequence: a request that sends a window of a conversation
    (a few leading items, then a stretch of the conversation's items, then the newest ones), on the run
    a Grown or an earlier Window of that conversation holds. The run is only ever appended to (by
    `shifted`, from the view at its end), so run[lo:k] stays what it was while the view lives. A slice
    is a tuple.

    clear_tool_uses past its window sends the system Blocks and then the conversation from a start that
    moves on or back by a round or two a call: made as a list of its ~4,800 Blocks per call (simulate's
    long shifted call), each call copied the stretch it keeps from the last one (a reference count
    touched per Block) and later freed it. Here such a call is made in what it adds."""

    __slots__ = ("_head", "_run", "_lo", "_k", "_tail")

    def __init__(self, head: tuple[T, ...], run: list[T], lo: int, k: int, tail: tuple[T, ...]) -> None:
        self._head = head
        self._run = run
        self._lo = lo
        self._k = k
        self._tail = tail

    def items(self, i: int, j: int) -> list[T]:
        """self[i:j] (0 <= i <= j <= len(self)) as a new list."""
        head, lo, k = self._head, self._lo, self._k
        hn = len(head)
        body = k - lo
        out = list(head[i:j]) if i < hn else []
        if j > hn and i < hn + body:
            out += self._run[lo + max(i - hn, 0) : lo + min(j - hn, body)]
        if j > hn + body:
            out += self._tail[max(i - hn - body, 0) : j - hn - body]
        return out

    def shared_run(self, other: Window[T]) -> int:
        """How many leading items this view and `other` share as the same objects, known from their run
        (two views on one run from one place, after heads of the same items, share the run's part as far
        as the shorter one's goes); -1 when not known."""
        head = self._head
        if other._run is not self._run or other._lo != self._lo or len(other._head) != len(head):
            return -1
        if not all(map(is_, head, other._head)):
            return -1
        return len(head) + min(self._k, other._k) - self._lo

    def __len__(self) -> int:
        return len(self._head) + self._k - self._lo + len(self._tail)

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...

    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:
        hn = len(self._head)
        body = self._k - self._lo
        if isinstance(i, slice):
            start, stop, step = i.indices(hn + body + len(self._tail))
            if step != 1:
                return tuple(self)[i]
            if stop <= start:
                return ()
            if hn <= start and stop <= hn + body:
                return tuple(self._run[self._lo + start - hn : self._lo + stop - hn])
            return tuple(self.items(start, stop))
        if i < 0:
            i += hn + body + len(self._tail)
            if i < 0:
                raise IndexError("Window index out of range")
        if i < hn:
            return self._head[i]
        if i < hn + body:
            return self._run[self._lo + i - hn]
        return self._tail[i - hn - body]

    def __iter__(self) -> Iterator[T]:
        # (islice of the run from lo would step over its first lo items: read by index, in C)
        return chain(self._head, map(self._run.__getitem__, range(self._lo, self._k)), self._tail)

    def parts(self) -> tuple[tuple[T, ...], list[T], int, int, tuple[T, ...]]:
        """(head, run, lo, k, tail): self is head + run[lo:k] + tail."""
        return self._head, self._run, self._lo, self._k, self._tail


# A shifted view's head (the items before its stretch that are not the run's) is a tuple of at most this many.
HEAD_MAX = 64


def shifted(
    prev: Sequence[T], common: int, fresh: Sequence[T], a: int, m: int, after: Sequence[T]
) -> Window[T] | None:
    """prev[:common] + fresh + prev[a : a + m] + after as a Window on prev's run, in O(common + len(fresh)
    + len(after) + TAIL), when prev is a Grown or a Window at its run's end, `fresh` are the run's items
    right before prev[a] (the same objects: a window that moved back over the conversation), and the
    stretch starts in prev's run part and reaches its tail (what prev had after the stretch was its
    newest items). None otherwise (the caller makes the list)."""
    if type(prev) is not Grown and type(prev) is not Window:
        return None
    head, run, lo, k, tail = prev.parts()
    hn = len(head)
    body = k - lo
    h = len(fresh)
    r0 = lo + a - hn  # prev[a] is run[r0]
    if (
        len(run) != k
        or common > HEAD_MAX
        or not hn <= a < hn + body
        or a + m < hn + body
        or a + m > hn + body + len(tail)
        or h > r0
        or (h and not all(map(is_, run[r0 - h : r0], fresh)))
    ):
        return None
    items = [*tail[: a + m - hn - body], *after]
    cut = max(0, len(items) - TAIL)
    run += items[:cut]
    return Window(tuple(prev[:common]), run, r0 - h, k + cut, tuple(items[cut:]))
