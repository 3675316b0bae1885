"""What every provider's cache rules in the simulator share: the `_Policy` base (also the "none" provider:
nothing cached), ordered expiry of what a policy holds, and when a write becomes readable."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

from engine.sim.calls import Call, CallCache
from engine.sim.key_chain import (
    _KeyChain,
)
from engine.sim.key_table import Key


def _expire_ordered(d: dict[Key, Any], expired: Callable[[Any], bool], ordered: bool) -> list[Key]:
    """Delete the entries `expired` says are past their time. Policies keep their dicts in order of
    last use (a touched key is re-inserted at the end), so with calls in time order the expired ones
    are a prefix: the scan stops at the first live entry and a turn costs what expires, not what is
    stored (a full scan per call made a long session quadratic). Out-of-order calls scan everything."""
    dead = []
    for k, v in d.items():
        if expired(v):
            dead.append(k)
        elif ordered:
            break
    for k in dead:
        del d[k]
    return dead


class UseOrder:
    """The keys of a dict kept in order of last use (each touch re-inserts its key at the end), as a queue
    that the ordered expiry reads from the oldest: `expire` is `_expire_ordered(d, expired, True)`
    without iterating `d`. A dict's iteration starts at its first slot, and the slots of the entries
    deleted from its front stay (holes) until an insertion makes it resize: a few of a DeepSeek
    simulator's thousands of units expire a call past 4 h, and the scan skipped thousands of holes a call
    before it met the first live unit (callgrind, the 6,000-turn what-if past 4 h: 4-11 M instructions a
    tenth of the session in each column, by how long ago the dict last resized; the paper column's
    simulator replayed: ~5,000 a call of ~205,000, against ~2,000 a call that this queue costs). Here a
    touch appends its key; an entry of a key touched again later is skipped (it is counted), once, when
    the front reaches it. Every insertion into `d` is told to `touched` and every deletion is made by
    `expire` (a policy whose calls leave time order expires by a full scan instead, and stops telling
    this)."""

    __slots__ = ("_queue", "_queued")

    def __init__(self) -> None:
        self._queue: deque[Key] = deque()
        self._queued: dict[Key, int] = {}  # how many times each key is in the queue

    def touched(self, key: Key) -> None:
        self._queue.append(key)
        q = self._queued
        q[key] = q.get(key, 0) + 1

    def expire(self, d: dict[Key, Any], expired: Callable[[Any], bool]) -> list[Key]:
        queue, queued = self._queue, self._queued
        dead: list[Key] = []
        while queue:
            k = queue[0]
            n = queued[k]
            if n > 1:  # touched again since: its place is further on
                queued[k] = n - 1
                queue.popleft()
                continue
            if not expired(d[k]):
                break
            queue.popleft()
            del queued[k], d[k]
            dead.append(k)
        return dead


def _visible(available_at: float, now: float) -> bool:
    # Strictly earlier: a request cannot read what it (or a concurrent request sent at the same
    # instant) is writing.
    return available_at < now


class _Policy:
    name = "none"

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        self.model = model
        self.options = options
        self._chain = _KeyChain()
        self.last_now = -math.inf  # the latest call time met (see _clock)
        self.ordered = True  # calls arrived in time order so far

    def _clock(self, now: float) -> None:
        """Note a call at `now`: a call earlier than one already met ends the time order, and with it
        the ordered expiry (see _expire_ordered) of the policies that expire what they hold."""
        if now < self.last_now:
            self.ordered = False
        self.last_now = max(self.last_now, now)

    def step(self, call: Call) -> CallCache:
        n = call.input_tokens
        return CallCache(n, 0, 0, n)
