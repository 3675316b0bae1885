"""Where two calls' Blocks part (the key chain's comparisons, and simulate's): the length of their shared
prefix (`shared_prefix_len`: the first pair that is not the same object found in C, then compared by
value), and a stretch of the previous call sent again from another point (`find_stretch`: a window that
moved on or back).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, count, repeat
from operator import is_, is_not
from typing import Any

from engine.common_prefix import common_prefix_len
from engine.sim.grown import Grown, Window


def shared_prefix_len(a: Sequence[Any], b: Sequence[Any]) -> int:
    """common_prefix_len(a, b), the length of their equal prefix, for sequences of objects that are
    mostly the very same objects from one call to the next (a session's requests: the engine hands the
    unchanged Blocks out again, and simulate converts each distinct Block once). Where two requests
    differ, it is most often early (a sliding window's new first message): the first pair that is not
    the same object is found in C and compared once, where the binary search on slices compared ~8
    slices, each ending in a dataclass __eq__ (a Python call). An equal pair of distinct objects there
    goes on by value, as common_prefix_len does."""
    n = min(len(a), len(b))
    if type(a) is Grown and type(b) is Grown:
        # Two calls' Blocks as Grown (simulate's long shifted calls): their runs' parts compared as the
        # lists they are, sliced once (a Grown's slice is a tuple made of its run's slice: two copies).
        ra, ka = a.head()
        rb, kb = b.head()
        k = min(ka, kb, n)
        c = _shared_upto(ra, rb, k)
        return c if c < k else k + _shared_upto(a[k:n], b[k:n], n - k)
    if type(a) is Window and type(b) is Window:
        # Two shifted calls' Blocks on one run from one start (simulate's Windows): that part is the same
        # objects, not compared; the rest as any sequences.
        k = min(a.shared_run(b), n)
        if k >= 0:
            return k + _shared_upto(a[k:n], b[k:n], n - k)
    return _shared_upto(a, b, n)


def _shared_upto(a: Sequence[Any], b: Sequence[Any], n: int) -> int:
    """shared_prefix_len of a[:n] and b[:n] (both at least n long)."""
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
