"""DeepSeek's carried read (`_Contained`) when units expire: a session longer than the units' ttl (4 h by
default) expires the oldest units nearly every call, and each expiry threw the carried ranking away and
scanned the whole prefix again (a 3,000-turn what-if's paper column: ~685,000 units admitted, ~1,400 a
call, quadratic in the session). The expired units are now taken out of the ranking. Differential: the
same figures and units (contents, times, order) as scanning the whole prefix every call."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import CacheSimulator, Call
from tests.test_cachesim_deepseek_carry import CountingDict, appended, sessions, units_state


def test_expiring_units_do_not_make_every_call_scan_its_whole_prefix() -> None:
    """600 appended turns 10 s apart, units kept 3,000 s: past turn 300 every call expires a unit, and
    the prefix contains ~600 live ones (old code: every call past there tested all of them)."""
    sim = CacheSimulator("deepseek", "deepseek-chat", ttl_seconds=3_000.0)
    policy: Any = sim._policy
    policy.units = CountingDict()
    CountingDict.lookups = 0
    turns = 600
    calls = appended(turns)
    results = sim.simulate(calls)
    lookups = CountingDict.lookups
    scanned = CacheSimulator("deepseek", "deepseek-chat", ttl_seconds=3_000.0)
    ref: Any = scanned._policy
    ref.carry = False
    assert results == scanned.simulate(calls)
    assert results[-1].cache_read > 0
    assert lookups <= 12 * turns, lookups


@st.composite
def expiring(draw: st.DrawFn) -> tuple[list[Call], dict[str, Any]]:
    """sessions() with a short ttl and calls far enough apart that units expire often."""
    calls, options = draw(sessions())
    options["ttl_seconds"] = draw(st.sampled_from([6.0, 12.0, 30.0]))
    return calls, options


@settings(max_examples=400, deadline=None)
@given(expiring())
def test_carried_read_with_expiries_equals_the_whole_prefix_scan(
    case: tuple[list[Call], dict[str, Any]],
) -> None:
    calls, options = case
    carried = CacheSimulator("deepseek", "deepseek-chat", **options)
    scanned = CacheSimulator("deepseek", "deepseek-chat", **options)
    ref: Any = scanned._policy
    ref.carry = False
    for c in calls:
        assert carried.step(c) == scanned.step(c)
        assert units_state(carried._policy) == units_state(ref)
