"""The DeepSeek simulator's held prefixes as runs of keys (engine/sim/held_prefixes.py): the same entries,
times and order as the one-entry-per-prefix dict they replace, and a size that follows the calls, not
the prefixes they send."""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import Block, CacheSimulator, Call
from engine.sim.held_prefixes import HeldPrefixes, runs_of


class _DictHeld:
    """The reference: the dict the simulator kept until whatif32 (prefix -> time, in order of last use)."""

    def __init__(self) -> None:
        self.d: dict[int, float] = {}

    def add(self, keys: list[int], t: float) -> None:
        self.d.update(dict.fromkeys(keys, t))

    def discard(self, keys: list[int]) -> None:
        for k in keys:
            self.d.pop(k, None)

    def expire(self, now: float, ttl: float, ordered: bool) -> None:
        for k, t in list(self.d.items()):
            if now - t > ttl:
                del self.d[k]
            elif ordered:
                break

    def longest(self, keys: list[int], hi: int, shared: int) -> int:
        return next((j for j in range(hi - 1, shared, -1) if keys[j] in self.d), shared)


@settings(max_examples=400, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["add", "discard", "expire", "longest"]),
            st.lists(st.integers(0, 40), max_size=12, unique=True),
            st.sampled_from([0.0, 10.0, 100.0]),
        ),
        max_size=30,
    ),
    ordered=st.booleans(),
)
def test_held_prefixes_equal_the_dict(ops: list[tuple[str, list[int], float]], ordered: bool) -> None:
    """Random adds (keys not held, ascending, as a call's are; times ascending when `ordered`), discards,
    expiries and longest-prefix searches: entries, times, order, membership and answers equal the dict."""
    _same_as_the_dict(ops, ordered)


def _same_as_the_dict(ops: list[tuple[str, list[int], float]], ordered: bool) -> None:
    """`ops` run on a HeldPrefixes and on the dict it stands for, compared after each: entries, times,
    order, membership and the longest-prefix answers (times ascending when `ordered`, else each op's
    own)."""
    ref, got = _DictHeld(), HeldPrefixes()
    t = 0.0
    for op, keys, dt in ops:
        t = t + dt if ordered else dt * (len(keys) % 3)
        ks = sorted(keys)
        if op == "add":
            ks = [k for k in ks if k not in ref.d]
            ref.add(ks, t)
            got.add(ks, t)
        elif op == "discard":
            ref.discard(ks)
            got.discard(ks)
        elif op == "expire":
            ref.expire(t, 50.0, ordered)
            got.expire(t, 50.0, ordered)
        else:
            for hi in range(len(ks) + 1):
                for shared in range(hi):
                    assert got.longest(ks, hi, shared) == ref.longest(ks, hi, shared)
        assert list(got.items()) == list(ref.d.items())
        assert len(got) == len(ref.d)
        assert all((k in got) == (k in ref.d) for k in range(-1, 45))


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(st.integers(0, 60), max_size=20, unique=True),
    spans=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 90)), max_size=12),
)
def test_runs_of_ascending_keys(keys: list[int], spans: list[tuple[int, int]]) -> None:
    """Short lists of any ascending keys, and long ones made of a few runs (a call's keys: halved)."""
    long: list[int] = []
    for gap, length in spans:
        start = (long[-1] + gap) if long else gap
        long += range(start, start + length)
    for ks in (sorted(keys), long):
        _check_runs(ks)


def _check_runs(ks: list[int]) -> None:
    spans = runs_of(ks)
    assert [k for lo, hi in spans for k in range(lo, hi)] == ks
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))  # maximal runs


def _sliding_session(calls: int) -> list[Call]:
    """A conversation that grows by one round a call and changes early every call (a sliding window
    or a clearing of old results): every request is a new run of prefixes, one block longer than the
    last. DeepSeek keeps them all for 4 h; the calls are 1 s apart."""
    out = []
    for k in range(calls):
        blocks = [Block(f"task{k}", 200), *(Block(f"m{i}", 50) for i in range(k + 1))]
        out.append(Call(tuple(blocks), 1_000.0 + k, output_tokens=20, output_sha=None))
    return out


def _held_bytes(calls: list[Call]) -> int:
    """Bytes the simulator's `seen` prefixes other than the last call's hold after `calls`."""
    sim = CacheSimulator("deepseek", "deepseek-chat")
    for c in calls:
        sim.step(c)
    pol: Any = sim._policy
    return _deep_size(pol._held)


