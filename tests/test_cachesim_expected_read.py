"""DeepSeek's expected read where requests persist with a probability below 1 (`_read_expected`, a build
that persists about half its requests: pydicom-1413's): its units picked out in C must give the figures
and leave the units (contents, times, order) the unit-by-unit rule gave, ties in length and hidden units
included."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import CacheSimulator, Call
from tests.test_cachesim_deepseek_carry import sessions, units_state


def unit_by_unit(policy: Any, keys: list[int], old: int, total: int, now: float) -> tuple[int, int]:
    """The rule as it was written before (2026-12-06): each contained unit looked at in turn."""
    best: dict[int, tuple[int, float, int]] = {}
    units = policy.units
    for key in filter(units.__contains__, keys[1:old]):
        u = units[key]
        if not u.available_at < now:
            continue
        t = min(u.tokens, total)
        cur = best.get(u.group)
        if cur is None or t > cur[0]:
            best[u.group] = (t, u.prob, key)
    expected = 0.0
    none_longer = 1.0
    for t, p, k in sorted(best.values(), key=lambda x: -x[0]):
        expected += none_longer * p * policy._floor(t)
        none_longer *= 1.0 - p
        policy._touch(k, now)  # (moved to the end of `units`, as the expiry's queue is told)
        if none_longer <= 0.0:
            break
    read = min(total, int(round(expected)))
    return read, max((t for t, _, _ in best.values()), default=0)


def pair(options: dict[str, Any]) -> tuple[CacheSimulator, CacheSimulator]:
    new = CacheSimulator("deepseek", "deepseek-chat", **options)
    old = CacheSimulator("deepseek", "deepseek-chat", **options)
    ref: Any = old._policy
    ref._read_expected = lambda keys, o, total, now: unit_by_unit(ref, keys, o, total, now)
    return new, old


@settings(max_examples=300, deadline=None)
@given(sessions(), st.sampled_from([0.5, 0.75, 0.3, 1.0]))
def test_expected_read_equals_the_unit_by_unit_rule(
    case: tuple[list[Call], dict[str, Any]], p: float
) -> None:
    calls, options = case
    new, old = pair({**options, "persist_probability": p})
    if p == 1.0:  # the general rule, not the carried one, at probability 1 as well
        for sim in (new, old):
            pol: Any = sim._policy
            pol.carry = False
            pol._read_certain = pol._read_expected
    for c in calls:
        assert new.step(c) == old.step(c)
        assert units_state(new._policy) == units_state(old._policy)


def test_ties_and_hidden_units_on_a_long_appended_session() -> None:
    """Many units a call (every earlier request's), some not yet visible (replies that complete later),
    equal lengths from different requests (zero-token blocks): the first request met wins a tie."""
    from engine.sim.cachesim import Block

    msgs = [Block(sha="sys", tokens=256), Block(sha="u0", tokens=128)]
    calls = []
    for t in range(60):
        done = 10.0 * t + (25.0 if t % 5 == 0 else 2.0)  # every fifth reply completes after the next call
        calls.append(
            Call(tuple(msgs), timestamp=10.0 * t, output_tokens=40, output_sha=f"a{t}", completed_at=done)
        )
        msgs = msgs + [
            Block(sha=f"a{t}", tokens=0 if t % 3 == 0 else 40),
            Block(sha=f"r{t}", tokens=64 + t % 7),
        ]
    new, old = pair({"persist_probability": 0.5, "interval_tokens": 64})
    reads = []
    for c in calls:
        got = new.step(c)
        assert got == old.step(c)
        assert units_state(new._policy) == units_state(old._policy)
        reads.append(got.cache_read)
    assert sum(reads) > 0 and len(set(reads)) > 10  # the rule was exercised, not a session of misses
