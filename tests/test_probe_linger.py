"""A paced agent's turns handed to the I/O thread's lingering burst (agent_send, "Lingering").

With `quiet_linger` set, a publish less than that long after the last one, while every client is quiet,
leaves its event in the queue for the I/O thread: the agent's thread encodes and sends nothing (no
`_fold_now` send, no held-back close), and the I/O thread, in a burst that waits MAX_LATENCY between
passes while turns keep coming, sends several turns a pass and sleeps once they stop. Real agent (a
Pipeline serving its probe), real socket and ring, the real live source folding the stream: every turn
reaches the view as the agent's own trace.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.probe.agent_limits import TURN_GAP
from engine.probe.loop import MAX_LATENCY
from tests.support.fold_stream import assert_shown_as_sent, fold_stream, wait_until
from tests.test_probe_fold import _turn

LINGER = 1.0
PACE = MAX_LATENCY / 5  # between turns: closer than LINGER, past TURN_GAP


@pytest.mark.parametrize("record", [False, True])
def test_paced_turns_go_by_the_lingering_burst_and_every_one_reaches_the_view(rtdir: Path, record: bool) -> None:
    with fold_stream(rtdir, record, backfill_idle=None) as fs:  # (the inspector never asks for held events)
        pipe, probe, view = fs.pipe, fs.probe, fs.view
        probe.quiet_linger = LINGER
        sends, held, wakes = probe.agent_sends, probe.fold_closes_held, probe.wakeups
        assert TURN_GAP < PACE
        turns = list(range(2, 14))
        start = time.monotonic()
        for t in turns:
            time.sleep(PACE)
            _turn(pipe, t)
        took = time.monotonic() - start
        view.wait_for(turns[-1])
        # Nothing sent on the agent's thread but the first turn (how long since the one before it is not
        # known), nothing held back there: the I/O thread's passes sent them.
        assert probe.agent_sends - sends <= 1
        assert probe.fold_closes_held - held <= 1
        # A pass every MAX_LATENCY or so (and the client's own traffic), not one a turn.
        passes = probe.wakeups - wakes
        assert passes < len(turns) / 2, (passes, took)
        # The burst ends once the turns stop: the I/O thread sleeps with nothing to send.
        wait_until(lambda: not probe._wake_pending and not probe._linger, "the lingering burst never ended")
        idle = probe.wakeups
        time.sleep(3 * MAX_LATENCY)
        assert probe.wakeups == idle
        assert_shown_as_sent(fs, turns)


def test_a_turn_after_a_pause_longer_than_the_linger_is_sent_on_the_agents_thread(rtdir: Path) -> None:
    """An agent whose model takes longer than quiet_linger keeps the old path: its turn is sent at its
    close by the agent's thread, the I/O thread not woken for it."""
    with fold_stream(rtdir, record=False, backfill_idle=None) as fs:
        pipe, probe, view = fs.pipe, fs.probe, fs.view
        probe.quiet_linger = 0.3
        time.sleep(0.6)  # past the linger and FOLD_COALESCE since turn 1
        sends = probe.agent_sends
        _turn(pipe, 2)
        assert probe.agent_sends == sends + 1
        view.wait_for(2)
        assert_shown_as_sent(fs, [2])
