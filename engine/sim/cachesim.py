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
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate, compress, count, islice, repeat
from operator import add, attrgetter, is_, is_not, itemgetter, ne
from typing import Any, cast

from engine.common_prefix import common_prefix_len
from engine.errors import ContextPipeError
from engine.providers.policy import anthropic_min, bedrock_min  # one table for the engine and the simulator
from engine.sim.grown import Grown
from engine.sim.held_prefixes import HeldPrefixes
from engine.sim.key_table import Key, KeyTable  # re-exported: tests and simulate import them from here
from engine.sim.unit_index import UnitIndex, _Contained, _Unit  # DeepSeek's units, re-exported

PROVIDERS = ("anthropic", "openai", "deepseek", "bedrock", "none")
_TOKENS = attrgetter("tokens")
_SHA = attrgetter("sha")
_AVAILABLE = attrgetter("available_at")
_GROUP = attrgetter("group")
_FIRST = itemgetter(0)
SEGMENT_ORDER = {"tools": 0, "system": 1, "messages": 2}
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


class CacheSimError(ContextPipeError, ValueError):
    """The calls cannot be simulated as given (the provider would reject the request, or bad input)."""


@dataclass(frozen=True)
class Block:
    """One cacheable unit in prefix order (a tool schema, a system block, a message or content block)."""

    sha: str  # content hash; prefix identity is the sequence of shas up to here
    tokens: int
    breakpoint: bool = False  # Anthropic cache_control / Bedrock cachePoint after this block
    ttl: str = "5m"  # "5m" | "1h" for breakpoints
    segment: str = "messages"  # "tools" | "system" | "messages" (Anthropic prefix order)

    def __init__(
        self, sha: str, tokens: int, breakpoint: bool = False, ttl: str = "5m", segment: str = "messages"
    ) -> None:
        # Stored into the instance's dict (see Call.__init__): simulate converts every distinct Block a
        # session sends (~4,000 on the 930-call synthetic session's two columns).
        d = self.__dict__
        d["sha"] = sha
        d["tokens"] = tokens
        d["breakpoint"] = breakpoint
        d["ttl"] = ttl
        d["segment"] = segment


@dataclass(frozen=True)
class Call:
    """One request as the cache simulator sees it: its blocks, when it was sent and what the reply added."""

    blocks: Sequence[Block]
    timestamp: float  # when the request was sent (seconds)
    model: str = ""
    output_tokens: int = 0
    # Identity of the reply as later prompts carry it (normally the sha of the assistant block that
    # the agent appends). DeepSeek caches the generated output too, so a later prompt that starts with
    # this call's prompt + this reply hits it. None: the reply is never matched (e.g. reasoning tokens
    # that are generated but not sent back).
    output_sha: str | None = None
    # When the response finished. DeepSeek units become usable only then; None means "before the next
    # call in the sequence" (an agent loop waits for each reply).
    completed_at: float | None = None
    # How many leading blocks are the previous call's own Block objects (the previous call this
    # simulator stepped), when the caller knows it (simulate builds each request from the last one's
    # blocks: it found this already). Lets the simulator skip comparing the shared prefix again: a call
    # then costs what it adds, not the request's length. None: found by comparing the blocks.
    shared: int | None = field(default=None, compare=False, repr=False)
    # (h, a, m): past the `shared` ones, blocks[shared + h : shared + h + m] are the previous call's
    # blocks [a, a + m), the same objects (a sliding window's stretch; see find_stretch), when the caller
    # knows it (simulate found it on its own Blocks); m == 0: no such stretch worth carrying. Any such
    # stretch gives the same keys and sums: the simulator then does not search for one again. None: found.
    stretch: tuple[int, int, int] | None = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        blocks: Sequence[Block],
        timestamp: float,
        model: str = "",
        output_tokens: int = 0,
        output_sha: str | None = None,
        completed_at: float | None = None,
        shared: int | None = None,
        stretch: tuple[int, int, int] | None = None,
    ) -> None:
        # Stored into the instance's dict one by one (as engine.providers.base.Block): the frozen
        # dataclass's own __init__ calls object.__setattr__ per field (~3x), and simulate makes one a call.
        d = self.__dict__
        d["blocks"] = blocks
        d["timestamp"] = timestamp
        d["model"] = model
        d["output_tokens"] = output_tokens
        d["output_sha"] = output_sha
        d["completed_at"] = completed_at
        d["shared"] = shared
        d["stretch"] = stretch

    @property
    def input_tokens(self) -> int:
        return sum(b.tokens for b in self.blocks)


