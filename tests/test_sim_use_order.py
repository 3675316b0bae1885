"""The DeepSeek simulator's ordered expiry read from a queue of touches (engine/sim/cache_policy.py UseOrder)
instead of iterating the units dict from its first slot (where the holes of every unit expired since the
dict last resized were skipped, call after call): the same keys expired, in the same order, the dict left
the same, as the scan over the dict (`_expire_ordered`) that it replaces."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cache_policy import UseOrder, _expire_ordered
from engine.sim.cachesim import CacheSimulator
from tests.test_cachesim_deepseek_carry import units_state
from tests.test_cachesim_deepseek_expiry import expiring

# An operation on a dict kept in order of last use: ("put", key, value) inserts a new key or moves an
# old one to the end with its new value; ("expire", limit) expires what is below the limit.
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 30), st.integers(0, 100)),
        st.tuples(st.just("expire"), st.integers(0, 100)),
    ),
    max_size=200,
)


@settings(max_examples=400, deadline=None)
@given(_OPS)
def test_the_queue_expires_what_the_scan_over_the_dict_expires(ops: list[tuple[Any, ...]]) -> None:
    queued: dict[int, int] = {}
    scanned: dict[int, int] = {}
    order = UseOrder()
    for op in ops:
        if op[0] == "put":
            _, k, v = op
            for d in (queued, scanned):
                d.pop(k, None)
                d[k] = v
            order.touched(k)
        else:
            limit: int = op[1]

            def below(v: int, lim: int = limit) -> bool:
                return v < lim

            got = order.expire(queued, below)
            assert got == _expire_ordered(scanned, below, True)
            assert list(queued.items()) == list(scanned.items())


class _ScanEveryCall:
    """The expiry as it was: the dict scanned from its first slot, stopping at the first live unit."""

    def touched(self, key: int) -> None:
        pass

    def expire(self, d: dict[int, Any], expired: Any) -> list[int]:
        return _expire_ordered(d, expired, True)


@settings(max_examples=300, deadline=None)
@given(expiring())
def test_a_simulator_expiring_from_the_queue_equals_one_that_scans_its_units(
    case: tuple[list[Any], dict[str, Any]],
) -> None:
    calls, options = case
    queue = CacheSimulator("deepseek", "deepseek-chat", **options)
    scan = CacheSimulator("deepseek", "deepseek-chat", **options)
    ref: Any = scan._policy
    ref._use = _ScanEveryCall()
    for c in calls:
        assert queue.step(c) == scan.step(c)
        assert units_state(queue._policy) == units_state(ref)


def test_the_queue_holds_what_was_touched_within_the_ttl_not_every_touch() -> None:
    """1,000 appended calls 10 s apart with units kept 300 s: the queue's front is taken as units expire
    (each call writes two units and touches one), so it holds about the last 30 calls' touches."""
    from tests.test_cachesim_deepseek_carry import appended

    sim = CacheSimulator("deepseek", "deepseek-chat", ttl_seconds=300.0)
    sim.simulate(appended(1_000))
    pol: Any = sim._policy
    assert 0 < len(pol.units) <= 2 * 32
    assert len(pol._use._queue) <= 3 * 32
