"""DeepSeek's prefix units as the cache simulator reads them: `_Unit` (one unit), `_Contained` (the units a
call's prefix contains, carried from call to call) and `UnitIndex` (the units' keys by bucket of 64 keys).
The policy that writes and bills them is `_DeepSeekPolicy` in engine/sim/deepseek_cache.py."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import compress
from typing import Any

from engine.sim.key_path import KeyPath
from engine.sim.key_table import Key


@dataclass
class _Unit:
    """A DeepSeek cache unit: its tokens, the chance it persisted, the request that wrote it and when it was
    last used."""

    tokens: int
    prob: float  # probability that the unit was actually persisted (1.0 on current DeepSeek builds)
    group: int  # the request that wrote it: units of one request persist or fail together
    available_at: float
    last_used: float


class _Contained:
    """The units a call's prefix keys[1:end] contains, as `_read_certain` ranks them, kept from call to
    call while the prefix stays: per writing request (group) [position of its first visible unit, its
    longest unit's tokens, that unit's position, its key], and the group that wins (longest, then first
    met). Units are only ever added to it (a call that drops any starts a new one), so each addition
    updates the winner in O(1). Units not yet visible wait in `pending` until they are."""

    def __init__(self) -> None:
        self.end = 1
        self.inside: set[Key] = set()
        self.pending: list[tuple[int, Key]] = []
        self.groups: dict[int, list[Any]] = {}
        self.best: int | None = None
        # The units admitted, by group ((position, key, tokens) each) and their groups by key: what an
        # expired unit's group is left with (see forget).
        self.members: dict[int, list[tuple[int, Key, int]]] = {}
        self.group_of: dict[Key, int] = {}

    def scan(
        self,
        keys: list[Key],
        start: int,
        end: int,
        units: dict[Key, _Unit],
        now: float,
        index: UnitIndex | None = None,
    ) -> None:
        """Admit the units at keys[start:end] (a path's keys), in order. `index`: the units' keys by
        bucket (see UnitIndex): a stretch of the path whose keys run on by one is read from it."""
        if index is not None and end - start > _INDEX_PIECE:
            at: list[int] = []
            index.positions(keys, start, end, units, at)
        else:
            at = list(compress(range(start, end), map(units.__contains__, keys[start:end])))
        for pos in at:
            self.admit(pos, keys[pos], units[keys[pos]], now)
        self.end = max(self.end, end)

    def recheck(self, units: dict[Key, _Unit], now: float) -> None:
        waiting, self.pending = self.pending, []
        for pos, key in waiting:
            u = units.get(key)
            if u is not None:
                self.inside.discard(key)
                self.admit(pos, key, u, now)

    def written(self, added: list[tuple[int, Key]]) -> None:
        # A unit written inside the scanned prefix is met by no later scan: it waits to be admitted.
        end = self.end
        self.pending.extend(a for a in added if a[0] < end and a[1] not in self.inside)

    def admit(self, pos: int, key: Key, u: _Unit, now: float) -> None:
        if key in self.inside:
            return
        self.inside.add(key)
        if not u.available_at < now:
            self.pending.append((pos, key))
            return
        self.group_of[key] = u.group
        m = self.members.get(u.group)
        if m is None:
            self.members[u.group] = [(pos, key, u.tokens)]
        else:
            m.append((pos, key, u.tokens))
        g = self.groups.get(u.group)
        if g is None:
            g = self.groups[u.group] = [pos, u.tokens, pos, key]
        else:
            if pos < g[0]:
                g[0] = pos
            if u.tokens > g[1] or (u.tokens == g[1] and pos < g[2]):
                g[1], g[2], g[3] = u.tokens, pos, key
        if self.best is None:
            self.best = u.group
        else:
            b = self.groups[self.best]
            if g[1] > b[1] or (g[1] == b[1] and g[0] < b[0]):
                self.best = u.group

    def forget(self, keys: list[Key]) -> None:
        """Take expired units out: each group that held one is ranked by the units it has left (a group
        only loses: it cannot overtake the winner), and the winner, if it was one of them, found again
        among every group (by the longest unit, then the first position: no two groups tie on both, as
        a position is one prefix, one key, one unit)."""
        inside = self.inside
        gone = [k for k in keys if k in inside]
        if not gone:
            return
        touched: dict[int, None] = {}
        waiting = False
        for k in gone:
            inside.discard(k)
            g = self.group_of.pop(k, None)
            if g is None:
                waiting = True  # not yet visible: in `pending`
            else:
                touched[g] = None
        if waiting:
            dead = set(gone)
            self.pending = [p for p in self.pending if p[1] not in dead]
        if not touched:
            return
        dead = set(gone)
        groups, members = self.groups, self.members
        for g in touched:
            left = [m for m in members[g] if m[1] not in dead]
            if not left:
                del members[g], groups[g]
                continue
            members[g] = left
            first = min(m[0] for m in left)
            pos, key, tokens = max(left, key=lambda m: (m[2], -m[0]))
            groups[g] = [first, tokens, pos, key]
        if self.best in touched:
            self.best = max(groups, key=lambda g: (groups[g][1], -groups[g][0])) if groups else None


# A stretch of a path's keys this long or shorter is scanned key by key (see UnitIndex.positions).
_INDEX_PIECE = 64
# Keys per bucket of a UnitIndex, as a shift.
_BUCKET_BITS = 6


class UnitIndex:
    """The keys of a DeepSeek simulator's units, by bucket of 64 consecutive keys (key >> 6).

    A call's reading looks for the units among its prefixes' keys (`_Contained.scan`). A path's keys
    ascend (each extends the one before it and is handed out after it), and along one run of the intern
    table they go on by one (see KeyTable): a stretch whose last key is its first plus its length less
    one holds every key between them, and the units among it are the buckets' keys in that interval, a
    lookup per 64 keys, not one per key. clear_tool_uses past its window, back at a start an earlier call
    had, read its ~4,700 known prefixes one by one for the two or three units they hold (~1,100 of the
    6,000-turn what-if's calls). `units` must only change through add and discard (the simulator's
    _add and expiry)."""

    __slots__ = ("buckets",)

    def __init__(self) -> None:
        self.buckets: dict[int, set[Key]] = {}

    def add(self, key: Key) -> None:
        b = self.buckets.get(key >> _BUCKET_BITS)
        if b is None:
            self.buckets[key >> _BUCKET_BITS] = {key}
        else:
            b.add(key)

    def discard(self, keys: Iterable[Key]) -> None:
        buckets = self.buckets
        for key in keys:
            b = buckets.get(key >> _BUCKET_BITS)
            if b is not None:
                b.discard(key)
                if not b:
                    del buckets[key >> _BUCKET_BITS]

    def positions(self, keys: list[Key], i: int, j: int, units: dict[Key, _Unit], out: list[int]) -> None:
        """Append to `out`, ascending, the positions p in [i, j) whose keys[p] is a unit (`units`, whose
        keys this index holds): a stretch of keys that run on by one from the index, else halved (a
        short one looked up key by key)."""
        if type(keys) is KeyPath:
            # Its runs are known: each read from the buckets (or key by key, when short).
            for p, lo, n in keys.pieces(i, j):
                if n <= _INDEX_PIECE:
                    out += compress(range(p, p + n), map(units.__contains__, range(lo, lo + n)))
                else:
                    self._run_positions(p, lo, lo + n - 1, units, out)
            return
        if j - i <= _INDEX_PIECE:
            out += compress(range(i, j), map(units.__contains__, keys[i:j]))
            return
        lo, hi = keys[i], keys[j - 1]
        if hi - lo == j - 1 - i:
            self._run_positions(i, lo, hi, units, out)
            return
        m = (i + j) // 2
        self.positions(keys, i, m, units, out)
        self.positions(keys, m, j, units, out)

    def _run_positions(self, i: int, lo: int, hi: int, units: dict[Key, _Unit], out: list[int]) -> None:
        """positions() of a stretch at position i whose keys run on by one from lo to hi: the buckets'
        keys in [lo, hi]."""
        got: list[Key] = []
        buckets = self.buckets
        for b in range(lo >> _BUCKET_BITS, (hi >> _BUCKET_BITS) + 1):
            s = buckets.get(b)
            if s:
                # (`in units` too: the index is only as current as what changed `units` told it)
                got += [k for k in s if lo <= k <= hi and k in units]
        got.sort()
        out += [i + k - lo for k in got]
