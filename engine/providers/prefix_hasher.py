"""The request body's sha256, resumed from an earlier body it extends (`_PrefixHasher`): between
compactions a body is an earlier one plus new messages, so only those (and the envelope's tail) are
hashed. `base.Serializer` keeps one.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


class _PrefixHasher:
    """sha256 of successive request bodies that mostly extend earlier ones (between compactions a body
    is an earlier one plus new messages, with the same few bytes around them). For each of the last
    STREAMS bodies it keeps the hash state at every CHECKPOINT bytes, and at the body's mark (where the
    caller says the next body is likely to diverge: the end of its messages); a new body resumes from
    its furthest point inside the part it shares with any of them (memcmps) and hashes only the rest:
    the same digest as hashing the whole body.

    Several bodies, not one: the same serializer builds interleaved sequences of requests (simulate
    builds each turn under the what-if, with every gate closed, and per engine policy), and each
    sequence extends its own previous body, not the one built just before it."""

    # Without a mark, a resumed hash re-hashes at most this much of what it shares; smaller costs a state
    # copy per step.
    CHECKPOINT = 16384
    STREAMS = 8

    def __init__(self) -> None:
        # (body, states, (mark, state at mark) or None), most recently used first;
        # states[i]: hash of body[: (i + 1) * CHECKPOINT]
        self._streams: list[tuple[bytes, list[Any], tuple[int, Any] | None]] = []
        self.hashed = 0  # bytes hashed so far (what the checkpoints saved is the rest)

    def _shared(self, prev: bytes, states: list[Any], body: bytes) -> int:
        """How many of `prev`'s checkpoints `body` repeats: the furthest n with body[: n * CHECKPOINT]
        equal to prev's (a memcmp through a memoryview; slicing bytes would copy both sides first)."""
        step = self.CHECKPOINT
        n = min(len(states), len(body) // step)
        old = memoryview(prev)
        if not n or body.startswith(old[: n * step]):
            return n
        lo, hi = 0, n - 1  # binary search for the furthest shared checkpoint
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if body.startswith(old[: mid * step]):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _resume(self, body: bytes, base: bytes | None, shared: int) -> tuple[int, int, list[Any], Any, bool]:
        """(stream it resumes, bytes it skips, checkpoints it keeps, hash state there, whether at that
        stream's mark); stream -1: none.
        An earlier body's mark when this body repeats everything before it (between compactions: the
        previous request's messages, so only the new ones and the envelope's tail are hashed), else
        the furthest shared checkpoint. `base`, `shared`: the caller made this body from `base`'s first
        `shared` bytes (the express lane's spliced body), so a mark of that very body within them is
        taken without comparing the bytes again."""
        step = self.CHECKPOINT
        for i, (prev, states, mark) in enumerate(self._streams):
            if mark is None or len(body) < mark[0]:
                continue
            if (prev is base and mark[0] <= shared) or body.startswith(memoryview(prev)[: mark[0]]):
                at = mark[0]
                return i, at, states[: at // step], mark[1].copy(), True
        best, n = -1, 0
        for i, (prev, states, _mark) in enumerate(self._streams):
            # Searched only when it can beat the best so far (one memcmp says so).
            if (
                len(states) > n
                and len(body) >= (n + 1) * step
                and body.startswith(memoryview(prev)[: (n + 1) * step])
            ):
                k = self._shared(prev, states, body)
                if k > n:
                    best, n = i, k
        states = self._streams[best][1][:n] if best >= 0 else []
        return best, n * step, states, states[-1].copy() if n else hashlib.sha256(), False

    def hexdigest(self, body: bytes, mark: int = 0, base: bytes | None = None, shared: int = 0) -> str:
        """sha256 of `body`; `mark` (0: none): an offset to keep the hash state at for the next body.
        `base`, `shared`: body[:shared] is base[:shared] (see _resume)."""
        step = self.CHECKPOINT
        best, pos, states, h, at_mark = self._resume(body, base, shared)
        skipped, inherited = pos, len(states)
        view = memoryview(body)
        kept: tuple[int, Any] | None = None
        # Hashed up to each checkpoint after pos (its state kept) and up to the mark on the way.
        stops = range((pos // step + 1) * step, len(body) + 1, step)
        for stop in stops:
            if pos < mark <= stop:
                h.update(view[pos:mark])
                kept, pos = (mark, h.copy()), mark
            h.update(view[pos:stop])
            states.append(h.copy())
            pos = stop
        if pos < mark <= len(body):
            h.update(view[pos:mark])
            kept, pos = (mark, h.copy()), mark
        h.update(view[pos:])
        self.hashed += len(body) - skipped
        # The new body holds every point of the one it extends worth keeping (all its checkpoints, or
        # those before the mark it resumed from: what follows a mark is an envelope's tail).
        if best >= 0 and (at_mark or inherited == len(self._streams[best][1])):
            del self._streams[best]
        self._streams.insert(0, (body, states, kept))
        del self._streams[self.STREAMS :]
        return h.hexdigest()
