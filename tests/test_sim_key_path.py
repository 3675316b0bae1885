"""A call's prefix keys held as runs (engine/sim/key_path.py): a KeyPath stands in for the key chain's list
of ints, so every operation the chain and the DeepSeek policy use must read as the list's.

Model: a KeyPath and a list given the same operations (appends of keys that follow the last one or jump,
ranges added, cuts at the end, slices, copies) hold the same keys, index, slice, bisect and iterate the
same, and runs() is runs_of of the list. Differential: with every lazy take's keys held as a KeyPath
(KEYPATH_FROM 0), the lazy chain's keys + tail and sums are an eager chain's, and a DeepSeek simulator's
figures, units and `seen` are those of one whose chain is eager and whose reading scans every prefix."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.sim.key_chain as key_chain
from engine.sim.cachesim import CacheSimulator, Call, _KeyChain
from engine.sim.held_prefixes import runs_of
from engine.sim.key_path import KeyPath, key_position
from engine.sim.unit_index import UnitIndex, _Unit
from tests.support.deepseek_twins import assert_twins
from tests.test_cachesim_deepseek_lines import SESSIONS, _session
from tests.test_sim_lazy_keys import _calls, assert_lazy_is_eager

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),  # the key after the last (1) or one past a gap
        st.tuples(st.just("range"), st.integers(0, 6), st.integers(0, 3)),  # a range: its length, its gap
        st.tuples(st.just("cut"), st.integers(0, 40)),  # del keys[i:]
        st.tuples(st.just("slice"), st.integers(0, 40), st.integers(0, 40)),  # keys[i:j] goes on
        st.tuples(st.just("copy"), st.just(0)),
    ),
    max_size=40,
)


def _check(path: KeyPath, want: list[int]) -> None:
    assert len(path) == len(want)
    assert list(path) == want and path == want
    assert [path[i] for i in range(len(want))] == want
    assert [path[-i] for i in range(1, len(want) + 1)] == [want[-i] for i in range(1, len(want) + 1)]
    assert path.runs() == runs_of(want)
    for i in range(len(want) + 1):
        for j in range(i, len(want) + 1, 3):
            assert list(path[i:j]) == want[i:j]
    for k in range(want[0] - 1 if want else 0, (want[-1] + 2) if want else 2):
        assert bisect_left(path, k) == bisect_left(want, k)
        assert bisect_right(path, k, 1) == bisect_right(want, k, 1) if want else True
    for i in range(0, len(want) + 1, 2):
        for j in range(i, len(want) + 1, 3):
            got = path.pieces(i, j)
            assert [k for _, lo, n in got for k in range(lo, lo + n)] == want[i:j]
            assert [p for p, _, n in got for p in range(p, p + n)] == list(range(i, j))
            for k in want[i:j:2]:
                assert path.position(k, i, j) == key_position(want, k, i, j) == want.index(k)
            assert path.position(-1, i, j) == key_position(want, -1, i, j) == -1
            if want and j < len(want):
                assert path.position(want[j], i, j) == key_position(want, want[j], i, j) == -1
    units = {k: _Unit(64, 1.0, 0, 0.0, 0.0) for k in want[::3]}
    index = UnitIndex()
    for k in units:
        index.add(k)
    for i, j in ((0, len(want)), (1, len(want) // 2), (len(want) // 3, len(want))):
        a: list[int] = []
        b: list[int] = []
        index.positions(path, i, j, units, a)
        index.positions(want, i, j, units, b)
        assert a == b == [p for p in range(i, j) if want[p] in units]
    with pytest.raises(IndexError):
        path[len(want)]


@settings(max_examples=300, deadline=None)
@given(first=st.lists(st.integers(1, 3), max_size=8), ops=_ops)
def test_a_key_path_reads_as_the_list_of_its_keys(first: list[int], ops: list[tuple[Any, ...]]) -> None:
    want: list[int] = []
    k = 0
    for step in first:  # ascending keys, as a path's are
        k += step
        want.append(k)
    path = KeyPath.of(want)
    _check(path, want)
    for op in ops:
        last = want[-1] if want else 0
        if op[0] == "append":
            path.append(last + op[1])
            want.append(last + op[1])
        elif op[0] == "range":
            r = range(last + 1 + op[2], last + 1 + op[2] + op[1])
            path += r
            want += r
        elif op[0] == "cut":
            del path[op[1] :]
            del want[op[1] :]
        elif op[0] == "slice":
            i, j = sorted(op[1:])
            path, want = path[i:j], want[i:j]
        else:
            path, want = path[:], want[:]
        _check(path, want)
        assert KeyPath.of(path) == want and KeyPath.of(want).runs() == path.runs()


@contextmanager
def _every_lazy_take_a_path() -> Iterator[None]:
    was = key_chain.KEYPATH_FROM
    key_chain.KEYPATH_FROM = 0
    try:
        yield
    finally:
        key_chain.KEYPATH_FROM = was


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60), hint=st.booleans())
def test_keys_held_as_runs_are_the_eager_keys(seed: int, n: int, hint: bool) -> None:
    """clear_tool_uses-like calls past the window (moved on, back, to an earlier start; a result cleared
    near the end; rounds appended): the lazy chain, its walks and carried keys held as KeyPaths, gives
    the eager chain's keys and sums call by call."""
    with _every_lazy_take_a_path():
        assert_lazy_is_eager(seed, n, hint)


def test_the_session_above_holds_its_keys_as_runs() -> None:
    """(The differential above reaches KeyPaths: a come-back and a long walk each make one.)"""
    with _every_lazy_take_a_path():
        chain = _KeyChain()
        kinds = [type(chain.take_lazy(b)[0]) for b in _calls(7, 60)]
    assert KeyPath in kinds


@settings(max_examples=100, deadline=None)
@given(**SESSIONS, interval=st.sampled_from([None, 500]))
def test_a_deepseek_simulator_with_keys_as_runs_is_the_eager_whole_scan_one(
    starts: list[int], gaps: list[float], appended: list[int], cleared: list[int], interval: int | None
) -> None:
    """A window whose start cycles and moves back over a growing conversation, results cleared near the
    end, units expiring between calls: every figure, unit and `seen` entry of the simulator whose lazy
    keys are KeyPaths is that of one with list keys made eagerly and no carried reading."""
    calls: list[Call] = _session(starts, gaps, appended, cleared, n=40)
    opts: dict[str, Any] = {"ttl_seconds": 300.0}
    if interval:
        opts["interval_tokens"] = interval
    with _every_lazy_take_a_path():
        fast = CacheSimulator("deepseek", "deepseek-chat", **opts)
        slow = CacheSimulator("deepseek", "deepseek-chat", **opts)
        ref: Any = slow._policy
        ref.lazy = False
        ref.carry = False
        assert_twins(fast, slow, calls)
