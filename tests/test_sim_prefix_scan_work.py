"""Where two requests part, and how far a key run agrees with a call, found with work that follows
the answer (engine/sim/shared_prefix.py: shared_prefix_len; engine/sim/key_walk.py: _agreeing).

A clear_tool_uses column past its trigger clears one more old result a turn: its request differs from
the last one a few blocks from its end. shared_prefix_len found that pair by scanning every pair from
the start through an iterator chain (~40 ns a pair, ~3,000 pairs a call); it now compares stretches
of pairs as slices (identity first, in C) and looks inside only the stretch that differs. Walking a
prefix an earlier call left as many short runs, _extend_keys copied and bisected each run's whole
shareable stretch; it now reads a run in growing stretches as far as it agrees. The answers are the
value-based ones (common_prefix_len) in both.
"""

from __future__ import annotations

from array import array
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.common_prefix import common_prefix_len
from engine.sim import shared_prefix
from engine.sim.cachesim import Block, KeyTable, _agreeing, _chain, _extend_keys, shared_prefix_len
from tests.support.counted_shas import walk_counted


def blk(name: str, tokens: int = 10) -> Block:
    return Block(name, tokens, segment="messages")


@settings(max_examples=300, deadline=None)
@given(
    a=st.lists(st.tuples(st.sampled_from("abc"), st.booleans()), max_size=40),
    b=st.lists(st.tuples(st.sampled_from("abc"), st.booleans()), max_size=40),
    scan=st.integers(1, 9),
    head=st.integers(0, 5),
)
def test_shared_prefix_len_by_stretches_is_common_prefix_len(
    a: list[tuple[str, bool]], b: list[tuple[str, bool]], scan: int, head: int
) -> None:
    """At any stretch length (the boundaries of the stretches fall everywhere), on sequences mixing the
    same Blocks, equal Blocks that are other objects (the flag) and different ones: the equal prefix."""
    pool = {n: blk(n) for n in "abc"}
    xs = [blk(n) if fresh else pool[n] for n, fresh in a]
    ys = [blk(n) if fresh else pool[n] for n, fresh in b]
    old = shared_prefix._SCAN, shared_prefix._HEAD
    shared_prefix._SCAN, shared_prefix._HEAD = scan, head
    try:
        assert shared_prefix_len(xs, ys) == common_prefix_len(xs, ys)
        assert shared_prefix_len(ys, xs) == common_prefix_len(xs, ys)
        assert shared_prefix_len(xs, list(xs)) == len(xs)
    finally:
        shared_prefix._SCAN, shared_prefix._HEAD = old


def test_a_late_difference_looks_inside_one_stretch() -> None:
    """A 3,000-block request that differs from the last one 8 blocks from its end: the pairs looked at
    one by one are the first few and those of one stretch, not all 3,000 (the old scan: 2,993)."""
    prev = [blk(f"m{i}") for i in range(3000)]
    cur = list(prev)
    cur[2992] = blk("cleared")
    looked = 0
    real = shared_prefix.is_not

    def counted(x: Any, y: Any) -> bool:
        nonlocal looked
        looked += 1
        return real(x, y)

    shared_prefix.is_not = counted  # type: ignore[attr-defined]
    try:
        assert shared_prefix_len(prev, cur) == 2992
    finally:
        shared_prefix.is_not = real  # type: ignore[attr-defined]
    assert looked <= shared_prefix._HEAD + shared_prefix._SCAN, looked


@settings(max_examples=300, deadline=None)
@given(
    run=st.lists(st.sampled_from("ab"), max_size=300),
    shas=st.lists(st.sampled_from("ab"), max_size=300),
    j=st.integers(0, 20),
    i=st.integers(0, 20),
)
def test_agreeing_is_common_prefix_len(run: list[str], shas: list[str], j: int, i: int) -> None:
    k = max(0, min(len(run) - j, len(shas) - i))
    assert _agreeing(run, j, shas, i, k) == common_prefix_len(run[j : j + k], shas[i : i + k])


@settings(max_examples=300, deadline=None)
@given(
    same=st.integers(0, 5_000),
    run_tail=st.lists(st.integers(0, 3), max_size=40),
    shas_tail=st.lists(st.integers(0, 3), max_size=40),
    j=st.integers(0, 20),
    i=st.integers(0, 20),
)
def test_agreeing_on_long_arrays_is_common_prefix_len(
    same: int, run_tail: list[int], shas_tail: list[int], j: int, i: int
) -> None:
    """As the key walk calls it (hash ids in arrays): a long agreeing stretch, then anything; the
    first difference found by halving a stretch that differs is where common_prefix_len finds it."""
    common = list(range(10, 10 + same))
    run = array("i", [*range(100, 100 + j), *common, *run_tail])
    shas = array("i", [*range(200, 200 + i), *common, *shas_tail])
    k = max(0, min(len(run) - j, len(shas) - i))
    assert _agreeing(run, j, shas, i, k) == common_prefix_len(run[j : j + k], shas[i : i + k])


def test_walking_runs_that_go_on_elsewhere_reads_what_agrees() -> None:
    """Each call sends the conversation and a tail of its own (200 blocks no other call sends): its new
    keys are one run, its round then its tail. Walking the conversation alone again meets every call's
    run, which agrees for two blocks and goes on with the tail: the old walk copied each run's whole
    shareable stretch (~200 hashes a run: 50,204 here); now about what agrees, in growing stretches
    (9,344)."""
    table = KeyTable()
    conv = [f"system {i}" for i in range(4)]
    calls = 300
    for c in range(calls):
        conv += [f"assistant {c}", f"tool {c}"]
        keys = _extend_keys([0], conv + [f"tail {c} {t}" for t in range(200)], table)
        _chain(keys[-1], f"reply {c}", table)
    fresh = KeyTable()
    want = _extend_keys([0], list(conv), fresh)  # for the count of prefixes
    known = table.next
    got, copied = walk_counted(conv, table)
    assert len(got) == len(want)
    assert table.next == known  # every prefix was met before: found, none handed out
    assert copied <= 40 * calls, copied  # old: 50,204
