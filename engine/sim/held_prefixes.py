"""The DeepSeek cache simulator's `seen` prefixes other than the last call's, kept as runs of keys.

`seen` maps every prefix a request sent to when it was last sent, in order of last use; the last call's
prefixes are one list with one time (`_DeepSeekPolicy._live`) and the rest is this store. A prefix key
is an int handed out by the simulator's intern table in runs (engine/sim/key_table.py): a call's prefixes are
a few runs of consecutive numbers. A column that changes its requests early every call (a sliding
window, or clear_tool_uses clearing one more old result every turn past its trigger) sends a new run
of thousands of prefixes a call, and each call's are held until they expire (DeepSeek: 4 h): held one
dict entry per prefix, a 3,000-turn what-if's clear_tool_uses column held ~1.9 M (~150 MB of its
peak). Here a call's prefixes are one batch (their time, and their runs in the order they were sent):
what is stored follows how many runs were sent, not how many prefixes.

The same entries, times and order as the dict it replaces (`items()`): a batch is appended when the
last call's prefixes are let go (a key is never in two batches: a prefix sent again is taken out of
its batch first), expiry takes whole batches (their keys share one time) and, in time order, only from
the front, where the dict's scan stopped at its first live entry.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterator, Sequence
from itertools import accumulate, compress, count, islice, pairwise, repeat
from operator import add, attrgetter, itemgetter, ne, sub

_LO = attrgetter("lo")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
# Keys read by one scan in C when their ends show a gap, rather than halved further (see _runs).
_LEAF = 128
# Up to this many runs a batch is put among those held one by one; more are merged in one sort.
_FEW = 8
# A batch of more runs than this keeps what tells its keys (_Whole), so a discard of its first keys
# takes them out in one pass (tests set it to 0: every batch).
_WHOLE_MIN = _FEW
# Runs of expired batches left in the run lists as empty runs (lo == hi), at most this many (and at most
# as many as the live ones) before one pass takes them out (see _drop).
_DEAD_FEW = 64
_NO_KEYS = range(0)


class _Run:
    """Keys lo .. hi - 1 of one batch (one call's prefixes, sent at one time)."""

    __slots__ = ("lo", "hi", "batch")

    def __init__(self, lo: int, hi: int, batch: _Batch) -> None:
        self.lo, self.hi, self.batch = lo, hi, batch


class _Batch:
    __slots__ = ("t", "runs", "whole")

    def __init__(self, t: float) -> None:
        self.t = t
        self.runs: list[_Run] = []  # in the order the keys were sent (each run ascending)
        # Its keys as added, while no discard took part of them (a batch of many runs: see _Whole).
        self.whole: _Whole | None = None


class _Whole:
    """The keys a batch was added with, as few numbers as tell them: how many, and where each run starts
    and ends among them and with which key. Strictly ascending keys (a call's prefix keys) with the same
    keys at those places are the batch's keys: between a run's first and last key at places hi - lo - 1
    apart, strictly ascending integers are every key of the run. Made from the runs when first asked
    (most such batches expire or are cut otherwise: made with each, a big add took ~30% longer)."""

    __slots__ = ("spans", "n", "first_at", "firsts", "last_at", "lasts")

    def __init__(self, spans: list[tuple[int, int]], n: int) -> None:
        self.spans: list[tuple[int, int]] | None = spans
        self.n = n
        self.first_at: list[int] = []
        self.firsts: list[int] = []
        self.last_at: list[int] = []
        self.lasts: list[int] = []

    def _made(self) -> None:
        spans, self.spans = self.spans, None
        assert spans is not None
        self.firsts = list(map(_FIRST, spans))
        his = list(map(_SECOND, spans))
        ends = list(accumulate(map(sub, his, self.firsts)))
        self.first_at = [0, *ends[:-1]]
        self.last_at = list(map(add, ends, repeat(-1)))
        self.lasts = list(map(add, his, repeat(-1)))

    def front(self, keys: Sequence[int]) -> int:
        """How many of the batch's runs `keys` (strictly ascending, not empty) cover, when they are the
        batch's first len(keys) keys: the last of those runs is covered only up to keys[-1]. -1 when
        they are not. Read in C: two lookups a run."""
        n = len(keys)
        if n > self.n:
            return -1
        if self.spans is not None:
            self._made()
        r = bisect_right(self.first_at, n - 1)  # keys[-1] is in the r-th run, if they are the front
        if (
            keys[n - 1] - self.firsts[r - 1] != n - 1 - self.first_at[r - 1]
            or list(map(keys.__getitem__, self.first_at[:r])) != self.firsts[:r]
            or list(map(keys.__getitem__, self.last_at[: r - 1])) != self.lasts[: r - 1]
        ):
            return -1
        return r


def runs_of(keys: Sequence[int]) -> list[tuple[int, int]]:
    """`keys` (ascending, as a call's prefix keys always are: each extends the one before it, and an
    extension is handed out after what it extends) as runs of consecutive numbers [(lo, hi), ...], in
    order: a call's new prefixes are one run."""
    if hasattr(keys, "runs"):  # a KeyPath (engine/sim/key_path.py): held as its runs
        return keys.runs()  # type: ignore[no-any-return]
    out: list[tuple[int, int]] = []
    if keys:
        _runs(keys, 0, len(keys), out)
    return out


def _runs(keys: Sequence[int], a: int, b: int, out: list[tuple[int, int]]) -> None:
    # Ascending keys[a:b] without a gap end b - a - 1 above where they start. A call's keys are a few
    # runs (its earliest prefixes met in earlier calls, then its own new ones): halving finds their
    # ends in a few dozen steps where a scan of a 5,000-block request's keys read every one.
    lo = keys[a]
    if keys[b - 1] - lo == b - 1 - a:
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], lo + b - a)
        else:
            out.append((lo, lo + b - a))
    elif b - a <= _LEAF:
        part = keys[a:b]
        # Where a key is not the one before it plus one (in C): between two such cuts, one run. (A prefix
        # built over many calls is thousands of runs of two or three keys: one halving step per run
        # was ~600 calls a call for a clear_tool_uses call past its window.)
        cuts = list(compress(count(1), map(ne, islice(part, 1, None), map(add, part, repeat(1)))))
        for i, j in pairwise([0, *cuts, b - a]):
            lo = part[i]
            if out and out[-1][1] == lo:
                out[-1] = (out[-1][0], lo + j - i)
            else:
                out.append((lo, lo + j - i))
    else:
        mid = (a + b) // 2
        _runs(keys, a, mid, out)
        _runs(keys, mid, b, out)


