"""A Window's carried hash ids and sums as a place in its run's arrays (engine/sim/spliced.py).

clear_tool_uses past its window sends ~4,700 Blocks a call as a Window on the conversation's run; the key
chain carried each such call's hash ids and running sums to the next as arrays of its own, the run's part
copied in (~96 KB made and freed a call, replayed from a 6,000-turn what-if) though the next call reads
only the few around where it parts. They are now a `Spliced`: head + base[lo:hi] + tail, the middle read
in place from the run's ids and sums (only ever appended to).

Differential: a Spliced indexes, slices and iterates as the array it stands for, also after its base grew;
and a window that moves on to new starts carries a Spliced holding only its head and tail, whose values are
a fresh computation's (tests/test_sim_run_hashes.py holds every call's keys and sums, and the appending
calls after a window, to the full pass).
"""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import Block, _cumulative, _KeyChain
from engine.sim.grown import Grown, Window
from engine.sim.spliced import Spliced, array_of
from tests.test_sim_window import made_shifted

_ints = st.lists(st.integers(-(2**40), 2**40), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    head=_ints,
    base=st.lists(st.integers(-(2**40), 2**40), min_size=0, max_size=40),
    cut=st.tuples(st.integers(0, 40), st.integers(0, 40)),
    tail=_ints,
    more=_ints,
    probes=st.lists(st.integers(-60, 60), max_size=8),
    slices=st.lists(
        st.tuples(
            st.none() | st.integers(-60, 60),
            st.none() | st.integers(-60, 60),
            st.sampled_from([None, 1, 2, -1]),
        ),
        max_size=8,
    ),
)
def test_a_spliced_reads_as_the_array_it_stands_for(
    head: list[int],
    base: list[int],
    cut: tuple[int, int],
    tail: list[int],
    more: list[int],
    probes: list[int],
    slices: list[tuple[int | None, int | None, int | None]],
) -> None:
    lo, hi = sorted(min(x, len(base)) for x in cut)
    b = array("q", base)
    sp = Spliced(array("q", head), b, lo, hi, array("q", tail))
    want = array("q", head + base[lo:hi] + tail)
    b.extend(more)  # the base only grows: what it stood for stays
    assert len(sp) == len(want) and list(sp) == list(want) and sp.own() == len(head) + len(tail)
    for i in probes:
        if -len(want) <= i < len(want):
            assert sp[i] == want[i]
        else:
            with pytest.raises(IndexError):
                sp[i]
    for start, stop, step in slices:
        got = sp[start:stop:step]
        assert type(got) is array and got.typecode == "q" and got == want[start:stop:step]
    made = array_of(sp)
    assert type(made) is array and made == want
    assert array_of(want) is want  # an array is itself


SYSTEM = [Block("sys0", 300, segment="system"), Block("sys1", 40, segment="system")]


def test_a_window_moving_to_new_starts_carries_its_ids_and_sums_without_a_copy_of_its_run_part() -> None:
    """Each call's window starts a round later and appends a round: the chain's carried hash ids and sums
    are Spliced that hold only the head and tail of their own (old code: arrays of every one of the
    call's ~1,000 positions, copied a call), with the values of the call's own computation."""
    conv = [Block(f"c{i}", 5 + i % 11) for i in range(1_200)]
    chain = _KeyChain()
    prev: Any = Grown.of([*SYSTEM, *conv])
    chain.take_lazy(prev)
    start = 0
    for t in range(40):
        start += 2
        conv += [Block(f"n{t}a", 30), Block(f"n{t}b", 200)]
        want = [*SYSTEM, *conv[start:]]
        view, common, stretch = made_shifted(prev, want)
        assert type(view) is Window
        _, _, raw, base = chain.take_lazy(view, False, common, stretch)
        assert type(raw) is Spliced and type(chain.shas) is Spliced
        assert raw.own() <= len(SYSTEM) + 1 + 64 and chain.shas.own() <= len(SYSTEM) + 64
        assert [x + base for x in raw] == _cumulative(want)
        assert list(chain.shas) == [chain.ids.hashes[b.sha] for b in want]
        prev = view
    # An appending call after them extends the carried sums as an array of its own (not the Spliced).
    nxt = [*prev, Block("last", 7)]
    _, raw, base = chain.take_raw(nxt)
    assert type(raw) is array and [x + base for x in raw] == _cumulative(nxt)
    assert list(chain.shas) == [chain.ids.hashes[b.sha] for b in nxt]
