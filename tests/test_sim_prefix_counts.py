"""simulate's per-request bookkeeping found as the Blocks are converted, held against what it replaces:
the cached prefix of each request (markers carried over the Blocks a request shares with the one before,
instead of a scan of every Block) and each call's price at a row looked up once."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.common_prefix import common_prefix_len
from engine.providers.base import Block
from engine.sim.cachesim import CallCache
from engine.sim.pricing import ModelPrice, PriceTable, call_cost, cost, load_prices
from engine.sim.simulate_marks import _marks_after, _prefix_count, _prefix_from_marks

# A request: how many leading Blocks it keeps of the one before (the same objects, as the engine hands
# them over), then new Blocks, each (hash, marked). Hashes come from a small alphabet so that new Blocks
# are often equal to earlier ones without being the same object.
requests = st.lists(
    st.tuples(st.integers(0, 12), st.lists(st.tuples(st.sampled_from("abcde"), st.booleans()), max_size=8)),
    min_size=1,
    max_size=12,
)


@given(requests, st.booleans())
@settings(max_examples=400, deadline=None)
def test_prefix_counts_carried_over_shared_blocks_equal_a_scan(reqs: list, automatic: bool) -> None:
    prev: list[Block] = []
    marks: list[int] = []
    for keep, fresh in reqs:
        blocks = prev[:keep] + [Block("history", "messages", sha, 10, mk) for sha, mk in fresh]
        common = common_prefix_len(prev, blocks)  # as _simulate finds it (equal Blocks, not only the same)
        marks = _marks_after(marks, common, blocks[common:])
        assert marks == [i for i, b in enumerate(blocks) if b.marker]
        assert _prefix_from_marks(marks, len(blocks), automatic) == _prefix_count(blocks, automatic)
        prev = blocks


usage = st.builds(
    CallCache,
    st.integers(0, 10**7),
    st.integers(0, 10**7),
    st.integers(0, 10**7),
    st.integers(0, 10**7),
    st.integers(0, 10**7),
)


@given(usage, st.integers(0, 10**6), st.sampled_from(["deepseek-chat", "claude-sonnet-4", "gpt-4o"]))
@settings(max_examples=300, deadline=None)
def test_call_cost_is_cost_at_the_row_it_looks_up(u: CallCache, out: int, model: str) -> None:
    table = load_prices()
    row = table.get(model)
    got = call_cost(row, u, out)
    assert got == cost(model, u, out, prices=table)  # the same float, not merely close
    mapping = {"uncached": u.uncached, "cache_read": u.cache_read, "cache_write": u.cache_write,
               "cache_write_1h": u.cache_write_1h}  # fmt: skip
    assert got == cost(model, mapping, out, prices=table)


def test_call_cost_without_a_one_hour_price_bills_those_writes_at_the_write_price() -> None:
    row = ModelPrice("m", "p", 3.0, 15.0, 0.3, 3.75, None, "2026-01-01", "test")
    table = PriceTable({"m": row}, {}, "test")
    u = CallCache(1000, 100, 500, 400, 200)
    assert call_cost(row, u, 10) == cost("m", u, 10, prices=table)
    assert call_cost(row, u, 10) == pytest.approx((400 * 3 + 100 * 0.3 + 500 * 3.75 + 10 * 15) / 1e6)
