"""simulate names a cache break from the first changed Block only (engine/sim/simulate_column.py,
`_first_changed`): attribute_cache_break handed that one Block (and the request's next one, which tells
an inserted Block) gives the cause it gives for the whole
requests, and `_first_changed` says "no change" exactly where the hashes of the cached prefix all agree
(hypothesis over request pairs sharing any prefix, with moved markers, removed, added and shortened
tails, markers and sections that differ)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.feedback import attribute_cache_break
from engine.providers.base import Block
from engine.sim.cachesim import shared_prefix_len
from engine.sim.simulate_column import _first_changed

_block = st.builds(
    Block,
    st.sampled_from(["tools", "identity", "latches", "history"]),
    st.sampled_from(["tools", "system", "messages"]),
    st.sampled_from(["a", "b", "c", "d"]),
    st.integers(1, 3),
    st.booleans(),
)


@settings(max_examples=500, deadline=None)
@given(
    prev=st.lists(_block, max_size=8),
    cur=st.lists(_block, max_size=8),
    keep=st.integers(0, 8),
    n=st.integers(0, 10),
    latches=st.lists(st.sampled_from(["mode", "plan"]), max_size=2),
    steps=st.lists(st.sampled_from(["drop_rounds", "trim_sections", "reorder"]), max_size=2),
)
def test_first_changed_block_names_the_break(
    prev: list[Block], cur: list[Block], keep: int, n: int, latches: list[str], steps: list[str]
) -> None:
    cur = prev[:keep] + cur  # a shared prefix of any length (the same objects)
    shared = shared_prefix_len(prev, cur)
    m = min(n, len(prev))
    same = len(cur) >= m and [b.sha for b in prev[:m]] == [b.sha for b in cur[:m]]
    j = _first_changed(prev, cur, shared, m)
    assert (j is None) == same
    kw: dict[str, Any] = {
        "model_changed": False,
        "flipped_latches": latches,
        "actions": [{"step": s} for s in steps],
    }
    full = attribute_cache_break(prev, cur, n, **kw)
    if j is None:
        assert full is None
    else:
        assert full is not None
        # With the Block after it (an inserted Block is told by the old one that follows it).
        assert attribute_cache_break(prev[j : j + 1], cur[j : j + 2], 1, **kw) == full
