"""A prefix's key: interned in a KeyTable from the key of the prefix one block shorter and the block's
hash, so two prefixes share a key exactly when they hold the same blocks' hashes in order
(`_extend_ids`); a call's keys walked through the table's runs (`_walk_keys`, `_agreeing`), the new ones
handed out as one run.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence
from itertools import compress, count
from operator import ne

from engine.sim.calls import Block
from engine.sim.key_table import Key, KeyTable


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


def _walk_keys(
    keys: list[Key],
    shas: Sequence[int],
    table: KeyTable,
    start: int = 0,
    backing: tuple[array[int], int, int, int] | None = None,
) -> int:
    """_extend_keys(keys, shas[start:], table) without its last step: the keys of the prefixes already in
    `table` are appended to `keys`; the rest, every one new, are handed out as one run and not appended.
    Returns how many were handed out: they are range(table.next - that, table.next), in order (see
    _KeyChain.tail). (`start`: a call's hashes are walked from where it parts from the last call, not
    copied from there first.) `backing` (ids, s, p, n): shas[s : s + n] are ids[p : p + n], an array
    only ever appended to (RunHashes.ids): new keys there are handed out as a run that is that place in
    it, not a copy (the keys after it as a run of their own, reached from the last key before them)."""
    h = keys[-1]
    get = table.ids.get
    starts, runs, offs, lens = table.starts, table.runs, table.offs, table.lens
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
            if j < lens[r] and run[offs[r] + j] == sha:
                # As far as the run goes the same way, in C. Only the stretch both can share is copied: a
                # prefix built over many calls is thousands of short runs (each call's few new blocks, an
                # output's key between them), and comparing the whole rest of the call with each run's
                # rest copied ~n entries per run, ~n^2/4 a call (tests/test_sim_key_runs_walk.py).
                m = _agreeing(run, offs[r] + j, shas, i, min(lens[r] - j, n - i))
                keys += range(h + 1, h + 1 + m)
                h += m
                i += m
                continue
        # Met for the first time: so is every longer prefix of these blocks. One run for all of them.
        first = table.next
        handed = n - i
        table.next = first + handed
        table.ids[(h, sha)] = first
        if backing is not None and backing[1] <= i and n - i >= BACKED_FROM:
            ids, s, p, bn = backing
            part = min(s + bn - i, n - i)
            if part >= BACKED_FROM:
                # A place in the Block run's ids; the few after it (the call's newest) copied as a run
                # of their own, reached from the place's last key.
                starts.append(first)
                runs.append(ids)
                offs.append(p + i - s)
                lens.append(part)
                i += part
                if i == n:
                    return handed
                table.ids[(first + part - 1, shas[i])] = first + part
                first += part
        rest = shas[i:]
        if type(rest) is not array:  # (a run's hashes are compared with a call's as arrays)
            rest = array("i", rest)
        starts.append(first)
        runs.append(rest)
        offs.append(0)
        lens.append(len(rest))
        return handed
    return 0


# A new run of at least this many keys in a Block run's ids (_walk_keys's `backing`) is kept as its place
# there; a shorter one (an appending call's few new blocks) is copied as it always was.
BACKED_FROM = 64


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


def _chain(key: Key, sha: str, ids: KeyTable) -> Key:
    return _extend_ids([key], array("i", [ids.hashes[sha]]), ids)[1]