@dataclass(frozen=True)
class CallCache:
    """Billing split of one call's input. input_tokens == cache_read + cache_write + uncached.

    cache_write counts only tokens billed at a cache-write rate (Anthropic, Bedrock); providers that
    charge no write premium (OpenAI, DeepSeek) report 0 there and bill misses as uncached input.
    cache_write_1h is the part of cache_write billed at the 1-hour rate.
    """

    input_tokens: int
    cache_read: int
    cache_write: int
    uncached: int
    cache_write_1h: int = 0

    def __init__(
        self, input_tokens: int, cache_read: int, cache_write: int, uncached: int, cache_write_1h: int = 0
    ) -> None:
        # Stored into the instance's dict (see Call.__init__): every simulated call makes one, and
        # totals() one more a call.
        d = self.__dict__
        d["input_tokens"] = input_tokens
        d["cache_read"] = cache_read
        d["cache_write"] = cache_write
        d["uncached"] = uncached
        d["cache_write_1h"] = cache_write_1h

    @property
    def hit_rate(self) -> float:
        return self.cache_read / self.input_tokens if self.input_tokens else 0.0

    def __add__(self, other: CallCache) -> CallCache:
        return CallCache(
            self.input_tokens + other.input_tokens,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.uncached + other.uncached,
            self.cache_write_1h + other.cache_write_1h,
        )


ZERO = CallCache(0, 0, 0, 0, 0)


def totals(results: Iterable[CallCache]) -> CallCache:
    """The sum of `results` (what adding them one by one gives), field by field: one CallCache for the
    whole session instead of one per call added (a frozen dataclass each, ~0.6 ms a 930-call column)."""
    inp = read = write = uncached = write_1h = 0
    for r in results:
        inp += r.input_tokens
        read += r.cache_read
        write += r.cache_write
        uncached += r.uncached
        write_1h += r.cache_write_1h
    return CallCache(inp, read, write, uncached, write_1h)


# ---------------------------------------------------------------------------------------------- helpers


def shared_prefix_len(a: Sequence[Any], b: Sequence[Any]) -> int:
    """common_prefix_len(a, b), the length of their equal prefix, for sequences of objects that are
    mostly the very same objects from one call to the next (a session's requests: the engine hands the
    unchanged Blocks out again, and simulate converts each distinct Block once). Where two requests
    differ, it is most often early (a sliding window's new first message): the first pair that is not
    the same object is found in C and compared once, where the binary search on slices compared ~8
    slices, each ending in a dataclass __eq__ (a Python call). An equal pair of distinct objects there
    goes on by value, as common_prefix_len does."""
    n = min(len(a), len(b))
    # The last pair the two could share already tells them apart (a sliding window's request differs
    # from its first message on): the scan below stops at the first difference, where comparing the
    # whole slices would copy both first. Else (the usual append) the slices compare in C.
    if (n and a[n - 1] is b[n - 1]) and a[:n] == b[:n]:
        return n
    if n == 0:
        return 0
    # Some pair differs in value. Most often early (a sliding window's new first message): the first
    # _HEAD pairs by identity, as before (one __eq__ for the pair found). Else the stretch of _SCAN
    # pairs that holds the first such pair, found by comparing stretches as slices (identity first, in
    # C: ~2 ns a pair), then the first pair in it that is not the same object. An iterator scan of every
    # pair from the start (count, map, compress: ~40 ns a pair) was most of a call that changed near its
    # end (clear_tool_uses clearing one more result a turn: a 3,000-block request's first difference ~8
    # blocks from its end).
    m = min(n, _HEAD)
    first = next(compress(range(m), map(is_not, a, b)), m)  # (compress stops at the range's end)
    if first < m:
        if a[first] != b[first]:
            return first
        return first + common_prefix_len(a[first:n], b[first:n])
    while m < n:
        e = min(m + _SCAN, n)
        x, y = a[m:e], b[m:e]
        if x == y:
            m = e
            continue
        first = m + next(compress(count(), map(is_not, x, y)))
        if a[first] != b[first]:
            return first
        return first + common_prefix_len(a[first:e], b[first:e])
    return n


