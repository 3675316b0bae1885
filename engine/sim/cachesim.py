"""Provider prefix-cache simulator: per call, how many input tokens each provider would bill as
cache reads, cache writes and plain (uncached) input.

Input is provider-neutral: a call is a sequence of `Block`s in prefix order (tool schemas, system
blocks, messages), each identified by a content hash. Prefix identity is the chain of hashes up to a
block boundary, so two calls share a cached prefix exactly when they share their leading blocks.
Matching is at block granularity: a block that differs only in its tail counts as a full miss, which is
slightly pessimistic next to providers that match tokens inside a block (OpenAI, DeepSeek).

One `CacheSimulator` models one provider's cache for one account/session; it is stateful, so feeding it
several sessions in time order models cross-session sharing. Everything is deterministic: time comes in
as call timestamps, never from a clock, and probabilistic behaviour is computed as an expectation, never
sampled.

Rules per provider (sources: the providers' public docs; see each class):
- anthropic: `cache_control` breakpoints (max 4), cumulative prefix order tools -> system -> messages,
  ~20-block lookback before each breakpoint, per-model minimum cacheable length, 5m / 1h TTL refreshed
  on every hit, 1h entries must precede 5m ones.
- openai: automatic, prompts >= 1024 tokens, hits are the longest previously seen prefix rounded down to
  1024 + 128k tokens, entries evicted after ~5-10 min idle (default 5 min).
- deepseek: disk cache of "prefix units" written at the end of each request's input and at the end of its
  output (plus detected common prefixes); a request hits a unit only if it contains the whole unit, the
  hit is counted in 64-token multiples, and a unit is usable only after the request that wrote it has
  completed. Calibrated against real usage, see `benchmarks/bench_cachesim_accuracy.py`.
- bedrock: `cachePoint` markers, Anthropic semantics, minimum counted per checkpoint segment.
- none: nothing is cached.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import compress, repeat
from operator import attrgetter, itemgetter
from typing import Any

from engine.providers.policy import anthropic_min, bedrock_min  # one table for the engine and the simulator

# The simulator's pieces each live in the module named for them (calls, key_chain, key_table, unit_index);
# what callers and tests import from here is re-exported ("X as X").
from engine.sim.calls import SEGMENT_ORDER as SEGMENT_ORDER
from engine.sim.calls import ZERO as ZERO
from engine.sim.calls import Block, CacheSimError, Call, CallCache
from engine.sim.calls import totals as totals
from engine.sim.held_prefixes import HeldPrefixes
from engine.sim.key_chain import (
    _NO_KEYS,
    _TOKENS,
    EARLIER_CALLS,
    LINE_CATCH_UP,
    _chain,
    _key_at,
    _KeyChain,
    _sums,
)
from engine.sim.key_chain import STRETCH_MIN as STRETCH_MIN
from engine.sim.key_chain import _agreeing as _agreeing
from engine.sim.key_chain import _check_order as _check_order
from engine.sim.key_chain import _cumulative as _cumulative
from engine.sim.key_chain import _extend_ids as _extend_ids
from engine.sim.key_chain import _extend_keys as _extend_keys
from engine.sim.key_chain import _prefix_keys as _prefix_keys
from engine.sim.key_chain import find_stretch as find_stretch
from engine.sim.key_chain import shared_prefix_len as shared_prefix_len
from engine.sim.key_table import Key
from engine.sim.key_table import KeyTable as KeyTable
from engine.sim.unit_index import UnitIndex, _Contained, _Unit  # DeepSeek's units, re-exported

PROVIDERS = ("anthropic", "openai", "deepseek", "bedrock", "none")
_AVAILABLE = attrgetter("available_at")
_GROUP = attrgetter("group")
_FIRST = itemgetter(0)
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


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


def _visible(available_at: float, now: float) -> bool:
    # Strictly earlier: a request cannot read what it (or a concurrent request sent at the same
    # instant) is writing.
    return available_at < now


# ---------------------------------------------------------------------------------------------- policies


class _Policy:
    name = "none"

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        self.model = model
        self.options = options
        self._chain = _KeyChain()

    def step(self, call: Call) -> CallCache:
        n = call.input_tokens
        return CallCache(n, 0, 0, n)


def min_cacheable_tokens(provider: str, model: str) -> int:
    """The shortest prefix `provider`'s rules cache for `model` by default (per checkpoint on Bedrock;
    DeepSeek's 64-token unit), as the simulator applies it."""
    p = provider.lower()
    if p == "anthropic":
        return anthropic_min(model)
    if p == "bedrock":
        return bedrock_min(model)
    return {"openai": 1024, "deepseek": 64}.get(p, 0)


@dataclass
class _Entry:
    """A cached prefix at an Anthropic breakpoint: its tokens, TTL and when it expires and became readable."""

    tokens: int
    ttl: float
    expires_at: float
    available_at: float