class HeldPrefixes:
    """prefix key -> time last sent, in order of last use, stored as batches of runs (see the module)."""

    def __init__(self) -> None:
        self._batches: deque[_Batch] = deque()  # in order of last use
        # Every run of every batch by its first key, ascending (runs never overlap: a key is held once).
        self._los: list[int] = []
        self._runs: list[_Run] = []
        self._n = 0  # keys held
        # Empty runs (lo == hi) among them: an expired batch's, left in place (see _drop). No live run
        # holds an empty run's lo strictly inside its keys (add takes them out first), so the run a
        # bisection finds for a key is still the only one that can hold it.
        self._dead = 0

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def __contains__(self, key: int) -> bool:
        i = bisect_right(self._los, key) - 1
        return i >= 0 and key < self._runs[i].hi

    def items(self) -> Iterator[tuple[int, float]]:
        for b in self._batches:
            t = b.t
            for r in b.runs:
                yield from zip(range(r.lo, r.hi), repeat(t))

    def add(self, keys: Sequence[int], t: float, more: range = _NO_KEYS) -> None:
        """Put `keys` and then `more` (none of them held; `more` above every key in `keys`) at the end, sent
        at `t`. `more`: keys given as a range, one run (a call's new prefixes, never made into a list)."""
        spans = runs_of(keys)
        if more:
            if spans and spans[-1][1] == more.start:
                spans[-1] = (spans[-1][0], more.stop)
            else:
                spans.append((more.start, more.stop))
        if not spans:
            return
        b = _Batch(t)
        b.runs = new = [_Run(lo, hi, b) for lo, hi in spans]
        n = sum(hi - lo for lo, hi in spans)
        if len(spans) > _WHOLE_MIN:
            b.whole = _Whole(spans, n)
        self._n += n
        los, runs = self._los, self._runs
        if not runs or spans[0][0] > los[-1]:
            # Past every run held (a call's new prefixes are the keys handed out last): appended.
            los += [lo for lo, _ in spans]
            runs += new
        elif len(new) <= _FEW:
            for r in new:
                i = bisect_right(los, r.lo)
                if i < len(los) and los[i] < r.hi:  # an empty run within r's keys: taken out first
                    self._bury()
                    i = bisect_right(los, r.lo)
                los.insert(i, r.lo)
                runs.insert(i, r)
        else:
            # Many runs among those held (right after clear_tool_uses' window fills, a call lets go of
            # the ~2,300 one-call runs it had appended to): one merge of two ascending lists (timsort,
            # in C), not a bisect and two inserts (each moving every run after it) per run.
            if self._dead:
                runs[:] = [r for r in runs if r.hi > r.lo]
                self._dead = 0
            runs += new
            runs.sort(key=_LO)
            los[:] = map(_LO, runs)
        self._batches.append(b)

    def discard(self, keys: Sequence[int]) -> None:
        """Take out those of `keys` that are held (a prefix sent again leaves its batch).

        One pass over the runs the keys meet: each is cut to what is left of it, the run lists are
        spliced once, and each batch that lost or split a run is rebuilt once. Cut run by run (a delete
        from the run lists, moving every run after it, and a search of the run's batch for it), a call
        that sent again the prefixes of many earlier calls paid for each of them times the runs held."""
        if not keys or not self._n:
            return
        los, runs = self._los, self._runs
        # The first keys of the batch holding the first of them, untouched since it was added: a window
        # that comes back to an earlier start sends again the prefixes of the line it left, up to where
        # it parts from it (clear_tool_uses' column past its window: ~2,300 runs of two keys at a time,
        # ~3 ms cut run by run below).
        i = bisect_right(los, keys[0]) - 1
        if i >= 0 and keys[0] < runs[i].hi:
            owner = runs[i].batch
            w = owner.whole
            cover = -1 if w is None else w.front(keys)
            if cover > 0:
                self._take_front(owner, cover, keys[-1] + 1, len(keys))
                return
        spans = runs_of(keys)
        n = len(runs)
        # The indices of the runs some span meets, ascending, each once (a run two spans meet too).
        hit: list[int] = []
        for a, b in spans:
            s = max(bisect_right(los, a) - 1, 0)
            if s < n and runs[s].hi <= a:
                s += 1
            if hit and hit[-1] >= s:
                s = hit[-1] + 1
            e = bisect_left(los, b)
            if s < e:
                hit.extend(range(s, e))
        if not hit:
            return
        ns = len(spans)
        j = 0
        gone = 0
        parts: dict[_Run, list[_Run]] = {}  # a run the keys met -> what is left of it, in order
        for i in hit:
            r = runs[i]
            lo, hi = r.lo, r.hi
            while spans[j][1] <= lo:
                j += 1
            a, b = spans[j]
            if a <= lo and b >= hi:  # the whole run goes (the usual case: a call's keys sent again)
                if lo == hi:
                    self._dead -= 1  # (an empty run among them: taken out with them)
                gone += hi - lo
                parts[r] = []
                continue
            left: list[tuple[int, int]] = []
            cur = lo
            k = j
            while k < ns and spans[k][0] < hi:
                a, b = spans[k]
                if a > cur:
                    left.append((cur, a))
                    gone -= a - cur
                cur = max(cur, b)
                k += 1
            if cur < hi:
                left.append((cur, hi))
                gone -= hi - cur
            gone += hi - lo
            if left:
                r.lo, r.hi = left[0]
                parts[r] = [r, *(_Run(p, q, r.batch) for p, q in left[1:])]
            else:
                parts[r] = []
        first, end = hit[0], hit[-1] + 1
        mid: list[_Run] = []
        at = first
        for i in hit:
            if i > at:
                mid += runs[at:i]
            mid += parts[runs[i]]
            at = i + 1
        runs[first:end] = mid
        los[first:end] = map(_LO, mid)
        self._n -= gone
        # Each batch that lost or split a run, rebuilt once, its runs still in the order they were sent.
        for bt in {r.batch for r, rest in parts.items() if len(rest) != 1}:
            bt.runs = [x for r in bt.runs for x in parts.get(r, (r,))]
        for r in parts:  # (a run cut in place too: its batch no longer holds the keys it was added with)
            r.batch.whole = None

    def _take_front(self, b: _Batch, r: int, end: int, n: int) -> None:
        """Take out b's first n keys: its first r runs, the last of them up to `end` (see _Whole.front).
        One pass over the runs held (as _drop), not a cut per run."""
        mine = b.runs
        last = mine[r - 1]
        whole = r if end >= last.hi else r - 1  # the runs taken out whole
        gone = set(mine[:whole])
        runs = self._runs
        runs[:] = [x for x in runs if x not in gone and x.hi > x.lo]
        self._dead = 0
        if whole < r:
            last.lo = end  # (it keeps its place: no run held lies within its keys)
        self._los[:] = map(_LO, runs)
        self._n -= n
        b.runs = mine[whole:]
        b.whole = None

    def expire(self, now: float, ttl: float, ordered: bool) -> None:
        """Forget what was last sent more than `ttl` before `now`. In time order the batches' times
        ascend: only front batches can be past it (the dict's scan stopped at its first live entry)."""
        batches = self._batches
        if ordered:
            while batches and (not batches[0].runs or now - batches[0].t > ttl):
                self._drop(batches.popleft())
            return
        if any(now - b.t > ttl for b in batches):
            keep: deque[_Batch] = deque()
            for b in batches:
                if now - b.t > ttl:
                    self._drop(b)
                elif b.runs:
                    keep.append(b)
            self._batches = keep

    def _drop(self, b: _Batch) -> None:
        los, runs = self._los, self._runs
        if len(b.runs) > _FEW:
            # A batch of many runs (see add) leaves in one pass, not a delete per run.
            runs[:] = [r for r in runs if r.batch is not b and r.hi > r.lo]
            los[:] = map(_LO, runs)
            self._dead = 0
            self._n -= sum(r.hi - r.lo for r in b.runs)
            b.runs = []
            return
        # Its few runs emptied where they are, not deleted: an expired batch's runs lie mostly among
        # the oldest keys, near the front, and a delete there moved every run after it (~5,800 runs
        # held by a 6,000-turn what-if's clear_tool_uses column past 4 h: ~46 KB moved twice a call).
        # Taken out together once they are as many as the live ones (a pass over the runs held).
        for r in b.runs:
            self._n -= r.hi - r.lo
            r.hi = r.lo
        self._dead += len(b.runs)
        b.runs = []
        if self._dead > max(_DEAD_FEW, len(runs) - self._dead):
            self._bury()

    def _bury(self) -> None:
        """Take the empty runs out of the run lists (one pass)."""
        runs = self._runs
        runs[:] = [r for r in runs if r.hi > r.lo]
        self._los[:] = map(_LO, runs)
        self._dead = 0

    def longest(self, keys: Sequence[int], hi: int, shared: int) -> int:
        """The largest j with shared < j < hi and keys[j] held, else `shared`."""
        if not self._n:
            return shared
        los, runs = self._los, self._runs
        for j in range(hi - 1, shared, -1):
            k = keys[j]
            i = bisect_right(los, k) - 1
            if i >= 0 and k < runs[i].hi:
                return j
        return shared
