"""The key chain: each call's prefix keys (one per block boundary, interned in a KeyTable) and running
token sums, made from the previous call's as a change to it (`_KeyChain`), and the checks of a call's
block order. It is built on the comparisons in engine/sim/shared_prefix.py (`shared_prefix_len`,
`find_stretch`) and the key walk in engine/sim/key_walk.py. The simulator's provider policies
(engine/sim/anthropic_cache.py, openai_cache.py, deepseek_cache.py) read a call's prefixes only
through it."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import accumulate, islice, repeat
from operator import add, attrgetter
from typing import cast

from engine.sim.calls import SEGMENT_ORDER, Block, CacheSimError
from engine.sim.grown import Grown, Window
from engine.sim.key_path import KeyPath
from engine.sim.key_table import Key, KeyTable
from engine.sim.key_walk import _walk_keys
from engine.sim.run_hashes import RunHashes, run_hashes
from engine.sim.shared_prefix import STRETCH_MIN, find_stretch, shared_prefix_len
from engine.sim.spliced import Spliced, array_of

_TOKENS = attrgetter("tokens")
_SHA = attrgetter("sha")


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
        # hashes as they were. A Window's (see _take_window): a Spliced on its run's ids, made an array
        # before any change in place.
        self.shas: array[int] | Spliced = array("i")
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
        self.raw: array[int] | Spliced = array("q", [0])
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
            int,
            tuple[int, Sequence[Block], list[Key], array[int] | Spliced, int, bool, array[int] | Spliced, range],
        ] = {}
        self._line = 0  # where the last call's line parted (see _done)
        # The last take came back to an earlier line (_from_earlier): (that line's entry key, the blocks
        # of the call it took from, how many blocks this call shares with it); else None.
        self.back: tuple[int, Sequence[Block], int] | None = None
        # The hash ids and sums of the Block runs of the last Windows taken (see _take_window).
        self._runs: dict[int, RunHashes] = {}
        self.windows = True  # False: a Window taken the stretch's way (the reference the tests compare)

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
    ) -> tuple[list[Key], array[int] | Spliced, int]:
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
    ) -> tuple[list[Key], range, array[int] | Spliced, int]:
        """take_raw(blocks) as (keys, tail, raw, base): the call's keys are keys + tail, where `tail` is the
        keys it handed out (every prefix from the first one no call sent before: `old` on), not made into
        ints in a list (lazy=False: made, and `tail` is empty)."""
        if type(blocks) is not Grown and type(blocks) is not Window:
            blocks = tuple(blocks)  # (simulate's calls, Grown and Window: read-only, made without a copy)
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
        if m and not check_order and type(blocks) is Window and self.windows:
            # A shifted Window (clear_tool_uses past its window): its ids and sums from its run's.
            got = self._take_window(blocks, common, (h, a, m), lazy)
            if got is not None:
                return got
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
            # (A long walk's keys as runs, when the keys are read lazily: see engine/sim/key_path.py.)
            keys = _keys_upto(self.keys, self.tail, common + 1, lazy and len(full) - common >= KEYPATH_FROM)
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
                # (A Window's carried sums, a Spliced on its run's: made an array first.)
                keys, raw = self.keys, array_of(prev_raw)
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
        old, made = _handed_out(keys, self.ids, fresh, lazy)
        if m:
            shas = full
        elif cut is not None:  # on the last call's line: its hashes cut and extended in place too
            shas = array_of(shas)
            del shas[common:]
            shas += new_shas
        else:
            shas = shas[:common]
            shas += new_shas
        self._done(blocks, common, keys, made, raw, base, shas, check_order, old)
        self.cut = cut
        return keys, made, raw, base

    def _take_window(
        self, blocks: Window[Block], common: int, stretch: tuple[int, int, int], lazy: bool
    ) -> tuple[list[Key], range, array[int] | Spliced, int] | None:
        """take_lazy(blocks) for a Window (head + run[lo:k] + tail, engine/sim/grown.py) past its first
        `common` blocks, which are the last call's: the hash ids and sums of its run part read from the
        run's RunHashes (engine/sim/run_hashes.py), which reads each Block of the run once; of its tail,
        those in the `stretch` (h, a, m) (its blocks[common + h :][:m] are the last call's [a : a + m])
        carried from the last call and only the rest read, as the few head Blocks after `common`. The
        same keys and sums as the stretch's way (the sums as another raw and base of equal total). None,
        with nothing changed, when the run part is not past `common` or a Block read has a negative
        count (the usual way then raises)."""
        bh, run, lo, k, bt = blocks.parts()
        hn = len(bh)
        p0 = max(common, hn)  # the first position of the run part this call reads
        b0 = lo + p0 - hn  # and its place in the run
        if b0 >= k:
            return None
        h, a, m = stretch
        s = common + h  # where the stretch starts in this call
        q0 = hn + k - lo  # where the tail starts
        c = s + m - q0 if s <= q0 < s + m else 0  # bt[:c] are the last call's [a + q0 - s : a + m]
        new = bt[c:] if c else bt
        head = bh[common:hn]
        htok = list(map(_TOKENS, head))
        ttok = list(map(_TOKENS, new))
        if (htok and min(htok) < 0) or (ttok and min(ttok) < 0):
            return None
        # (Checked before the run's hashes are read: a call that raises numbers no new hash.)
        par = run_hashes(self._runs, run)
        if not par.ids and type(self.blocks) is Grown and self.blocks.head()[0] is run:
            # The last call was this run's first items (a Grown on it): its ids and sums are theirs.
            par.seed(self.shas, self.raw, self.blocks.head()[1])
        if not par.upto(k, self.ids):
            return None
        hid = self.ids.hashes.__getitem__
        prev_shas, prev_raw, was = self.shas, self.raw, self.base
        x = a + q0 - s
        # The call's ids and sums as a Spliced: the head's and the tail's arrays of their own, the run's
        # part a place in the run's ids and sums (not copied: see engine/sim/spliced.py).
        front = prev_shas[:common]
        front.extend(map(hid, map(_SHA, head)))
        back = prev_shas[x : x + c] if c else array("i")
        back.extend(map(hid, map(_SHA, new)))
        full = Spliced(front, par.ids, b0, k, back)
        keys = _keys_upto(self.keys, self.tail, common + 1, lazy and len(full) - common >= KEYPATH_FROM)
        # A start an earlier call had (its first prefix past `common` in the table): the walk reads on
        # through the table's runs, each id by index, so it is handed an array (a copy, as before); a new
        # start, every prefix past there new, reads two or three.
        walked = full[:] if common < len(full) and (keys[-1], full[common]) in self.ids.ids else full
        fresh = _walk_keys(keys, walked, self.ids, common, (par.ids, p0, b0, k - b0))
        # The sums as raw + base with the run part's raw the run's own sums: cum[p0 + y] is
        # cum[p0] + sums[b0 + y] - sums[b0], so base = cum[p0] - sums[b0]. The few before p0 moved to it,
        # the carried tail's the last call's moved by one difference (as the stretch's way moves them).
        sums = par.sums
        base = prev_raw[common] + was + sum(htok) - sums[b0]
        d = was - base
        lead = array("q", [y + d for y in prev_raw[: common + 1]]) if d else prev_raw[: common + 1]
        lead.extend(islice(accumulate(htok, initial=lead[-1]), 1, None))
        last = sums[k]
        if c:
            e = last - prev_raw[x]
            trail = prev_raw[x + 1 : x + c + 1]
            if e:
                trail = array("q", map(add, trail, repeat(e)))
            last = trail[-1]
        else:
            trail = array("q")
        trail.extend(islice(accumulate(ttok, initial=last), 1, None))
        raw = Spliced(lead, sums, b0 + 1, k + 1, trail)
        old, made = _handed_out(keys, self.ids, fresh, lazy)
        self._done(blocks, common, keys, made, raw, base, full, False, old)
        self.cut = None
        return keys, made, raw, base

    def _from_earlier(
        self, blocks: Sequence[Block], common: int, check_order: bool, lazy: bool
    ) -> tuple[list[Key], range, array[int] | Spliced, int] | None:
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
        keys = _keys_upto(ekeys, etail, c + 1, lazy and c + 1 - len(ekeys) >= KEYPATH_FROM)
        fresh = _walk_keys(keys, shas, self.ids, c)
        old, made = _handed_out(keys, self.ids, fresh, lazy)
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
        raw: array[int] | Spliced,
        base: int,
        shas: array[int] | Spliced,
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


def _handed_out(keys: list[Key], table: KeyTable, fresh: int, lazy: bool) -> tuple[int, range]:
    """(old, made) of a take whose walk appended its known keys to `keys` and handed out `fresh` new
    ones: where the new ones start, and them as a range (lazy), else appended to `keys` (and made empty)."""
    old = len(keys)
    made = range(table.next - fresh, table.next)
    if fresh and not lazy:
        keys += made
        return old, _NO_KEYS
    return old, made


def _keys_upto(keys: list[Key], tail: range, e: int, path: bool = False) -> list[Key]:
    """The first `e` keys of keys + tail, as a new list (or KeyPath: `keys`' own kind, and with `path`
    a KeyPath, whose list operations the chain and the policies use as a list's)."""
    if path and type(keys) is not KeyPath:
        keys = cast(list[Key], KeyPath.of(keys[:e]))
        keys += tail[: e - len(keys)]
        return keys
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


# A lazy take whose keys to walk or carry number this many or more holds them as a KeyPath (runs), not
# as ints in a list (engine/sim/key_path.py); shorter ones (a sliding window's ~180) stay lists.
KEYPATH_FROM = 1024


# Earlier calls a _KeyChain keeps to start a call from (see _KeyChain._earlier).
EARLIER_CALLS = 32


# Units created or expired since a line was left, at most, for its reading to be caught up rather than
# made afresh: each is a search of the call's keys, ~10x a fresh reading's lookup of a prefix (and at
# most one per 8 prefixes the reading holds). 64 left ~100 of the ~550 comebacks of a 6,000-turn what-if's
# clear_tool_uses column to be read afresh.
LINE_CATCH_UP = 256


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
