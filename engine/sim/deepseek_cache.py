"""DeepSeek's disk context cache as the simulator applies it: prefix units written at each request's input
and output ends, hits counted in 64-token multiples, persistence by build (see engine/sim/cachesim.py; the units
and their index are engine/sim/unit_index.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter, itemgetter
from typing import Any

from engine.sim.cache_policy import UseOrder, _expire_ordered, _Policy
from engine.sim.calls import Block, CacheSimError, Call, CallCache
from engine.sim.held_prefixes import HeldPrefixes
from engine.sim.key_chain import (
    _NO_KEYS,
    _TOKENS,
    EARLIER_CALLS,
    LINE_CATCH_UP,
    _key_at,
    _sums,
)
from engine.sim.key_path import key_position
from engine.sim.key_table import Key
from engine.sim.key_walk import _chain
from engine.sim.unit_index import UnitIndex, _Contained, _Unit

_AVAILABLE = attrgetter("available_at")
_GROUP = attrgetter("group")
_FIRST = itemgetter(0)


# Persistence rate per DeepSeek build (response `system_fingerprint`), measured on the mini-swe-agent
# trajectories in ../shared/trajectories: on the build before 2026-04-10 only about half of the requests
# left usable prefix units (330 request pairs, 50.6 % persisted, no dependence on size, timing or the
# previous request's outcome); on the `_20260410` build every request did (161 of 161 pairs, bar the
# documented best-effort exceptions). Unknown builds get the current behaviour (1.0).
DEEPSEEK_PERSIST_BY_FINGERPRINT: dict[str, float] = {
    "fp_eaab8d114b_prod0820_fp8_kvcache_new_kvcache": 0.5,
    "fp_eaab8d114b_prod0820_fp8_kvcache_new_kvcache_20260410": 1.0,
}


def deepseek_persist_probability(system_fingerprint: str | None) -> float:
    return DEEPSEEK_PERSIST_BY_FINGERPRINT.get(system_fingerprint or "", 1.0)


class _DeepSeekPolicy(_Policy):
    """Context caching on disk.

    Each request persists two prefix units: its whole input, and its input + generated output (so the
    next turn of a chat, which starts with that prompt and that reply, hits both). A request that shares
    a prefix with an earlier one that no unit covers also persists that common prefix ("common prefix
    detection"); optional fixed-interval units cover long inputs. A later request hits a unit only if its
    prompt contains the unit entirely; the billed hit is the longest such unit rounded down to a multiple
    of 64 tokens. Units are written when the request completes and kept for hours when unused
    (default 4 h: the docs say "a few hours to a few days").

    `persist_probability` < 1 models builds where persistence is best-effort: each request's units exist
    with that probability, and the reported hit is the expectation (rounded), not a random draw.
    """

    name = "deepseek"

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        super().__init__(model, options)
        self.unit_tokens: int = int(options.get("unit_tokens", 64))
        self.ttl: float = float(options.get("ttl_seconds", 4 * 3600.0))
        self.persist: float = float(options.get("persist_probability", 1.0))
        if not 0.0 <= self.persist <= 1.0:
            raise CacheSimError(f"persist_probability {self.persist} must be within [0, 1]")
        iv = options.get("interval_tokens")
        self.interval: int | None = int(iv) if iv else None
        self.common_prefix: bool = bool(options.get("common_prefix_units", True))
        # In order of last use (see _expire_ordered): a touched key is re-inserted at the end (_touch).
        self.units: dict[Key, _Unit] = {}
        # That order as a queue the expiry reads from the front (see UseOrder); None once the calls left
        # time order (expiry then scans every unit).
        self._use: UseOrder | None = UseOrder()
        self._unit_index = UnitIndex()  # their keys, kept with them (see UnitIndex)
        # Every prefix any request has sent, with when it was last sent, in order of last use (see
        # `seen`), kept in two parts: the last call's prefixes (`_live`, all sent at `_live_at`, the
        # newest entries) and every other one (`_held`, prefix -> last time, kept as runs of keys: see
        # engine/sim/held_prefixes.py). No key is in both.
        self._held = HeldPrefixes()
        # The last call's prefixes are its keys[1:], held as the chain's list itself (no copy a call):
        # the next call's take may cut and extend that list in place, and then says what it cut
        # (_KeyChain.cut, see _last_live). None: no live prefixes (none sent, or expired).
        self._live_keys: list[Key] | None = None
        self._live_tail: range = _NO_KEYS  # and the keys after that list, not made (_KeyChain.tail)
        self._live_at = -math.inf
        self.requests = 0
        # What `_read_certain` found in the last call's prefix, carried to the next call that keeps it.
        self._contained: _Contained | None = None
        self.carry = True  # False: every call scans its whole prefix (the reference the tests compare)
        self.lazy = True  # False: every key made into the call's list (the reference the tests compare)
        # The carried reading (_Contained) of each line a call left, by the line's key (see
        # _KeyChain._earlier): (the blocks of the line's last call, its reading, where the logs below
        # stood). A call that comes back to the line takes it up, caught up on the units created and
        # expired since, instead of scanning its whole prefix again.
        self._lines: dict[int, tuple[Sequence[Block], _Contained, int, int]] = {}
        self._created: list[Key] = []  # the units created since the oldest of them, in order
        self._expired: list[Key] = []  # and those expired

    @property
    def seen(self) -> dict[Key, float]:
        """Every prefix any request has sent -> when it was last sent, in order of last use."""
        return {**dict(self._held.items()), **dict.fromkeys(self._live, self._live_at)}

    @property
    def _live(self) -> list[Key]:
        """The last call's prefixes (between calls)."""
        return [] if self._live_keys is None else [*self._live_keys[1:], *self._live_tail]

    def _last_live(self, keys: list[Key]) -> list[Key]:
        """The last call's prefixes as they were, during this call's step (`keys`: this call's)."""
        lv = self._live_keys
        if lv is None:
            return []
        if lv is keys:  # this call's take cut and extended the last call's list in place
            c, cut = self._chain.common, self._chain.cut
            return keys[1 : c + 1] + (cut or [])
        return [*lv[1:], *self._live_tail]

    # `seen` as the step reads and writes it. A call re-sends most of the last call's prefixes, and
    # each of them moves to the end of `seen`, stamped with this call's time: done entry by entry
    # that was ~180 dict writes a call on a 930-call session's gates-closed column (~7 ms of ~30 in
    # its simulator), nearly all of them for prefixes that stay where they are. Kept in two parts,
    # the last call's prefixes are one list with one time: a call then writes only the prefixes it
    # does not share with the last one (its own new ones, and the last call's that it drops, which
    # keep their time). tests/test_cachesim.py holds every figure and `seen` itself (contents, times,
    # order) equal to a simulator that moves every prefix to the end each call.

    def _seen_expire(self, now: float) -> None:
        """Forget what was last sent more than `ttl` before `now`, as _expire_ordered over `seen`."""
        ttl = self.ttl
        self._held.expire(now, ttl, self.ordered)
        # The last call's prefixes share one time, and in time order no held entry is newer: if any
        # held entry is still live, so are they (in order, the scan above stopped before them).
        if self._live_keys is not None and now - self._live_at > ttl:
            self._live_keys, self._live_tail = None, _NO_KEYS

    def _seen_shared(self, keys: list[Key], tail: range = _NO_KEYS) -> int:
        """How many of this call's first prefixes (keys[1:]) are the last call's (its first ones, in
        order). Past there no prefix of this call is one of the last call's: a key is one prefix, of one
        length, and at the first difference the two have different blocks at the same position. So
        equal keys at a position mean equal keys at every position before it: the boundary is found by
        bisection on single keys, not by comparing slices (a sliding window's call parts at its first
        message). When this call's take extended the last call's list in place, its first
        `_chain.common` prefixes are the last call's, and only what the take cut is compared. (`tail`:
        this call's keys after `keys`, see _KeyChain.take_lazy; the last call's are `_live_tail`.)"""
        lv = self._live_keys
        if lv is None:
            return 0
        n = len(keys) + len(tail)
        if lv is keys:
            c, cut = self._chain.common, self._chain.cut or []
            lo, hi = 0, min(len(cut), n - 1 - c)  # cut[:lo] == keys[c + 1 : c + 1 + lo]
            while lo < hi:
                mid = (lo + hi) // 2
                if cut[mid] == _key_at(keys, tail, c + 1 + mid):
                    lo = mid + 1
                else:
                    hi = mid
            return c + lo
        lvt = self._live_tail
        hi = min(len(lv) + len(lvt), n) - 1
        # The take's `common` first blocks are the last call's (equal Blocks, equal hashes): so are their
        # prefixes' keys. Past them the two most often part at once (a window that moved: its first
        # message), read first; a bisection from 0 read ~26 keys a call, each a Python call on a KeyPath.
        # (Held to it at its last: equal keys there are equal keys before it, one prefix per key.)
        lo = min(self._chain.common, max(hi, 0))  # lv[1 : 1 + lo] == keys[1 : 1 + lo]
        if lo and _key_at(lv, lvt, lo) != _key_at(keys, tail, lo):
            lo = 0
        elif lo < hi and _key_at(lv, lvt, lo + 1) != _key_at(keys, tail, lo + 1):
            return lo
        while lo < hi:
            mid = (lo + hi) // 2
            if _key_at(lv, lvt, mid + 1) == _key_at(keys, tail, mid + 1):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _seen_longest(self, keys: list[Key], hi: int, shared: int) -> int:
        """The longest proper prefix keys[j] (0 < j < hi) that `seen` holds, else 0; `shared`: from
        _seen_shared(keys[1:]), so keys[1 : shared + 1] are in it."""
        if hi - 1 <= shared:
            return max(hi - 1, 0)
        return self._held.longest(keys, hi, shared)

    def _seen_stamp(self, keys: list[Key], tail: range, old: int, shared: int, now: float) -> None:
        """Move every prefix of this call (keys[1:]; keys[old + 1 :] first handed out by it, in no
        dict) to the end of `seen`, stamped `now`. The last call's prefixes it does not share keep their
        time and stay where they are, before it."""
        held = self._held
        if shared < old:
            held.discard(keys[shared + 1 : old + 1])
        lv = self._live_keys
        if lv is not None:
            more = _NO_KEYS  # (the last call's keys past its list: see _KeyChain.take_lazy)
            if lv is keys:
                c, cut = self._chain.common, self._chain.cut or []
                dropped = cut[shared - c :]
            else:
                dropped = lv[shared + 1 :]
                more = self._live_tail[max(0, shared + 1 - len(lv)) :]
            if dropped or more:
                held.add(dropped, self._live_at, more)
        self._live_keys, self._live_tail, self._live_at = keys, tail, now

    def _touch(self, key: Key, now: float) -> None:
        """Mark the unit at `key` used `now`: moved to the end of `units`."""
        u = self.units.pop(key)
        u.last_used = now
        self.units[key] = u
        if self._use is not None:
            self._use.touched(key)

    def _floor(self, n: int) -> int:
        return n - n % self.unit_tokens

    def _add(self, key: Key, tokens: int, group: int, available_at: float, now: float) -> None:
        if tokens < self.unit_tokens:
            return
        u = self.units.pop(key, None)
        if u is None:
            self.units[key] = _Unit(tokens, self.persist, group, available_at, now)
            self._unit_index.add(key)
            if self._lines:
                self._created.append(key)
        else:
            # Written again: it now exists unless both writes failed.
            u.prob = 1.0 - (1.0 - u.prob) * (1.0 - self.persist)
            u.last_used = max(u.last_used, now)
            self.units[key] = u
        if self._use is not None:
            self._use.touched(key)

    def step(self, call: Call) -> CallCache:
        # keys + tail are the call's prefixes' keys; tail, those first met in this call, not made into a
        # list: a window that moved to a new start meets thousands (see _KeyChain.take_lazy).
        line, was = self._chain.line_key(), self._chain.blocks  # the last call's line, before this take
        keys, tail, raw, base = self._chain.take_lazy(
            call.blocks, False, call.shared, call.stretch, self.lazy
        )
        cum = _sums(raw, base)
        # keys[old:] were first met in this call (a long session's sliding window: most of each request):
        # no unit and no `seen` entry can have them, so neither is looked up past there.
        old = self._chain.old
        n = len(keys) + len(tail)
        last = tail[-1] if tail else keys[-1]
        total = cum[-1]
        now = call.timestamp
        self._clock(now)
        ttl = self.ttl
        if self.ordered and self._use is not None:
            removed = self._use.expire(self.units, lambda u: now - u.last_used > ttl)
        else:
            self._use = None
            removed = _expire_ordered(self.units, lambda u: now - u.last_used > ttl, False)
        if removed:
            self._unit_index.discard(removed)
        self._seen_expire(now)
        shared = self._seen_shared(keys, tail)

        added: list[tuple[int, Key]] = []  # the units this call writes inside its own prefix
        if self.persist == 1.0 and self.carry and self.ordered:
            read, longest_unit = self._read_carried(keys, old, total, now, removed, line, was)
        elif self.persist == 1.0:
            self._contained = None
            read, longest_unit = self._read_certain(keys, old, total, now)
        else:
            read, longest_unit = self._read_expected(keys, old, total, now)

        # Persist this request's units, usable once it has completed.
        group = self.requests
        self.requests += 1
        done = call.completed_at if call.completed_at is not None else now
        self._add(last, total, group, done, now)
        added.append((n - 1, last))
        if call.output_sha is not None:
            self._add(
                _chain(last, call.output_sha, self._chain.ids),
                total + call.output_tokens,
                group,
                done,
                now,
            )
        if self.common_prefix:
            # The longest proper prefix an earlier request also sent (searched in C, from the longest
            # one met before this call), and where it is.
            j = self._seen_longest(keys, min(old, n - 1), shared)
            if j and cum[j] > longest_unit:
                self._add(keys[j], cum[j], group, done, now)
                added.append((j, keys[j]))
        if self.interval:
            m = self.interval
            j = 1
            while m <= total:
                while j < len(cum) - 1 and cum[j + 1] <= m:
                    j += 1
                if cum[j] <= m:
                    key = _key_at(keys, tail, j)
                    self._add(key, cum[j], group, done, now)
                    added.append((j, key))
                m += self.interval
        if self._contained is not None:
            self._contained.written(added)
        self._seen_stamp(keys, tail, old - 1, shared, now)
        return CallCache(total, read, 0, total - read)

    def _read_carried(
        self,
        keys: list[Key],
        old: int,
        total: int,
        now: float,
        removed: list[Key],
        line: int | None = None,
        was: Sequence[Block] = (),
    ) -> tuple[int, int]:
        """`_read_certain`, with what the last call's prefix contained carried over: a call that keeps
        the last one's prefix (an appended conversation) looks up only its new prefixes and the units
        written or made visible since, not one per earlier request; one that comes back to an earlier
        line takes up that line's (see _line_back). Scans from scratch when the prefix changed
        otherwise, or the longest unit is longer than this prompt. (`line`, `was`: the last call's line
        key and blocks, where its reading is kept when this call leaves it.)"""
        units = self.units
        c = self._contained
        if c is not None and removed:
            # Units expired (the oldest first): taken out of the carried ranking, not a scan of the
            # whole prefix again (a session longer than the ttl expires one nearly every call: every
            # call of the 3,000-turn what-if's paper column past 4 h scanned ~1,400 units).
            c.forget(removed)
        if removed and self._lines:
            self._expired += removed
        go_on = c is not None and c.end <= self._chain.common + 1 and c.end <= old
        # Back on an earlier line: its reading, when it reaches further than the last call's (which
        # may hold only the few prefixes the two calls share), is taken up.
        got = self._line_back(keys, now, c.end if go_on and c is not None else 0)
        if c is not None and go_on and got is None:
            c.recheck(units, now)
        else:
            if c is not None and line is not None:
                self._keep_line(line, was, c)
            c = self._contained = _Contained() if got is None else got
        c.scan(keys, c.end, old, units, now, self._unit_index)
        if c.best is None:
            return 0, 0
        g = c.groups[c.best]
        longest = g[1]
        if longest > total:  # clipped to this prompt: the carried order of lengths does not hold
            self._contained = None
            return self._read_certain(keys, old, total, now)
        self._touch(g[3], now)
        return min(total, self._floor(longest)), longest

    def _keep_line(self, line: int, blocks: Sequence[Block], c: _Contained) -> None:
        """Keep the reading `c` of the line a call leaves (its last call's `blocks`), for a call that
        comes back to it (the logs from here on catch it up)."""
        lines = self._lines
        if not lines:
            self._created, self._expired = [], []  # (no reading refers to what they hold)
        lines.pop(line, None)
        lines[line] = (blocks, c, len(self._created), len(self._expired))
        if len(lines) > EARLIER_CALLS:
            del lines[next(iter(lines))]

    def _line_back(self, keys: list[Key], now: float, beyond: int) -> _Contained | None:
        """The reading of the line this call's take came back to (_KeyChain.back), as a scan of this
        call's keys[1 : end] would make it (`end`: that reading's, at most where the two calls part):
        the units past where they part taken out, those expired since taken out, those created since
        on this call's prefix put in. None when there is none, when it would end at `beyond` or before,
        or when too much happened since. clear_tool_uses past its window comes back to a line every few
        calls (~115 calls of a 3,000-turn what-if): its ~4,700 prefixes and ~300 units read afresh
        each time were half of such a call."""
        back = self._chain.back
        if back is None:
            return None
        got = self._lines.get(back[0])
        if got is None or got[0] is not back[1]:
            return None
        _, c, at_created, at_expired = got
        created, expired = self._created[at_created:], self._expired[at_expired:]
        reach = min(c.end, back[2] + 1)
        if reach <= beyond or len(created) + len(expired) > min(LINE_CATCH_UP, reach // 8):
            return None
        del self._lines[back[0]]
        if expired:
            c.forget(expired)
        # Past where this call parts from the line's last call, the two prefixes differ.
        end = back[2] + 1
        if c.end > end:
            off = [k for m in c.members.values() for p, k, _ in m if p >= end]
            off += [k for p, k in c.pending if p >= end]
            if off:
                c.forget(off)
                # (and the units its last call wrote there, waiting to be admitted: not inside yet)
                c.pending = [x for x in c.pending if x[0] < end]
            c.end = end
        units, inside = self.units, c.inside
        for k in created:
            u = units.get(k)
            if u is None or k in inside:
                continue
            # A path's keys ascend (each extends the one before it, and is handed out after it).
            p = key_position(keys, k, 1, c.end)
            if p >= 0:
                c.admit(p, k, u, now)
        c.recheck(units, now)
        return c

    def _read_certain(self, keys: list[Key], old: int, total: int, now: float) -> tuple[int, int]:
        """`_read_expected` when every unit persists (probability 1, current DeepSeek builds): the read
        is the longest visible unit the prompt contains (clipped to `total`, floored to 64), and that
        unit alone is touched. An appended conversation contains a unit of every earlier request, so
        the per-unit work of the general rule (best per request, sorted, summed) was a Python loop
        over thousands of units a call on a long session; here each pass over them runs in C and only
        the longest units' requests are looked at. Returns the read and the longest unit's tokens."""
        units = self.units
        found = list(filter(units.__contains__, keys[1:old]))
        if not found:
            return 0, 0
        us = list(map(units.__getitem__, found))
        visible = list(map(now.__gt__, map(_AVAILABLE, us)))
        if not all(visible):
            found = list(compress(found, visible))
            us = list(compress(us, visible))
            if not us:
                return 0, 0
        tokens = list(map(min, map(_TOKENS, us), repeat(total)))
        longest = max(tokens)
        # The general rule keeps per request its first unit of its longest length, and the sort is
        # stable over requests in the order their first visible unit came: among the requests with a
        # unit this long, the first met wins, and of it the first unit this long.
        groups = list(map(_GROUP, us))
        winner = -1
        first_met = len(us)
        for i in compress(range(len(tokens)), map(longest.__eq__, tokens)):
            met = groups.index(groups[i])
            if met < first_met:
                first_met, winner = met, i
        self._touch(found[winner], now)
        return min(total, self._floor(longest)), longest

    def _read_expected(self, keys: list[Key], old: int, total: int, now: float) -> tuple[int, int]:
        """The expected read under independent per-request persistence (the longest unit that exists
        wins), touching the units that could be it; and the longest unit's tokens."""
        # Units this prompt contains entirely, best (longest) per writing request.
        best: dict[int, tuple[int, float, Key]] = {}
        units = self.units
        # Most of a request's prefixes hold no unit: the ones that do are picked out in C, in order.
        for key in filter(units.__contains__, keys[1:old]):
            u = units[key]
            if not u.available_at < now:  # _visible, inlined: a long session finds thousands a call
                continue
            t = min(u.tokens, total)
            cur = best.get(u.group)
            if cur is None or t > cur[0]:
                best[u.group] = (t, u.prob, key)
        # Expected hit under independent per-request persistence: the longest unit that exists wins.
        # Longest first, requests of one length in the order they came (a reverse sort is stable).
        ranked = sorted(best.values(), key=_FIRST, reverse=True)
        expected = 0.0
        none_longer = 1.0
        unit = self.unit_tokens
        for t, p, k in ranked:
            expected += none_longer * p * (t - t % unit)  # (_floor, inlined)
            none_longer *= 1.0 - p
            self._touch(k, now)
            if none_longer <= 0.0:
                break
        read = min(total, int(round(expected)))
        return read, ranked[0][0] if ranked else 0
