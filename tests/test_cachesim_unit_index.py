"""The DeepSeek simulator's units found among a call's prefixes through their index (engine/sim/cachesim.py,
UnitIndex): a stretch of a path's keys that run on by one is read from the index's buckets, not key by key.

clear_tool_uses past its window, back at a start an earlier call had, read its ~4,700 known prefixes one
by one for the two or three units among them. Held here: whatever the path (runs of consecutive keys,
jumps, short and long) and whatever units were added and taken out, the positions found are the ones a
lookup of every key finds, in order; and the simulator's figures are its reference's (every call scanned
whole) on sessions whose window comes back to earlier starts.
"""

from __future__ import annotations

from itertools import compress
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import Block, CacheSimulator, Call, UnitIndex


@st.composite
def _paths(draw: Any) -> list[int]:
    """Ascending keys: runs that go on by one, and jumps between them (a path through the intern table)."""
    keys = [0]
    for _ in range(draw(st.integers(1, 12))):
        keys.append(keys[-1] + draw(st.integers(1, 300)))
        keys += range(keys[-1] + 1, keys[-1] + 1 + draw(st.integers(0, 400)))
    return keys


@settings(max_examples=300, deadline=None)
@given(keys=_paths(), data=st.data())
def test_the_positions_are_a_lookup_of_every_key(keys: list[int], data: Any) -> None:
    top = keys[-1] + 200
    index, units = UnitIndex(), {}
    for _ in range(data.draw(st.integers(0, 3))):  # added, some taken out again (expiry)
        added = data.draw(st.lists(st.integers(0, top), max_size=80))
        for k in added:
            if k not in units:
                units[k] = object()
                index.add(k)
        gone = data.draw(st.lists(st.sampled_from(sorted(units)), max_size=20)) if units else []
        for k in gone:
            units.pop(k, None)
        index.discard(gone)
    i = data.draw(st.integers(0, len(keys)))
    j = data.draw(st.integers(i, len(keys)))
    got: list[int] = []
    index.positions(keys, i, j, units, got)  # type: ignore[arg-type]
    assert got == list(compress(range(i, j), map(units.__contains__, keys[i:j])))


def _blk(name: str, tokens: int) -> Block:
    return Block(name, tokens)


@settings(max_examples=40, deadline=None)
@given(moves=st.lists(st.integers(-3, 3), min_size=5, max_size=60), ttl=st.sampled_from([200.0, 10_000.0]))
def test_a_window_that_comes_back_reads_as_every_call_scanned(moves: list[int], ttl: float) -> None:
    """A long conversation's window (clear_tool_uses past its budget): its start moves on and back by a
    few messages a call; units are found through the index, and the figures are those of a simulator
    that scans every call's prefixes from scratch."""
    conv = [_blk(f"m{i}", 40 + i % 9) for i in range(400)]
    calls, start, end = [], 0, 200
    for t, d in enumerate(moves):
        start = max(0, min(end - 100, start + d))
        end += 2
        calls.append(
            Call((_blk("sys", 500), *conv[start:end]), 10.0 * t, output_tokens=30, output_sha=f"o{t}")
        )
    fast = CacheSimulator("deepseek", "deepseek-chat", ttl_seconds=ttl)
    ref = CacheSimulator("deepseek", "deepseek-chat", ttl_seconds=ttl)
    ref_policy: Any = ref._policy
    ref_policy.carry = False
    ref_policy.lazy = False
    assert fast.simulate(calls) == ref.simulate(calls)