def _deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of `obj` and everything it refers to (ints, floats, containers, slotted objects)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, list | tuple | set | frozenset) or type(obj).__name__ == "deque":
        size += sum(_deep_size(x, seen) for x in obj)
    elif hasattr(obj, "__slots__"):
        size += sum(_deep_size(getattr(obj, s), seen) for s in obj.__slots__ if hasattr(obj, s))
    elif hasattr(obj, "__dict__"):
        size += _deep_size(vars(obj), seen)
    return size


def test_held_prefixes_follow_the_calls_not_the_prefixes() -> None:
    """400 calls of a conversation that changes early every call hold every earlier call's prefixes
    (~80,000 at 400 calls, n^2/2): one dict entry each was ~4x the bytes for twice the calls; as runs
    of keys, one batch a call, twice the calls hold at most ~2.2x (here 2.0x)."""
    n = _held_bytes(_sliding_session(200))
    n2 = _held_bytes(_sliding_session(400))
    assert n2 <= 2.2 * n, (n, n2)
    assert n2 / 400 < 1_000  # a few hundred bytes a call, not ~70 bytes a prefix


class _MovesCounted(list):  # type: ignore[type-arg]
    """A run list that counts the entries its edits move (what a delete or insert in the middle costs)."""

    moved = 0

    def __delitem__(self, i: Any) -> None:
        if isinstance(i, int):
            _MovesCounted.moved += len(self) - i - 1
        else:
            _MovesCounted.moved += len(self)
        super().__delitem__(i)

    def insert(self, i: Any, x: Any) -> None:
        _MovesCounted.moved += len(self) - i
        super().insert(i, x)

    def __setitem__(self, i: Any, x: Any) -> None:
        if isinstance(i, slice):
            x = list(x)
            _MovesCounted.moved += len(self) - (i.stop if i.stop is not None else len(self)) + len(x)
        super().__setitem__(i, x)


def _counted(h: HeldPrefixes) -> HeldPrefixes:
    h._los, h._runs = _MovesCounted(h._los), _MovesCounted(h._runs)  # type: ignore[assignment]
    return h


