"""A history fill within the CPU share the probe declares (engine.probe.cpu_budget: CPU_SHARE of the agent's
own CPU while it is busy), behind an agent paced by its model.

The inspector attached to a long session fetches the journal before the snapshot's tail by range, a
request always waiting. Each pass of the I/O thread that began in debt still got a burst of CPU
(CPU_BURST) beyond its tokens, and a rest was capped at half a second: behind an agent paced at 0.05 s
(~30 ms of CPU a second) the thread took ~4-5 ms a second, 14% of the agent's CPU, not 3%, however
little the agent earned it.

A real Pipeline behind a real ProbeServer, and the inspector's own live source (the fold stream, as
`cp-inspect attach` asks) in another process, so that its CPU is not the agent's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.probe.cpu_budget import CPU_BURST, CPU_SHARE, IDLE_RATE
from tests.support.probe_agent import fold_reader, paced_turn, run_turns, serving_pipeline, stop_reader

HISTORY = 600  # turns before the inspector attaches: ~4,200 journal events, most of them on disk
PACE = 0.05
# Each paced turn uses at least TURN_CPU (tests.support.probe_agent.paced_turn): the share applies while
# the agent is busy, which the probe reads as using IDLE_RATE (2%) of a core or more. A bare turn took
# 1.1 ms on the official CI's host (2.1% at this pace: between turns the smoothed rate fell under 2%, the
# probe took the idle allowance, 20% of wall time, and used 13% of the agent's CPU) and ~2 ms on others.
# Padded to 2.5 ms the agent uses ~5% of a core on any host, while the old code's fixed 4-5 ms a second is
# still over the bound (which grows with the agent's CPU: not the fill tests' 4 ms, for that reason).
TURN_CPU = 0.0025
SECONDS = 6.0


def _thread_cpu(th: Any) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(th.ident))


def test_a_history_fill_takes_no_more_than_its_share_of_a_paced_agents_cpu(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """For SECONDS of paced turns while the inspector fills its history, the probe's thread uses at most
    CPU_SHARE of the CPU the agent's thread used, plus the bursts a pass may take ahead, plus the same
    again for wake-ups charged late on a loaded machine. On the old code ~4-5 ms a second whatever the
    agent used (14-19% of it)."""
    from engine.recording.journal import Journal

    monkeypatch.setattr("engine.pipeline.Journal", lambda *a, **k: Journal(keep=256))
    pipe = serving_pipeline(monkeypatch, rtdir)
    reader = None
    try:
        run_turns(pipe, range(HISTORY))
        probe = pipe.probe
        reader = fold_reader(rtdir)
        io0 = _thread_cpu(probe._thread)
        proc0 = time.process_time()
        turn = HISTORY
        start = time.monotonic()
        filling: list[bool] = []  # whether the inspector was filling its history, before each turn
        lowest = 1.0  # the probe's reading of the agent's share of a core, before each turn
        while time.monotonic() - start < SECONDS:
            lowest = min(lowest, probe._agent_rate)
            filling.append(any(c.fetch for c in probe._clients.values()))
            paced_turn(pipe, turn, TURN_CPU)
            turn += 1
            time.sleep(PACE)
        wall = time.monotonic() - start
        io = _thread_cpu(probe._thread) - io0
        # The agent's CPU as the budget counts it: the process's but the probe thread's.
        agent = time.process_time() - proc0 - io
        # The inspector asks for one range at a time, so at any instant the agent may hold no request
        # (one answer in flight, the next not yet asked): sampled before every turn, not once at the end.
        share = sum(filling) / len(filling)
        assert share >= 0.75, (
            f"the inspector was filling its history before only {share:.0%} of the turns: the test measured "
            "something other than a fill (a longer HISTORY makes the fill last)"
        )
        # The share, and a pass's overdraw of the bucket: up to a burst ahead and the pass that went past
        # it (CI's fresh clone measured 10.13 ms against 10.10 with two; the old code used ~19%). And
        # once the share again: each rest's wake-up is charged after it is spent, and on a starved shared
        # VM those grow (two CI suites side by side, load ~4: 13.9 ms against 244.8, 5.7%; quiet 8-10 ms
        # against ~200, ~4.5%), while what this test guards against is the old code's 14-19%.
        allowed = 2 * CPU_SHARE * agent + 3 * CPU_BURST
        assert io <= allowed, (
            f"the probe's thread used {io * 1e3:.1f} ms of CPU while the agent's used {agent * 1e3:.1f} "
            f"({turn - HISTORY} paced turns): {io / agent:.1%}, over twice {CPU_SHARE:.0%} and the bursts "
            f"({allowed * 1e3:.1f} ms); the agent used {agent / wall:.1%} of a core, the probe read it as "
            f"low as {lowest:.1%} (under {IDLE_RATE:.0%} it takes the idle allowance)"
        )
    finally:
        if reader is not None:
            stop_reader(reader)
        pipe.close()
