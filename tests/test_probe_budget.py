"""The probe I/O thread's CPU budget (engine.probe.cpu_budget: IOLoop._budget), on a fake clock.

Two properties: the thread never uses more than CPU_SHARE of the agent's CPU (plus one CPU_BURST)
without being made to rest, and a pass that used no more than the agent's CPU earned it since the last
pass is not made to rest (a rest costs the thread a sleep and a wake-up, and the live view its latency).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.probe.cpu_budget as cpu_budget
import engine.probe.loop as loop
from engine.probe.cpu_budget import CPU_BURST, CPU_SHARE
from engine.probe.loop import IOLoop


class FakeClock:
    """thread_time (the probe thread), process_time (probe + agent) and monotonic, advanced by hand."""

    def __init__(self) -> None:
        self.thread = 0.0
        self.process = 0.0
        self.wall = 0.0

    def thread_time(self) -> float:
        return self.thread

    def process_time(self) -> float:
        return self.process

    def monotonic(self) -> float:
        return self.wall


def _busy_loop(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, FakeClock, list[float]]:
    clock = FakeClock()
    monkeypatch.setattr(loop, "time", clock)  # (_init_loop's marks)
    monkeypatch.setattr(cpu_budget, "time", clock)  # (_refill's)
    io = IOLoop.__new__(IOLoop)  # only the budget's state: no sockets, no thread
    io._init_loop()
    io._stopping = False
    io._cpu_mark = clock.thread
    io._proc_mark = clock.process
    rests: list[float] = []

    def rest(seconds: float) -> None:
        # The agent goes on meanwhile, busy (a core's worth): what repays a debt (see _budget).
        rests.append(seconds)
        clock.wall += seconds
        clock.process += seconds

    io._rest = rest  # type: ignore[method-assign]
    return io, clock, rests


def _pass(io: Any, clock: FakeClock, agent: float, used: float) -> None:
    """The agent runs `agent` s of CPU (over as much wall time: it is busy), then a pass uses `used`."""
    clock.wall += agent + used
    clock.process += agent + used
    clock.thread += used
    io._budget()


def test_a_pass_within_what_the_agent_earned_it_does_not_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turns back to back: a pass every ~100 ms of the agent's CPU sends what came meanwhile. At 2.5 ms
    it used less than its 3% (3 ms) but more than the burst cap (2 ms); capping the refill before
    charging the pass made every such pass rest."""
    io, clock, rests = _busy_loop(monkeypatch)
    for _ in range(20):
        _pass(io, clock, agent=0.1, used=0.025 * 0.1)
    assert rests == []
    # A pass over its share still rests, for about as long as repays it at the agent's rate.
    _pass(io, clock, agent=0.1, used=0.1 * CPU_SHARE + CPU_BURST + 0.003)
    assert rests and rests[0] > 0 and io._cpu_tokens >= 0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.0005, 0.5), st.floats(0.0, 0.02)),  # (agent CPU since the last pass, pass CPU)
        min_size=1,
        max_size=40,
    )
)
def test_the_thread_never_outspends_its_share_without_a_rest(passes: list[tuple[float, float]]) -> None:
    """Whatever the passes cost, once the thread's CPU exceeds CPU_SHARE of the agent's plus the burst
    it started with, the pass that crossed it is made to rest (no pass is let off by the carry)."""
    mp = pytest.MonkeyPatch()
    try:
        io, clock, rests = _busy_loop(mp)
        used_total = earned_total = 0.0
        for agent, used in passes:
            before = len(rests)
            _pass(io, clock, agent, used)
            used_total += used
            earned_total += CPU_SHARE * agent
            earned_total += CPU_SHARE * sum(rests[before:])  # (the agent's CPU while the thread rested)
            if used_total > earned_total + CPU_BURST + 1e-12:
                assert len(rests) > before, (used_total, earned_total)
            # The carry between passes never grows beyond one burst plus one interval's earnings.
            assert io._cpu_tokens <= CPU_BURST + CPU_SHARE * (agent + sum(rests[before:])) + 1e-12
    finally:
        mp.undo()
