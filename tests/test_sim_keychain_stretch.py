"""The simulator's prefix keys and running sums of a shifted request (cachesim._KeyChain.take): a window
that moved on sends a few new blocks, then a stretch of the previous request from a later point on,
then the new ones. The stretch's hashes and sums are carried from the previous call (its blocks passed
the checks there), so a shifted call reads the blocks around the stretch, not every block it sends (a
3,000-turn what-if's clear_tool_uses column: half its calls past its window shift, ~4,800 blocks each).

Differential: every call's keys, sums and errors are a fresh computation's, whatever shifts, edits and
bad blocks (negative counts, segments out of order) a session holds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import (
    SEGMENT_ORDER,
    Block,
    CacheSimError,
    KeyTable,
    _check_order,
    _cumulative,
    _KeyChain,
    _prefix_keys,
)


class _Read(Block):
    """A Block counting the reads of its hash and token count (a call's per-block work)."""

    reads = 0

    def __getattribute__(self, name: str) -> Any:
        if name in ("sha", "tokens"):
            _Read.reads += 1
        return super().__getattribute__(name)


def test_a_shifted_call_reads_the_blocks_around_the_stretch_not_the_stretch() -> None:
    """A 2,000-message window moving on by one round (two messages) a call, a round appended: each call
    reads a handful of blocks' hashes and counts (old code: every block after the system prompt)."""
    system = [_Read("sys", 500, segment="system"), _Read("tools", 300, segment="system")]
    msgs = [_Read(f"m{i}", 10 + i % 17) for i in range(2_000)]
    chain = _KeyChain()
    chain.take(system + msgs, check_order=True)
    per_call = []
    for t in range(50):
        msgs = msgs[2:] + [_Read(f"n{t}a", 40), _Read(f"n{t}b", 900)]
        blocks = system + msgs
        _Read.reads = 0
        keys, cum = chain.take(blocks, check_order=True)
        per_call.append(_Read.reads)
        assert cum == _cumulative(blocks) and keys == _prefix_keys(blocks, chain.ids)
    assert max(per_call) <= 40, per_call


def _fresh(blocks: list[Block], order: bool, ids: KeyTable) -> tuple[list[int], list[int]] | str:
    try:
        if order:
            _check_order(blocks)
        return _prefix_keys(blocks, ids), _cumulative(blocks)
    except CacheSimError as exc:
        return str(exc)


_SEGMENTS = list(SEGMENT_ORDER)

# A call after the first: (blocks dropped from the front of the previous call's messages, new blocks before
# the stretch, new blocks after it, whether it is checked for order, a bad block to put in: (where, what)).
_steps = st.lists(
    st.tuples(
        st.integers(0, 6),
        st.integers(0, 5),
        st.integers(0, 4),
        st.booleans(),
        st.one_of(
            st.none(),
            st.tuples(st.sampled_from(["head", "tail"]), st.sampled_from(["negative", "tools", "system"])),
        ),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(st.integers(16, 60), _steps)
def test_a_shifting_session_gets_a_fresh_computations_keys_sums_and_errors(
    start: int, steps: list[tuple[int, int, int, bool, tuple[str, str] | None]]
) -> None:
    chain = _KeyChain()
    system = [Block("sys", 100, segment="system")]
    msgs = [Block(f"m{i}", i % 9) for i in range(start)]
    made = 0
    for drop, before, after, order, bad in steps:
        head = [Block(f"h{made + i}", 5 + i) for i in range(before)]
        tail = [Block(f"t{made + i}", 3 * i) for i in range(after)]
        made += before + after
        if bad is not None:
            where, what = bad
            block = Block(f"bad{made}", -1) if what == "negative" else Block(f"bad{made}", 4, segment=what)
            (head if where == "head" else tail).append(block)
        blocks = system + head + msgs[drop:] + tail
        try:
            got: tuple[list[int], list[int]] | str = chain.take(blocks, check_order=order)
        except CacheSimError as exc:
            got = str(exc)
        assert got == _fresh(blocks, order, chain.ids)
        if not isinstance(got, str):
            msgs = head + msgs[drop:] + tail  # the window as sent: the next call shifts from it