class _AnthropicPolicy(_Policy):
    """cache_control breakpoints.

    A breakpoint after block i asks the server to cache the prefix blocks[:i+1]. On read, the server
    looks for an entry at the breakpoint and at up to `lookback` (20) block boundaries before it and
    takes the longest one found; the hit is billed as cache_read. Tokens from the hit up to the last
    cacheable breakpoint are written (cache_write, priced by TTL); the rest is plain input. Entries live
    `ttl` after their last use (a hit refreshes them). Prefixes under the model's minimum are neither read
    nor written.
    """

    name = "anthropic"
    max_breakpoints = 4

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        super().__init__(model, options)
        self.lookback: int = int(options.get("lookback", 20))
        self.min_tokens: int = int(options.get("min_cacheable_tokens", self._default_min(model)))
        self.entries: dict[Key, _Entry] = {}

    def _default_min(self, model: str) -> int:
        return anthropic_min(model)

    def _cacheable(self, bps: list[int], cum: Sequence[int]) -> list[int]:
        """Breakpoint boundaries (prefix lengths in blocks) that meet the minimum length."""
        return [j for j in bps if cum[j] >= self.min_tokens]

    def step(self, call: Call) -> CallCache:
        blocks = call.blocks
        keys, raw, base = self._chain.take_raw(blocks, True, call.shared, call.stretch)
        cum = _sums(raw, base)
        total = cum[-1]
        now = call.timestamp
        bps = [i + 1 for i, b in enumerate(blocks) if b.breakpoint]
        if len(bps) > self.max_breakpoints:
            raise CacheSimError(
                f"{len(bps)} cache breakpoints in one request; {self.name} allows at most "
                f"{self.max_breakpoints} (the API rejects the request)"
            )
        seen_5m = False
        for j in bps:
            ttl = blocks[j - 1].ttl
            if ttl not in TTL_SECONDS:
                raise CacheSimError(f"breakpoint ttl {ttl!r} is not one of {', '.join(TTL_SECONDS)}")
            if ttl == "5m":
                seen_5m = True
            elif seen_5m:
                raise CacheSimError("a 1h breakpoint follows a 5m one: longer TTLs must come first")

        # Expired entries go first, so neither reads nor the 20-block search can see them.
        for k in [k for k, e in self.entries.items() if e.expires_at <= now]:
            del self.entries[k]

        live = self._cacheable(bps, cum)
        read = 0
        hit_keys: list[Key] = []
        for j in live:
            for jj in range(j, max(0, j - self.lookback) - 1, -1):
                if jj == 0:
                    break
                e = self.entries.get(keys[jj])
                if e is not None and _visible(e.available_at, now):
                    hit_keys.append(keys[jj])
                    read = max(read, cum[jj])
                    break
        for k in hit_keys:  # a hit refreshes the entry's lifetime at no cost
            e = self.entries[k]
            e.expires_at = now + e.ttl

        write = write_1h = 0
        if live:
            last = cum[live[-1]]
            write = max(0, last - read)
            last_1h = max((cum[j] for j in live if blocks[j - 1].ttl == "1h"), default=0)
            write_1h = max(0, min(last_1h, last) - read)
            for j in live:
                life = TTL_SECONDS[blocks[j - 1].ttl]
                e = self.entries.get(keys[j])
                if e is not None:
                    e.ttl = max(e.ttl, life)
                    e.expires_at = max(e.expires_at, now + life)
                else:
                    self.entries[keys[j]] = _Entry(cum[j], life, now + life, now)
        uncached = total - read - write
        return CallCache(total, read, write, uncached, write_1h)


class _BedrockPolicy(_AnthropicPolicy):
    """cachePoint markers: Anthropic semantics, but the minimum applies per checkpoint segment (the
    second checkpoint needs `min` more tokens after the first), and Nova models have no automatic
    lookback (Bedrock's ~20-block "simplified" checking is for Claude)."""

    name = "bedrock"

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        if "nova" in model.lower():
            options = {"lookback": 0, **options}
        super().__init__(model, options)

    def _default_min(self, model: str) -> int:
        return bedrock_min(model)

    def _cacheable(self, bps: list[int], cum: Sequence[int]) -> list[int]:
        out: list[int] = []
        prev = 0
        for j in bps:
            if cum[j] - prev >= self.min_tokens:
                out.append(j)
                prev = cum[j]
        return out


