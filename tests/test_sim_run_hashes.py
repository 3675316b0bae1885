"""A Window's prefix keys and sums from its Block run's hash ids and sums (engine/sim/run_hashes.py).

clear_tool_uses past its window sends each call as a Window on one run of Blocks (engine/sim/grown.py). The
key chain read each such call's hash ids and sums from the last call's: the stretch the two share copied,
the Blocks before it looked up one by one, and every call that moved to a new start handed the intern
table a copy of its ~4,800 hash ids (~19 KB a call, kept for the session). The run's ids and sums are now
kept parallel to it, and the table keeps a new run of them as a place in that array.

Differential (the O(new) path against the full pass): on random windows that move on and back over a
conversation that grows and has items edited near its end, with a negative count now and then, every
call's keys, sums and errors are those of a separate table fed the same calls as lists, afresh, and of a
chain that takes the Windows the stretch's way; the two tables hold the same hash ids in key order. And
what it saves: a window that moves to a new start each call adds no copy of its ids to the table, and
reads each Block of the run once.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import Block, CacheSimError, KeyTable, _cumulative, _KeyChain, _prefix_keys
from engine.sim.grown import TAIL, Grown, Window
from engine.sim.run_hashes import RUNS_KEPT, RunHashes, run_hashes
from tests.test_sim_window import made_shifted

SYSTEM = [Block("sys0", 300, segment="system"), Block("sys1", 40, segment="system")]


def _fresh(blocks: list[Block], table: KeyTable) -> tuple[list[int], list[int]] | str:
    try:
        cum = _cumulative(blocks)  # (first: a call that raises keys nothing, as the chain's)
    except CacheSimError as exc:
        return str(exc)
    return _prefix_keys(blocks, table), cum


def _taken(chain: _KeyChain, blocks: Any, shared: int, stretch: Any, lazy: bool) -> Any:
    try:
        keys, tail, raw, base = chain.take_lazy(blocks, False, shared, stretch, lazy)
    except CacheSimError as exc:
        return str(exc)
    return list(keys) + list(tail), [x + base for x in raw]


def _ids_in_key_order(t: KeyTable) -> list[int]:
    """Every run's hash ids, in key order (one per key handed out): however the runs are held."""
    return [x for r in range(len(t.starts)) for x in t.run(r)]