# Pairs shared_prefix_len compares as one slice before looking inside it, after the first _HEAD.
_SCAN = 256
_HEAD = 8


def _prefix_keys(blocks: Sequence[Block], table: KeyTable) -> list[Key]:
    """keys[j] identifies the prefix made of blocks[:j] (keys[0] is the empty prefix) in `table`."""
    return _extend_keys([0], [b.sha for b in blocks], table)


def _extend_keys(keys: list[Key], shas: Sequence[str], table: KeyTable) -> list[Key]:
    """Append the keys of the prefixes that extend keys[-1]'s by each of the block hashes `shas` in turn
    (walked as their ids in `table`: see _extend_ids)."""
    return _extend_ids(keys, table.hash_ids(shas), table)


def _extend_ids(keys: list[Key], shas: Sequence[int], table: KeyTable) -> list[Key]:
    """Append the keys of the prefixes that extend keys[-1]'s by each of `shas` (block hash ids, see
    KeyTable.hashes) in turn.

    A prefix's key is interned, not hashed: the key of the prefix one block shorter and the block's
    content hash lead to it through `table` (see KeyTable), a new number when they lead nowhere. Two
    prefixes get one key exactly when they hold the same blocks' hashes in the same order (by induction
    on the length: a key has at most one extension per hash, in `ids` or as its run's next key, never
    both), so there is no collision to rule out, and the numbers depend only on the order prefixes were
    first met, which is the calls' order: deterministic. (A chained BLAKE2b until 2026-12-02, then one
    dict entry per prefix: the same answers.)"""
    new = _walk_keys(keys, shas, table)
    if new:
        keys += range(table.next - new, table.next)
    return keys


def _walk_keys(keys: list[Key], shas: Sequence[int], table: KeyTable, start: int = 0) -> int:
    """_extend_keys(keys, shas[start:], table) without its last step: the keys of the prefixes already in
    `table` are appended to `keys`; the rest, every one new, are handed out as one run and not appended.
    Returns how many were handed out: they are range(table.next - that, table.next), in order (see
    _KeyChain.tail). (`start`: a call's hashes are walked from where it parts from the last call, not
    copied from there first.)"""
    h = keys[-1]
    get = table.ids.get
    starts, runs = table.starts, table.runs
    i, n = start, len(shas)
    while i < n:
        sha = shas[i]
        k = get((h, sha))
        if k is not None:
            h = k
            keys.append(k)
            i += 1
            continue
        r = bisect_right(starts, h) - 1  # the run holding h (every key but the empty prefix's has one)
        if r >= 0:
            run = runs[r]
            j = h - starts[r] + 1  # where h's extension within its run would be
            if j < len(run) and run[j] == sha:
                # As far as the run goes the same way, in C. Only the stretch both can share is copied: a
                # prefix built over many calls is thousands of short runs (each call's few new blocks, an
                # output's key between them), and comparing the whole rest of the call with each run's
                # rest copied ~n entries per run, ~n^2/4 a call (tests/test_sim_key_runs_walk.py).
                m = _agreeing(run, j, shas, i, min(len(run) - j, n - i))
                keys += range(h + 1, h + 1 + m)
                h += m
                i += m
                continue
        # Met for the first time: so is every longer prefix of these blocks. One run for all of them.
        first = table.next
        rest = shas[i:]
        if type(rest) is not array:  # (a run's hashes are compared with a call's as arrays)
            rest = array("i", rest)
        table.next = first + len(rest)
        table.ids[(h, rest[0])] = first
        starts.append(first)
        runs.append(rest)
        return len(rest)
    return 0


# The first stretch `_agreeing` compares; each next one is this many times longer.
_AGREE_FIRST = 32
_AGREE_GROWTH = 4