class _OpenAIPolicy(_Policy):
    """Automatic prefix caching: no markers, no write premium. Every request leaves its prefixes in the
    cache; a later request of >= 1024 tokens reads the longest previously seen prefix, counted as
    1024 + 128k tokens. Idle entries are evicted after `ttl_seconds` (docs: 5-10 minutes, up to an hour
    off-peak; `prompt_cache_retention="24h"` keeps them a day)."""

    name = "openai"

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        super().__init__(model, options)
        self.min_tokens: int = int(options.get("min_cacheable_tokens", 1024))
        self.step_tokens: int = int(options.get("increment", 128))
        retention = options.get("prompt_cache_retention")
        default_ttl = 86400.0 if retention == "24h" else 300.0
        self.ttl: float = float(options.get("ttl_seconds", default_ttl))
        # prefix key -> (last used, available at), in order of last use (see _expire_ordered)
        self.seen: dict[Key, tuple[float, float]] = {}
        self.last_now = -math.inf
        self.ordered = True  # calls arrived in time order so far
        # What `_read_certain` found in the last call's prefix, carried to the next call that keeps it.
        self._contained: _Contained | None = None
        self.carry = True  # False: every call scans its whole prefix (the reference the tests compare)

    def step(self, call: Call) -> CallCache:
        keys, raw, base = self._chain.take_raw(call.blocks, False, call.shared, call.stretch)
        cum = _sums(raw, base)
        total = cum[-1]
        now = call.timestamp
        if now < self.last_now:
            self.ordered = False
        self.last_now = max(self.last_now, now)
        ttl = self.ttl
        _expire_ordered(self.seen, lambda v: now - v[0] > ttl, self.ordered)
        read = 0
        if total >= self.min_tokens:
            for j in range(len(keys) - 1, 0, -1):
                hit = self.seen.get(keys[j])
                if hit is not None and _visible(hit[1], now):
                    lcp = cum[j]
                    if lcp >= self.min_tokens:
                        read = (
                            self.min_tokens + (lcp - self.min_tokens) // self.step_tokens * self.step_tokens
                        )
                    break
        seen = self.seen
        for j in range(1, len(keys)):
            prev = seen.pop(keys[j], None)  # re-inserted at the end: most recently used
            seen[keys[j]] = (now, prev[1] if prev is not None and prev[1] < now else now)
        return CallCache(total, read, 0, total - read)


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
        # In order of last use (see _expire_ordered): a touched key is re-inserted at the end.
        self.units: dict[Key, _Unit] = {}
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
        self.last_now = -math.inf
        self.ordered = True  # calls arrived in time order so far
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
        lo, hi = 0, min(len(lv) + len(lvt), n) - 1  # lv[1 : 1 + lo] == keys[1 : 1 + lo]
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
        if now < self.last_now:
            self.ordered = False
        self.last_now = max(self.last_now, now)
        ttl = self.ttl
        removed = _expire_ordered(self.units, lambda u: now - u.last_used > ttl, self.ordered)
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
        key = g[3]
        u = units.pop(key)
        u.last_used = now
        units[key] = u
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
            p = bisect_left(keys, k, 1, c.end)
            if p < c.end and keys[p] == k:
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
        u = units.pop(found[winner])
        u.last_used = now
        units[found[winner]] = u
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
            u = units.pop(k)
            u.last_used = now
            units[k] = u
            if none_longer <= 0.0:
                break
        read = min(total, int(round(expected)))
        return read, ranked[0][0] if ranked else 0


_POLICIES: dict[str, type[_Policy]] = {
    "anthropic": _AnthropicPolicy,
    "openai": _OpenAIPolicy,
    "deepseek": _DeepSeekPolicy,
    "bedrock": _BedrockPolicy,
    "none": _Policy,
}


class CacheSimulator:
    """One provider's cache, stateful across the calls of a session (or of several, in time order).

    Options (all optional): anthropic/bedrock `lookback`, `min_cacheable_tokens`; openai
    `min_cacheable_tokens`, `increment`, `ttl_seconds`, `prompt_cache_retention`; deepseek `unit_tokens`,
    `ttl_seconds`, `persist_probability`, `interval_tokens`, `common_prefix_units`.
    """

    def __init__(self, provider: str, model: str = "", **options: Any) -> None:
        p = provider.lower()
        if p not in _POLICIES:
            raise CacheSimError(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")
        self.provider = p
        self.model = model
        self.options: dict[str, Any] = dict(options)
        self._policy = _POLICIES[p](model, dict(options))
        # The last call raised: a caller's Call.shared counts from that call, which the simulator may
        # not have taken in (a check failed before it was), so the next call's hint is not used.
        self._raised = False

    def simulate(self, calls: Sequence[Call]) -> list[CallCache]:
        return [self.step(c) for c in calls]

    def step(self, call: Call) -> CallCache:
        if self._raised and (call.shared is not None or call.stretch is not None):
            call = replace(call, shared=None, stretch=None)
        try:
            out = self._policy.step(call)
        except BaseException:
            self._raised = True
            raise
        self._raised = False
        return out


def simulate_session(
    provider: str, calls: Sequence[Call], model: str = "", **options: Any
) -> list[CallCache]:
    """Simulate one session from a cold cache."""
    if not model and calls:
        model = calls[0].model
    return CacheSimulator(provider, model, **options).simulate(calls)


def hit_rate(results: Iterable[CallCache]) -> float:
    t = totals(results)
    return t.hit_rate