_moves = st.lists(
    st.tuples(
        st.sampled_from(["on", "on", "back", "append", "edit", "same"]),
        st.integers(1, 2 * TAIL),
        st.sampled_from([None] * 12 + ["negative"]),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(first=st.integers(TAIL, 6 * TAIL), moves=_moves, lazy=st.booleans())
# A call that raises on its tail after its Blocks were appended to the run: no hash read (numbered) for it.
@example(first=34, moves=[("append", 32, "negative"), ("on", 1, "negative"), ("on", 34, None)], lazy=False)
def test_windows_get_a_fresh_computations_keys_sums_and_errors(
    first: int, moves: list[tuple[str, int, str | None]], lazy: bool
) -> None:
    conv = [Block(f"c{i}", 1 + i % 23) for i in range(first)]
    n = first
    start = 0
    chain, ref = _KeyChain(), _KeyChain()  # from the run's ids and sums; the stretch's way
    ref.windows = False
    other = KeyTable()
    prev: Any = Grown.of([*SYSTEM, *conv])
    got = _taken(chain, prev, 0, None, lazy)
    assert got == _taken(ref, prev, 0, None, lazy) == _fresh(list(prev), other)
    for op, x, bad in moves:
        if op == "on":
            start = min(len(conv) - 1, start + x)
        elif op == "back":
            start = max(0, start - x)
        elif op == "append":
            conv += [Block(f"c{n + i}", 2 + i % 5) for i in range(x)]
            n += x
        elif op == "edit":  # an item near the end made again (a result cleared)
            conv[max(0, len(conv) - 1 - x % 9)] = Block(f"e{n}", 3)
            n += 1
        if bad:  # a Block with a negative count among the newest: the call raises, the chain as it was
            conv.append(Block(f"bad{n}", -1))
            n += 1
        want = [*SYSTEM, *conv[start:]]
        view, common, stretch = made_shifted(prev, want)
        got = _taken(chain, view, common, stretch, lazy)
        assert got == _taken(ref, view, common, stretch, lazy) == _fresh(want, other)
        if bad:
            conv.pop()  # (the next call sends it no more; the run keeps it, as simulate's would)
        if not isinstance(got, str):
            prev = view
    assert _ids_in_key_order(chain.ids) == _ids_in_key_order(ref.ids) == _ids_in_key_order(other)


def test_a_window_moving_to_new_starts_adds_no_copy_of_its_ids_to_the_table() -> None:
    """Each call's window starts one round later (every prefix new: the table hands out ~1,000 keys a
    call): the table's runs are places in the Block run's ids, not a copy a call (old code: 1,000 ids
    copied into the table a call)."""
    conv = [Block(f"c{i}", 5 + i % 11) for i in range(1_200)]
    chain = _KeyChain()
    prev: Any = Grown.of([*SYSTEM, *conv])
    chain.take_lazy(prev)
    start = 0
    for t in range(60):
        start += 2
        conv += [Block(f"n{t}a", 30), Block(f"n{t}b", 200)]
        view, common, stretch = made_shifted(prev, [*SYSTEM, *conv[start:]])
        assert type(view) is Window
        keys, tail, raw, base = chain.take_lazy(view, False, common, stretch)
        assert len(tail) > 1_000  # every prefix new
        prev = view
    t = chain.ids
    copied = sum(t.lens[r] for r in range(len(t.starts)) if t.offs[r] == 0 and type(t.runs[r]) is not list)
    par = run_hashes(chain._runs, prev.parts()[1])
    backed = [r for r in range(len(t.starts)) if t.runs[r] is par.ids]
    assert len(backed) == 60
    # What is copied: the first call's ids (its own run) and each call's few newest, past the run's part.
    assert copied <= len(SYSTEM) + 1_200 + 60 * (TAIL + 1)


class _Counting(Block):
    reads = 0

    def __getattribute__(self, name: str) -> Any:
        if name == "sha":
            _Counting.reads += 1
        return super().__getattribute__(name)


def test_a_window_moving_back_and_on_reads_each_block_of_its_run_once() -> None:
    """A window that moves back by 40 Blocks (older rounds taken in again) and on by 30, to a start no
    call had: the Blocks it takes in again are read from the run's ids, not looked up again (old code:
    the 40 Blocks a call)."""
    conv = [_Counting(f"c{i}", 5 + i % 11) for i in range(2_000)]
    chain = _KeyChain()
    prev: Any = Grown.of([*SYSTEM, *conv])
    chain.take_lazy(prev)
    start = 0
    reads = []
    for t in range(42):
        start += 200 if t < 2 else 30 if t % 2 else -40  # (to 400 first: a stretch is searched that far)
        view, common, stretch = made_shifted(prev, [*SYSTEM, *conv[start:]])
        assert type(view) is Window
        _Counting.reads = 0  # (the maker's search for the stretch is not the chain's)
        keys, tail, raw, base = chain.take_lazy(view, False, common, stretch)
        reads.append(_Counting.reads)
        assert list(keys) + list(tail) == _prefix_keys(list(view), chain.ids)
        assert [x + base for x in raw] == _cumulative(list(view))
        prev = view
    assert max(reads[2:]) <= 4, reads


def test_run_hashes_keeps_the_newest_used_runs() -> None:
    kept: dict[int, RunHashes] = {}
    runs = [[Block(f"r{i}", 1)] for i in range(RUNS_KEPT + 2)]
    first = run_hashes(kept, runs[0])
    for r in runs[1:RUNS_KEPT]:
        run_hashes(kept, r)
    assert run_hashes(kept, runs[0]) is first  # used again: the newest
    run_hashes(kept, runs[RUNS_KEPT])
    assert run_hashes(kept, runs[0]) is first and len(kept) == RUNS_KEPT
    assert id(runs[1]) not in kept  # the oldest used let go
    table = KeyTable()
    h = run_hashes(kept, [Block("a", 2), Block("b", -1)])
    assert h.upto(1, table) and list(h.ids) == [table.hashes["a"]] and list(h.sums) == [0, 2]
    assert not h.upto(2, table) and not h.upto(2, table)  # a negative count: not held