def _agreeing(run: Sequence[int], j: int, shas: Sequence[int], i: int, k: int) -> int:
    """How many of run[j : j + k] and shas[i : i + k] agree from their starts (common_prefix_len of
    the two), read in stretches that grow geometrically, each compared in C: the work follows the
    agreeing part, not k. Walking a prefix that an earlier call left as many runs (clear_tool_uses past
    its window sends again a prefix of an earlier call, whose runs go on differently after a few dozen
    blocks each), copying and bisecting the whole shared stretch per run was ~90 runs times ~4,000
    hashes, times the bisection's slices, a call."""
    m = 0
    step = _AGREE_FIRST
    while m < k:
        s = min(step, k - m)
        a, b = run[j + m : j + m + s], shas[i + m : i + m + s]
        if a != b:
            # The first pair that differs (there is one: equal lengths, unequal arrays): the stretch
            # halved while long, each half compared in C (arrays: a memcmp), then the last few pair by
            # pair. Pair by pair over the whole stretch (an int made of each hash id, ~30 ns a pair) was
            # most of a walk that comes back to an earlier start (~4,700 hashes).
            lo, hi = 0, s  # a[:lo] == b[:lo]; a[:hi] != b[:hi]
            while hi - lo > _AGREE_PAIRS:
                mid = (lo + hi) // 2
                if a[lo:mid] == b[lo:mid]:
                    lo = mid
                else:
                    hi = mid
            return m + lo + next(compress(count(), map(ne, a[lo:hi], b[lo:hi])))
        m += s
        step *= _AGREE_GROWTH
    return k


# Pairs `_agreeing` compares one by one, at most, once it halved a stretch that differs.
_AGREE_PAIRS = 16


