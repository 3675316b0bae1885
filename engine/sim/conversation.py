"""A conversation that is the first n messages of a list only ever appended to, without copying them.

The peers' per-turn views (engine/sim/turn_views.py) each hold the whole conversation so far. Made as a
tuple per view, each view copied the whole conversation and freed the last one's (a reference count
touched per message, twice, per view, per peer pass: quadratic in the session; the five peer passes of
a 3,000-turn what-if spent ~0.6 s of CPU there), for conversations the peers mostly read only the newest
messages of (what a turn appended, a window's edge) and tell apart by identity (HistoryBlocks).

engine/sim/grown.py's Grown is the same idea for the Blocks of a peer's request, with a short tail kept
apart because the next request may change its newest items (a result cleared near the end); a
conversation's messages never change, so a Conversation is the run's first n and nothing more.
base.direct reads the list under either.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import overload

from engine.artifacts import Message


class Conversation(Sequence[Message]):
    """run[:n] as a read-only Sequence, without copying it: indexing, len and iteration read the run;
    a slice is a tuple (the whole of it: this object itself, as a tuple's whole slice is the tuple);
    equal to any sequence of the same messages (tuple or Conversation), by value.

    The run must not change below n while the object lives: TurnViews' runs are only appended to. One
    object per view: the peers tell a conversation from the last one by identity (HistoryBlocks)."""

    __slots__ = ("_run", "_n")

    def __init__(self, run: list[Message], n: int) -> None:
        self._run = run
        self._n = n

    def head(self) -> tuple[list[Message], int]:
        """(run, n): self[i] is run[i] for 0 <= i < n (read from the list, not through __getitem__)."""
        return self._run, self._n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Message: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Message]: ...

    def __getitem__(self, i: int | slice) -> Message | Sequence[Message]:
        n = self._n
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step == 1:
                if start == 0 and stop == n:
                    return self
                return tuple(self._run[start:stop]) if start < stop else ()
            return tuple(self._run[:n][i])
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("conversation index out of range")
        return self._run[i]

    def __iter__(self) -> Iterator[Message]:
        return islice(self._run, self._n)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, Conversation):
            if other._n != self._n:
                return False
            if other._run is self._run:
                return True
            return self._run[: self._n] == other._run[: other._n]
        if isinstance(other, tuple):
            return len(other) == self._n and tuple(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (equal to tuples, which hash otherwise: never a key)

    def __repr__(self) -> str:
        return f"Conversation({tuple(self)!r})"