def test_many_runs_let_go_or_sent_again_cost_what_they_are_not_the_runs_held_times_them() -> None:
    """Right after clear_tool_uses' window fills, a call lets go of the prefixes of the ~2,300 appending
    calls before it (one run each: other columns' keys lie between) and later ones send runs of them
    again. Putting those runs among the held ones, or taking them out, moves each run held about once,
    not once per run added or taken (a delete or an insert per run: ~n^2/2 moves)."""
    n = 3_000
    h = _counted(HeldPrefixes())
    ref = _DictHeld()
    for k in range(0, 4 * n, 4):  # held: one-key runs with gaps
        h.add([k], float(k))
        ref.add([k], float(k))
    _MovesCounted.moved = 0
    many = [k for k in range(2, 4 * n, 4)]  # one batch of n one-key runs, each between two held ones
    h.add(many, 1e6)
    ref.add(many, 1e6)
    assert _MovesCounted.moved <= 8 * n, _MovesCounted.moved
    _MovesCounted.moved = 0
    again = [k for k in range(0, 4 * n, 2)][n // 2 :]  # sent again: the later runs of both batches
    h.discard(again)
    ref.discard(again)
    assert _MovesCounted.moved <= 8 * n, _MovesCounted.moved
    assert list(h.items()) == list(ref.d.items()) and len(h) == len(ref.d)
    _MovesCounted.moved = 0
    h.expire(2e6, 5e5, True)  # every batch but the last expires
    ref.expire(2e6, 5e5, True)
    assert list(h.items()) == list(ref.d.items()) and len(h) == len(ref.d)


@settings(max_examples=400, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=1, max_size=8),
        min_size=1,
        max_size=6,
    ),
    ops=st.lists(st.tuples(st.integers(0, 5), st.integers(-1, 30), st.integers(0, 2)), max_size=12),
    whole_min=st.sampled_from([0, 2]),
)
def test_a_batch_sent_again_from_its_front_is_cut_as_the_dict(
    batches: list[list[tuple[int, int]]], ops: list[tuple[int, int, int]], whole_min: int
) -> None:
    """A window that comes back to an earlier start sends again the first keys of a batch of many runs
    (the line it left, up to where it parts from it): cut as a front of that batch (held_prefixes'
    `_Whole`), the entries, times, order and membership equal the dict's; so after a front of another
    length, keys moved past it, a front but for a key after a run's last, a batch's keys but its first,
    a batch cut before, the same front again."""
    import engine.sim.held_prefixes as hp

    was = hp._WHOLE_MIN
    hp._WHOLE_MIN = whole_min
    try:
        ref, got = _DictHeld(), HeldPrefixes()
        added: list[list[int]] = []
        for t, spans in enumerate(batches):
            # Batches whose runs lie between each other's (each starts a little later, runs far apart).
            keys: list[int] = []
            at = 3 * t
            for gap, length in spans:
                keys += range(at, at + length)
                at += length + 12 * gap
            keys = [k for k in keys if k not in ref.d]
            added.append(keys)
            ref.add(keys, float(t))
            got.add(keys, float(t))
        top = max(max(k, default=0) for k in added) + 80
        for which, cut, how in ops:
            src = added[which % len(added)]
            ks = src[:cut] if cut >= 0 else src[1:]  # (-1: all but its first key: not a front)
            if how == 1:
                ks = [k + 1 for k in ks]
            elif how == 2:  # a run's last key for the one after it: its first keys and length kept
                ends = [i for i in range(len(ks) - 1) if ks[i] + 2 < ks[i + 1]]
                if ends:
                    ks = [k + (i == ends[-1]) for i, k in enumerate(ks)]
            ref.discard(ks)
            got.discard(ks)
            assert list(got.items()) == list(ref.d.items())
            assert len(got) == len(ref.d)
            assert all((k in got) == (k in ref.d) for k in range(-1, top))
            # Let go again (the line taken up and left): a batch of the same keys, later.
            back = [k for k in ks if k not in ref.d]
            ref.add(back, 100.0 + which)
            got.add(back, 100.0 + which)
            assert list(got.items()) == list(ref.d.items())
    finally:
        hp._WHOLE_MIN = was


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["add", "add", "discard", "expire", "longest"]),
            st.lists(st.integers(0, 40), max_size=12, unique=True),
            st.sampled_from([10.0, 30.0, 100.0]),
        ),
        max_size=40,
    ),
    dead_few=st.sampled_from([0, 1, 1_000]),
)
def test_expired_runs_left_empty_in_place_answer_as_the_dict(
    ops: list[tuple[str, list[int], float]], dead_few: int
) -> None:
    """An expired batch's runs are emptied where they are and taken out later, together (_DEAD_FEW: at
    once, soon, never in these sizes): with keys expired and sent again across the empty runs' old
    places, entries, times, order, membership and the longest-prefix answers equal the dict's."""
    import engine.sim.held_prefixes as hp

    was = hp._DEAD_FEW
    hp._DEAD_FEW = dead_few
    try:
        _same_as_the_dict(ops, True)
    finally:
        hp._DEAD_FEW = was


def test_batches_expiring_one_a_call_move_the_runs_held_about_once_not_once_each() -> None:
    """A long session past DeepSeek's 4 h: each call lets go of one batch of one run (its last call's
    prefixes) and the oldest batch expires, its run among the oldest keys, near the front of the runs
    held. Each expiry deleted its run there, moving every run after it (~n^2/2 moves over n calls); the
    expired runs are now emptied in place and taken out together, about one move per run."""
    n = 3_000
    h = _counted(HeldPrefixes())
    ref = _DictHeld()
    for c in range(n):  # one batch a call, its keys after every earlier call's
        h.add([2 * c, 2 * c + 1], float(c))
        ref.add([2 * c, 2 * c + 1], float(c))
    _MovesCounted.moved = 0
    for c in range(n, 2 * n):  # each call: one more batch, the oldest one expires
        h.add([2 * c, 2 * c + 1], float(c))
        ref.add([2 * c, 2 * c + 1], float(c))
        h.expire(float(c), n - 1.0, True)
        ref.expire(float(c), n - 1.0, True)
    assert _MovesCounted.moved <= 8 * n, _MovesCounted.moved
    assert list(h.items()) == list(ref.d.items()) and len(h) == len(ref.d)
    assert all((k in h) == (k in ref.d) for k in range(0, 4 * n, 7))