class _KeyChain:
    """Prefix keys (see `_prefix_keys`) and running token sums of one call after another: a call shares
    most of its prefix with the previous one, so only the blocks after the shared part are checked,
    summed and hashed. Same keys and sums as `_prefix_keys` and `_cumulative`, at a cost that follows
    what changed rather than the request's length.

    The shared part is found by comparing the blocks themselves (the engine hands consecutive requests
    the same objects, so this is an identity check in C; equal blocks have equal hashes and counts),
    not a list of hashes built from every block of every call. A request that shifted (a window that
    moved on: clear_tool_uses past its window, a sliding window) is a few new blocks, then a stretch of
    the previous request from a later point on, then the new ones: the stretch's hashes are the previous
    call's (carried), its sums the previous call's moved by one difference, and its blocks passed the
    checks there, so a shifted call reads the blocks around the stretch, not the thousands in it (a
    3,000-turn what-if's clear_tool_uses column: half its calls past the window shift). What is carried
    is only a cache of values that are functions of the blocks: a call that raises leaves it as it was."""

    def __init__(self, ids: KeyTable | None = None) -> None:
        self.ids = KeyTable() if ids is None else ids  # the intern table of the keys (see _extend_keys)
        self.blocks: Sequence[Block] = ()
        # The blocks' hash ids (KeyTable.hashes): extended and cut in place, as keys and raw, only on the
        # last call's line (see take_raw); else a new array, so an entry of _earlier holds its call's
        # hashes as they were.
        self.shas: array[int] = array("i")
        self.keys: list[Key] = [0]
        # The keys after `keys`, not made into a list: those the last call handed out, when it was taken
        # lazily (take_lazy). A window that moved to where no call started before (clear_tool_uses past
        # its window, most of its calls there) has ~4,800 prefixes, every one new: made as ints in a
        # list, each call, they were ~80 us of its ~240, and most such calls' keys are never read past
        # the few before them (a later call that comes back to that start reads them: then they are made).
        self.tail: range = _NO_KEYS
        # The running token sums, as raw[j] + base (see _Sums): a shifted request's stretch keeps the
        # previous call's raw sums as they are and moves `base`, not every sum in it.
        # (An array, as the hashes: a shifted call copies the stretch's ~4,800 sums, and as a list of
        # ints each copy and free touched their scattered objects.)
        self.raw: array[int] = array("q", [0])
        self.base = 0
        self.order_checked = True  # every carried block passed _check_order (a policy asks always or never)
        # keys[:old] of the last take were in the table before it; keys[old:] were handed out by it. A
        # prefix first met in this call is in no policy's dict yet: lookups can stop at `old`.
        self.old = 1
        self.common = 0  # the last take's blocks[:common] (keys[: common + 1]) were the take's before it
        # The keys the last take cut from the list it extended in place (the one before it's keys after
        # keys[common]), else None (the take made a new list; the one before it's is as it was).
        self.cut: list[Key] | None = None
        # The last call of each of the last EARLIER_CALLS lines, by the block where the line parted from
        # the call before it (id -> (that position, blocks, keys, raw sums, base, checked)); a line is a
        # call and the calls after it that keep its start.
        # A window that comes back to where an earlier call's started (clear_tool_uses past its window:
        # the start moves back and on by a round or two) sends again most of that call's prefix: its
        # keys and sums are that call's, copied, where walking the intern table's runs of that prefix
        # (one per call that went that way) cost ~3-4 ms a call. Held by the blocks' ids: each state
        # keeps its blocks alive, so an id names the one block while it is here.
        # A call that goes on the last call's line extends that call's lists in place (see take_raw):
        # they are then held by this chain and by that line's entry only, which the call replaces.
        # (position, blocks, keys, raw sums, base, checked, the blocks' hashes, the keys' tail) each.
        self._earlier: dict[
            int, tuple[int, Sequence[Block], list[Key], array[int], int, bool, array[int], range]
        ] = {}
        self._line = 0  # where the last call's line parted (see _done)
        # The last take came back to an earlier line (_from_earlier): (that line's entry key, the blocks
        # of the call it took from, how many blocks this call shares with it); else None.
        self.back: tuple[int, Sequence[Block], int] | None = None

    def line_key(self) -> int | None:
        """The key of the last call's line among the earlier lines (see _earlier): what a later take
        that comes back to that line finds it by. None before any call."""
        at = self._line
        return id(self.blocks[at]) if at < len(self.blocks) else None

    def keys_for(self, blocks: Sequence[Block]) -> list[Key]:
        return self.take(blocks)[0]

    def take(self, blocks: Sequence[Block], check_order: bool = False) -> tuple[list[Key], list[int]]:
        """(keys, cumulative tokens) of `blocks`; with check_order, first `_check_order`'s check. Raises
        as `_check_order` and `_cumulative` do, for the same block. Lists of the caller's own (take_raw's
        change in place on the next call)."""
        keys, raw, base = self.take_raw(blocks, check_order)
        return list(keys), [x + base for x in raw]

    def take_raw(
        self,
        blocks: Sequence[Block],
        check_order: bool = False,
        shared: int | None = None,
        stretch: tuple[int, int, int] | None = None,
    ) -> tuple[list[Key], array[int], int]:
        """take(blocks), as (keys, raw, base): the cumulative tokens are raw[j] + base. The lists are the
        chain's own, valid until its next call. `shared`: blocks[:shared] are the previous call's own
        Block objects (Call.shared); None: found by comparing. `stretch`: Call.stretch, read only with
        `shared` taken as given; None: searched for."""
        keys, _, raw, base = self.take_lazy(blocks, check_order, shared, stretch, lazy=False)
        return keys, raw, base

    def take_lazy(
        self,
        blocks: Sequence[Block],
        check_order: bool = False,
        shared: int | None = None,
        stretch: tuple[int, int, int] | None = None,
        lazy: bool = True,
    ) -> tuple[list[Key], range, array[int], int]:
        """take_raw(blocks) as (keys, tail, raw, base): the call's keys are keys + tail, where `tail` is the
        keys it handed out (every prefix from the first one no call sent before: `old` on), not made into
        ints in a list (lazy=False: made, and `tail` is empty)."""
        if type(blocks) is not Grown:  # (simulate's calls: read-only, extended without a copy)
            blocks = tuple(blocks)
        prev = self.blocks
        if shared is None:
            common = shared_prefix_len(prev, blocks)
            stretch = None  # (counted from the caller's `shared`)
        else:
            common = min(shared, len(prev), len(blocks))
            # A cheap guard on the caller's word (its last shared block): the prefix's own comparison
            # is what the hint saves.
            if (
                common
                and prev[common - 1] is not blocks[common - 1]
                and prev[common - 1] != blocks[common - 1]
            ):
                common = shared_prefix_len(prev, blocks)
            if common != shared:
                stretch = None
        self.back = None
        back = self._from_earlier(blocks, common, check_order, lazy)
        if back is not None:
            return back
        h, a, m = (0, 0, 0) if stretch is None else stretch
        s = common + h  # where the stretch starts in this call
        # The caller's stretch, held to its ends (the same objects; as the guard on `shared` above):
        # any stretch of equal blocks gives the same keys and sums, so a valid one needs no search.
        if stretch is None or (
            m
            and not (
                0 <= h
                and 0 <= a
                and s + m <= len(blocks)
                and a + m <= len(prev)
                and blocks[s] is prev[a]
                and blocks[s + m - 1] is prev[a + m - 1]
            )
        ):
            h, a, m = find_stretch(prev, blocks[common:], common)
            s = common + h
        cut: list[Key] | None = None  # what an in-place extension cut from the last call's keys
        # Blocks this call reads: all the new ones, or those around a carried stretch (which passed the
        # order and count checks in an earlier call, as one run of the sequence they are in here). Cut
        # from `blocks` by where they are: the new ones as one slice were a copy of a shifted call's
        # ~4,800 Blocks to read a few.
        head, tail = (blocks[common:s], blocks[s + m :]) if m else (blocks[common:], ())
        if check_order and self.order_checked:
            # The shared part passed this check already: only the new blocks, from the rank before them.
            last = SEGMENT_ORDER.get(blocks[common - 1].segment, 0) if common else 0
            if m:
                _check_order(blocks[common : s + 1], last, common)
                _check_order(tail, SEGMENT_ORDER.get(blocks[s + m - 1].segment, 0), s + m)
            else:
                _check_order(head, last, common)
        elif check_order:
            _check_order(blocks)
        tokens = list(map(_TOKENS, head))
        after = list(map(_TOKENS, tail))
        if (tokens and min(tokens) < 0) or (after and min(after) < 0):
            b = next(b for b in (*head, *tail) if b.tokens < 0)
            raise CacheSimError(f"block {b.sha[:12]} has a negative token count ({b.tokens})")
        # Nothing is changed above this line: a call that raises leaves the chain as it was.
        shas = self.shas
        prev_raw, base = self.raw, self.base
        if m:
            # The call's hashes made once: walked from `common`, then carried as they are.
            hid = self.ids.hashes.__getitem__
            full = shas[:common]
            full.extend(map(hid, map(_SHA, head)))
            full += shas[a : a + m]
            full.extend(map(hid, map(_SHA, tail)))
            keys = _keys_upto(self.keys, self.tail, common + 1)
            fresh = _walk_keys(keys, full, self.ids, common)
            raw = prev_raw[: common + 1]
            raw.extend(islice(accumulate(tokens, initial=raw[-1]), 1, None))
            d = raw[-1] - prev_raw[a]  # what the stretch's sums move by here
            if d and m > len(raw):
                # The stretch is most of the call: its raw sums are the previous call's as they are, and
                # the base moves by d; the few before it are taken down by d instead.
                raw = array("q", [x - d for x in raw])
                base += d
                raw += prev_raw[a + 1 : a + m + 1]
            elif d:
                raw.extend(map(add, prev_raw[a + 1 : a + m + 1], repeat(d)))
            else:
                raw += prev_raw[a + 1 : a + m + 1]
            raw.extend(islice(accumulate(after, initial=raw[-1]), 1, None))
        else:
            new_shas = self.ids.hash_ids(map(_SHA, head))
            if self._line < common and 2 * common >= len(prev) and prev[self._line] is blocks[self._line]:
                # On the last call's line (see _done): its lists are this chain's and that line's entry's
                # only, and the entry is replaced by this call's. Cut and extended in place: a call that
                # appends costs what it appends, not a copy of every key and sum before it. (The last
                # call's tail, the few keys it appended, made first: they are its list's from here.)
                keys, raw = self.keys, prev_raw
                if self.tail:
                    keys += self.tail
                    self.tail = _NO_KEYS
                cut = keys[common + 1 :]
                del keys[common + 1 :], raw[common + 1 :]
            else:
                keys, raw = _keys_upto(self.keys, self.tail, common + 1), prev_raw[: common + 1]
            fresh = _walk_keys(keys, new_shas, self.ids)
            raw.extend(islice(accumulate(tokens, initial=raw[-1]), 1, None))
        # The keys handed out are the last ones (after the first prefix not in the table, every one is
        # new): keys[old:] of the call, its tail.
        old = len(keys)
        made = range(self.ids.next - fresh, self.ids.next)
        if fresh and not lazy:
            keys += made
            made = _NO_KEYS
        if m:
            shas = full
        elif cut is not None:  # on the last call's line: its hashes cut and extended in place too
            del shas[common:]
            shas += new_shas
        else:
            shas = shas[:common]
            shas += new_shas
        self._done(blocks, common, keys, made, raw, base, shas, check_order, old)
        self.cut = cut
        return keys, made, raw, base

    def _from_earlier(
        self, blocks: Sequence[Block], common: int, check_order: bool, lazy: bool
    ) -> tuple[list[Key], range, array[int], int] | None:
        """take_raw(blocks) from an earlier call (not the last one) that parted from its own previous
        call at the block this one parts at, when it shares most of what follows with this one: its keys,
        sums and hashes as far as the two agree, then the rest read. None when there is none such."""
        if common >= len(blocks) - STRETCH_MIN:
            return None
        got = self._earlier.get(id(blocks[common]))
        if got is None or got[0] != common or got[1][common] is not blocks[common]:
            return None
        _, eb, ekeys, eraw, ebase, echecked, eshas, etail = got
        c = shared_prefix_len(eb, blocks)
        rest = blocks[c:]
        if c - common < len(rest) or c - common < STRETCH_MIN:
            return None  # it shares less than is left to read: the usual way
        if check_order and echecked:
            _check_order(rest, SEGMENT_ORDER.get(blocks[c - 1].segment, 0), c)
        elif check_order:
            _check_order(blocks)
        tokens = list(map(_TOKENS, rest))
        if tokens and min(tokens) < 0:
            b = next(b for b in rest if b.tokens < 0)
            raise CacheSimError(f"block {b.sha[:12]} has a negative token count ({b.tokens})")
        # The hashes carried to the next call: the earlier call's as far as the two agree (its entry's
        # list is that call's own: see self.shas), the rest read from the blocks. Read from every block
        # (~4,700 a clear_tool_uses call past its window), they were ~1.5 ms of such a call.
        shas = eshas[:c]
        shas.extend(map(self.ids.hashes.__getitem__, map(_SHA, rest)))
        keys = _keys_upto(ekeys, etail, c + 1)
        fresh = _walk_keys(keys, shas, self.ids, c)
        old = len(keys)
        made = range(self.ids.next - fresh, self.ids.next)
        if fresh and not lazy:
            keys += made
            made = _NO_KEYS
        raw = eraw[: c + 1]
        raw.extend(islice(accumulate(tokens, initial=raw[-1]), 1, None))
        self._done(blocks, common, keys, made, raw, ebase, shas, check_order, old)
        self.cut = None
        self.back = (id(blocks[common]), eb, c)
        return keys, made, raw, ebase

    def _done(
        self,
        blocks: Sequence[Block],
        common: int,
        keys: list[Key],
        tail: range,
        raw: array[int],
        base: int,
        shas: array[int],
        checked: bool,
        old: int,
    ) -> None:
        """Carry this call's figures to the next, and keep them by where its line parted (see _earlier)."""
        # A call that keeps most of the last one (appends, or edits near the end) goes on its line: kept
        # under the line's start in the last call's place. Else (a window that moved) it starts a line
        # where it parted from the last call. (take_raw's in-place test is this one's first branch.)
        at = self._line if self._line < common and 2 * common >= len(self.blocks) else common
        self.blocks, self.keys, self.tail, self.raw, self.base = blocks, keys, tail, raw, base
        self.shas, self.order_checked = shas, checked
        self.old, self.common, self._line = old, common, at
        if at < len(blocks):
            earlier = self._earlier
            earlier.pop(id(blocks[at]), None)
            earlier[id(blocks[at])] = (at, blocks, keys, raw, base, checked, shas, tail)
            if len(earlier) > EARLIER_CALLS:
                del earlier[next(iter(earlier))]


