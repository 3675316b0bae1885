"""Two DeepSeek cache simulators stepped through the same calls, held equal call by call: every figure,
and `seen` and `units` themselves (contents, times and order). The tests of a shortcut in the simulator
run it against a reference that takes the long way (tests/test_cachesim.py, test_sim_lazy_keys.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.sim.cachesim import CacheSimulator, Call


def assert_twins(fast: CacheSimulator, slow: CacheSimulator, calls: Iterable[Call]) -> None:
    for c in calls:
        assert fast.step(c) == slow.step(c)
        fp: Any = fast._policy
        sp: Any = slow._policy
        assert list(fp.seen.items()) == list(sp.seen.items())
        assert [(k, vars(u)) for k, u in fp.units.items()] == [(k, vars(u)) for k, u in sp.units.items()]
