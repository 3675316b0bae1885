"""The simulator's prefix keys and running sums of a shifted request (key_chain._KeyChain.take): a window
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


def test_a_window_that_moves_back_reads_the_blocks_around_the_stretch() -> None:
    """clear_tool_uses past its window: a cleared result frees room and the window takes in older rounds
    again, then moves on. A call whose window starts earlier than the last one (older blocks, then the
    last call's from its first message on) reads the older blocks only, not the ~thousands after them
    (old code: the stretch was looked for among the first 4 new blocks only: every block read)."""
    system = [_Read("sys", 500, segment="system")]
    msgs = [_Read(f"m{i}", 10 + i % 17) for i in range(3_000)]
    chain = _KeyChain()
    start = 1_000
    chain.take(system + msgs[start:], check_order=True)
    per_call = []
    for t in range(40):
        start += 6 if t % 2 else -30  # back by 30 blocks, on by 6 (already sent prefixes come back)
        blocks = system + msgs[start:]
        _Read.reads = 0
        keys, cum = chain.take(blocks, check_order=True)
        per_call.append(_Read.reads)
        assert cum == _cumulative(blocks) and keys == _prefix_keys(blocks, chain.ids)
    assert max(per_call) <= 80, per_call


@settings(max_examples=150, deadline=None)
@given(
    st.integers(16, 60),
    st.lists(
        st.tuples(
            st.integers(-8, 6),
            st.integers(0, 3),
            st.booleans(),
            st.one_of(st.none(), st.integers(1, 12)),
            st.sampled_from([None, None, None, "negative", "tools"]),
        ),
        min_size=1,
        max_size=14,
    ),
)
def test_a_window_moving_both_ways_gets_a_fresh_computations_keys_sums_and_errors(
    start: int, steps: list[tuple[int, int, bool, int | None, str | None]]
) -> None:
    """A window over a conversation that moves on or back by a drawn amount (coming back to where
    earlier calls started), new blocks appended, a block edited some way from the end (a cleared result),
    some calls with a new block before the window or a bad block at the end: every call's keys, sums
    and errors are a fresh computation's."""
    chain = _KeyChain()
    system = [Block("sys", 100, segment="system")]
    conv = [Block(f"m{i}", i % 9) for i in range(start + 40)]
    lo = 30
    for t, (move, after, lead, edit, bad) in enumerate(steps):
        lo = min(max(lo + move, 0), len(conv) - 1)
        conv += [Block(f"n{len(conv) + i}", 2 + i) for i in range(after)]
        if edit is not None and edit <= len(conv) - lo:
            conv[-edit] = Block(f"e{t}", 1)
        head = [Block(f"lead{len(conv)}.{lo}", 7)] if lead else []
        tail = []
        if bad is not None:
            tail = [Block(f"bad{t}", -1) if bad == "negative" else Block(f"bad{t}", 4, segment="tools")]
        blocks = system + head + conv[lo:] + tail
        try:
            got: tuple[list[int], list[int]] | str = chain.take(blocks, check_order=True)
        except CacheSimError as exc:
            got = str(exc)
        assert got == _fresh(blocks, True, chain.ids)


class _Walks(KeyTable):
    """An intern table counting the lookups `_extend_keys` makes in it (its walk of a prefix's runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0
        real = self.ids

        class _Counted(dict):  # type: ignore[type-arg]
            def get(inner, key: Any, default: Any = None) -> Any:  # noqa: N805
                self.lookups += 1
                return dict.get(inner, key, default)

        self.ids = _Counted(real)


def test_a_window_that_comes_back_to_an_earlier_start_copies_that_calls_keys() -> None:
    """clear_tool_uses past its window: the start oscillates between a few rounds, and each call clears
    one more result near its end, so a call whose window starts where an earlier one's did sends again
    most of that call's prefix, which the intern table holds as one run per call that went that way.
    Its keys are that earlier call's, copied: a handful of table lookups a call (old code: one walk step
    per run of the prefix, growing with the calls that took that start)."""
    system = [Block("sys", 500, segment="system")]
    conv = [Block(f"m{i}", 10 + i % 17) for i in range(1_500)]
    table = _Walks()
    chain = _KeyChain(table)
    per_call = []
    for t in range(120):
        conv[1_000 + t] = Block(f"cleared{t}", 3)  # one more result cleared, near the end
        conv.append(Block(f"new{t}", 40))
        start = (0, 2, 4)[t % 3]  # the window's start moves on and back
        blocks = system + conv[start:]
        table.lookups = 0
        keys, cum = chain.take(blocks)
        per_call.append(table.lookups)
        assert cum == _cumulative(blocks)
        assert keys == _prefix_keys(blocks, chain.ids)
    assert max(per_call[10:]) <= 8, per_call


def test_a_window_that_comes_back_to_an_earlier_start_reads_only_the_blocks_past_that_calls() -> None:
    """The same oscillating window: a call that starts where an earlier one did takes that call's
    hashes as far as the two agree, and reads only the blocks past there (old code: every block's
    hash, ~4,700 a clear_tool_uses call past its window on a 3,000-turn what-if, ~1.5 ms each)."""
    system = [_Read("sys", 500, segment="system")]
    conv = [_Read(f"m{i}", 10 + i % 17) for i in range(1_500)]
    chain = _KeyChain()
    per_call = []
    for t in range(120):
        conv[len(conv) - 20] = _Read(f"cleared{t}", 3)  # one more result cleared, near the end
        conv.append(_Read(f"new{t}", 40))
        start = (0, 2, 4)[t % 3]  # the window's start moves on and back
        blocks = system + conv[start:]
        _Read.reads = 0
        keys, cum = chain.take(blocks)
        per_call.append(_Read.reads)
        assert cum == _cumulative(blocks)
        assert keys == _prefix_keys(blocks, chain.ids)
        # And a chain that takes the same calls afresh from here on agrees (what is carried is a cache).
        fresh = _KeyChain(chain.ids)
        assert fresh.take(blocks) == (keys, cum)
    assert max(per_call[10:]) <= 200, per_call


@settings(max_examples=150, deadline=None)
@given(
    st.integers(16, 60),
    st.lists(
        st.tuples(st.sampled_from(["on", "back", "append", "edit"]), st.integers(1, 6), st.integers(0, 3)),
        min_size=1,
        max_size=16,
    ),
    st.booleans(),
)
def test_a_window_moving_on_back_or_appending_gets_an_independent_tables_keys(
    start: int, steps: list[tuple[str, int, int]], lazy: bool
) -> None:
    """A window that moves on or back, appends on its line (the chain's hashes, keys and sums extended in
    place) or has a block edited near the end, lazily taken or not: every call's keys and sums are those
    of a separate table fed the same calls afresh (the numbers depend only on the order prefixes were
    first met), and the two tables end with the same runs (the differentials above read a fresh
    computation from the chain's own table, and take eagerly)."""
    chain = _KeyChain()
    other = KeyTable()
    system = [Block("sys", 100, segment="system")]
    conv = [Block(f"m{i}", i % 9) for i in range(start + 40)]
    lo = 20
    for t, (op, k, after) in enumerate(steps):
        if op == "on":
            lo = min(lo + k, len(conv) - 1)
        elif op == "back":
            lo = max(lo - k, 0)
        elif op == "edit" and k <= len(conv) - lo:
            conv[-k] = Block(f"e{t}", 1)
        conv += [Block(f"n{t}.{i}", 2 + i) for i in range(after + (op == "append"))]
        blocks = system + conv[lo:]
        keys, tail, raw, base = chain.take_lazy(blocks, lazy=lazy)
        assert list(keys) + list(tail) == _prefix_keys(blocks, other)
        assert [x + base for x in raw] == _cumulative(blocks)
    assert [list(r) for r in chain.ids.runs] == [list(r) for r in other.runs]