_NO_KEYS = range(0)


def _keys_upto(keys: list[Key], tail: range, e: int) -> list[Key]:
    """The first `e` keys of keys + tail, as a new list."""
    if e <= len(keys):
        return keys[:e]
    out = keys[:]
    out += tail[: e - len(keys)]
    return out


def _key_at(keys: list[Key], tail: range, j: int) -> Key:
    """(keys + tail)[j], for 0 <= j < len(keys) + len(tail)."""
    return keys[j] if j < len(keys) else tail[j - len(keys)]


class _Sums:
    """Cumulative token sums read as raw[j] + base (see _KeyChain.take_raw): what a policy indexes."""

    __slots__ = ("raw", "base")

    def __init__(self, raw: Sequence[int], base: int) -> None:
        self.raw, self.base = raw, base

    def __getitem__(self, j: int) -> int:
        return self.raw[j] + self.base

    def __len__(self) -> int:
        return len(self.raw)


def _sums(raw: Sequence[int], base: int) -> Sequence[int]:
    # (Indexed and measured only, as a Sequence of the sums.)
    return cast(Sequence[int], _Sums(raw, base)) if base else raw


# Earlier calls a _KeyChain keeps to start a call from (see _KeyChain._earlier).
EARLIER_CALLS = 32
# Units created or expired since a line was left, at most, for its reading to be caught up rather than
# made afresh: each is a search of the call's keys, ~10x a fresh reading's lookup of a prefix (and at
# most one per 8 prefixes the reading holds). 64 left ~100 of the ~550 comebacks of a 6,000-turn what-if's
# clear_tool_uses column to be read afresh.
LINE_CATCH_UP = 256

# A shifted request (see _KeyChain): the stretch starts within the first STRETCH_HEAD new blocks, at one of
# the previous request's next STRETCH_SEARCH blocks (or, moved back, at the previous request's first new
# block, within the first STRETCH_SEARCH new ones), and runs at least STRETCH_MIN blocks (shorter ones are
# read as they are).
STRETCH_HEAD = 4
STRETCH_SEARCH = 256
STRETCH_MIN = 16


def find_stretch(prev: Sequence[Any], new: Sequence[Any], common: int) -> tuple[int, int, int]:
    """(h, a, m): new[h : h + m] are the blocks prev[a : a + m] (the same objects or equal ones), with
    m >= STRETCH_MIN and either h < STRETCH_HEAD (a window that moved on) or a == common and
    h < STRETCH_SEARCH (one that moved back); (0, 0, 0) when the blocks after the `common` shared ones
    hold no such stretch. The start is found by identity, in C (no block's __eq__ runs to find it).
    For the simulator's Blocks here and the engine's Blocks in simulate (a sliding window's request is
    its new first message, then what the previous request sent from a later point on)."""
    if len(new) < STRETCH_MIN:
        return 0, 0, 0
    window = prev[common : common + STRETCH_SEARCH]
    for h in range(min(STRETCH_HEAD, len(new) - STRETCH_MIN + 1)):
        x = new[h]
        at = next(compress(count(common), map(is_, window, repeat(x))), -1)
        if at >= 0:
            m = shared_prefix_len(prev[at:], new[h:])
            return (h, at, m) if m >= STRETCH_MIN else (0, 0, 0)
    # A window that moved back: older blocks first, then the previous request from where it parted
    # (clear_tool_uses past its window: a cleared result frees room and the window takes in a round or
    # more again, ~40% of its calls there). Looked for as the previous request's first new block among
    # this one's first STRETCH_SEARCH: read whole, these ~4,700-block calls were most of that column.
    if common < len(prev):
        y = prev[common]
        h = next(compress(count(), map(is_, new[:STRETCH_SEARCH], repeat(y))), -1)
        if h >= STRETCH_HEAD:  # (nearer the front the search above met it already)
            m = shared_prefix_len(prev[common:], new[h:])
            if m >= STRETCH_MIN:
                return h, common, m
    return 0, 0, 0


def _chain(key: Key, sha: str, ids: KeyTable) -> Key:
    return _extend_ids([key], array("i", [ids.hashes[sha]]), ids)[1]


def _cumulative(blocks: Sequence[Block]) -> list[int]:
    tokens = [b.tokens for b in blocks]
    if tokens and min(tokens) < 0:
        b = next(b for b in blocks if b.tokens < 0)
        raise CacheSimError(f"block {b.sha[:12]} has a negative token count ({b.tokens})")
    return list(accumulate(tokens, initial=0))


def _check_order(blocks: Sequence[Block], last: int = 0, start: int = 0) -> None:
    """Segments in prefix order. `last`: the rank of the block before `blocks`, which starts at index
    `start` of its call (the error names the call's index)."""
    for i, b in enumerate(blocks, start):
        rank = SEGMENT_ORDER.get(b.segment)
        if rank is None:
            raise CacheSimError(
                f"block {i} has segment {b.segment!r}; expected one of {', '.join(SEGMENT_ORDER)}"
            )
        if rank < last:
            raise CacheSimError(
                f"block {i} ({b.segment}) comes after a later segment: the prompt prefix order is "
                "tools -> system -> messages"
            )
        last = rank


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
