"""A paced agent's turn handed to the probe's hand-off thread (engine.probe.handoff, opt-in).

While the I/O thread sleeps and names the one quiet ring client for publish()'s straight path, the
agent's thread only appends the event and releases a lock: the hand-off thread, blocked on that lock,
writes the turn into the client's ring by the same straight path (`_fold_now`, `_ring_now`) under the
same pass lock. Real agent (a Pipeline serving its probe), real socket and ring, the real live source
folding the stream: every turn reaches the view at once as the agent's own trace, the I/O thread never
woken for it; a hand-off thread that falls behind leaves the queue bounded, its losses counted.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine.probe.agent_limits import AGENT_WINDOW
from engine.probe.client import ProbeClient
from engine.probe.loop import MAX_LATENCY
from engine.probe.server import ProbeServer
from tests.support.fold_stream import assert_shown_as_sent, fold_stream, traced_turn_publishes, wait_until
from tests.test_probe_fold import T, _turn


def _handoff_thread(probe: Any) -> threading.Thread:
    """Turn the hand-off on (it is opt-in: see engine.probe.handoff) and start its thread."""
    probe.handoff = True
    probe._start_handoff()
    t = probe._handoff_thread
    assert t is not None and t.is_alive()
    return t


@pytest.mark.parametrize("record", [False, True])
def test_a_paced_fold_turns_close_is_publish_and_a_lock_release_on_the_agents_thread(
    rtdir: Path, record: bool
) -> None:
    """At the turn's close the agent's thread calls publish() and `_hand_off` (a lock's release, C code)
    and nothing else; the hand-off thread sends the turn, one batch frame in the ring, with no wake-up
    of the I/O thread, and the inspector shows it at once (well within MAX_LATENCY of the close)."""
    with fold_stream(rtdir, record, backfill_idle=None) as fs:
        pipe, probe, view = fs.pipe, fs.probe, fs.view
        probe.fold_coalesce = (
            0.0  # every turn sent at its close (test_probe_fold_coalesce.py: the closer ones)
        )
        _handoff_thread(probe)
        c = probe._ring_one
        written, sends, wakeups, passes = (
            c.ring.written,
            probe.agent_sends,
            probe.wakeups,
            probe.handoff_passes,
        )
        turns = list(range(2, 6))
        lags = []
        with traced_turn_publishes(probe) as calls:
            for t in turns:
                time.sleep(AGENT_WINDOW / 4)  # paced: a model call between turns
                _turn(pipe, t)
                at = time.monotonic()
                view.wait_for(t)
                lags.append(time.monotonic() - at)
        assert len(calls) == len(turns)
        for names in calls:
            assert names == ["publish", "_hand_off"], names
        assert probe.handoff_passes - passes == len(turns)  # one pass a turn
        assert probe.agent_sends - sends == len(turns)  # each by the straight path, one batch frame
        assert probe.wakeups == wakeups, "the I/O thread was woken for a handed-off turn"
        assert c.ring.written > written
        assert max(lags) < MAX_LATENCY, lags
        pipe.close_turn()
        assert_shown_as_sent(fs, turns)


def test_the_same_stream_with_the_hand_off_off(rtdir: Path) -> None:
    """`handoff` off: the agent's thread sends at the close as before (bench_probe's A/B), the stream the
    same."""
    with fold_stream(rtdir, record=False, backfill_idle=None) as fs:
        pipe, probe, view = fs.pipe, fs.probe, fs.view
        probe.fold_coalesce = 0.0
        _handoff_thread(probe)
        probe.handoff = False
        passes, sends = probe.handoff_passes, probe.agent_sends
        turns = list(range(2, 5))
        for t in turns:
            time.sleep(AGENT_WINDOW / 4)
            _turn(pipe, t)
        view.wait_for(turns[-1])
        assert probe.handoff_passes == passes
        assert probe.agent_sends - sends == len(turns)
        assert_shown_as_sent(fs, turns)


def test_a_hand_off_thread_that_falls_behind_leaves_the_queue_bounded_and_the_agent_unblocked(
    rtdir: Path,
) -> None:
    """The hand-off thread stalled (its pass blocked, as one starved of the CPU) with a quiet ring reader
    attached: the agent's publishes go on at once, the queue holds at most its limit (the oldest events
    dropped and counted, today's policy), and once the thread runs again the reader, told what it lost,
    gets the newest event."""
    journal: list[dict[str, Any]] = []
    limit = 64
    server = ProbeServer({"model": "m"}, lambda: journal, runtime_dir=rtdir, queue_limit=limit)
    server.start()
    gate = threading.Event()
    try:
        c = ProbeClient.connect_path(server.path, os.getpid(), T, lean=True, elide=True, poll=True)
        wait_until(lambda: c.recv(0.01) is None and c.ring, "the agent did not hand over a ring")

        def note(i: int) -> None:
            ev = {"k": "note", "turn": i, "text": "x" * 100}
            journal.append(ev)
            server.publish(ev)

        _handoff_thread(server)
        note(0)
        wait_until(
            lambda: server._ring_one is not None and not server._pending, "the ring client was never named"
        )
        real_pass = server._handoff_pass
        stall_ended = threading.Event()  # the stalled pass's wait is over (the gate opened, or T passed)

        def stalled() -> None:
            gate.wait(T)
            stall_ended.set()
            real_pass()

        server._handoff_pass = stalled  # type: ignore[method-assign]
        n = 10 * limit
        kicks = server._kicks
        for i in range(1, n):
            note(i)
            assert len(server._pending) <= limit
        # No publish waited on the stalled thread: every one returned while it was still stalled (a
        # publish that waited for it would have returned only once its wait ended, at T).
        assert not stall_ended.is_set()
        assert server._kicks - kicks == n - 1  # every one handed off (to the stalled thread)
        assert server._overflow >= n - 2 * limit, server._overflow  # the oldest dropped, counted
        gate.set()
        last = None
        deadline = time.monotonic() + T
        while last != n - 1:
            assert time.monotonic() < deadline, f"the reader never got the newest event (last {last})"
            ev = c.recv(0.2)
            if ev is not None and ev.get("k") == "note":
                last = ev["turn"]
        c.close()
    finally:
        gate.set()
        server.close()


def test_the_hand_off_thread_ends_with_the_server(rtdir: Path) -> None:
    with fold_stream(rtdir, record=False, backfill_idle=None) as fs:
        t = _handoff_thread(fs.probe)
        fs.pipe.close()
        t.join(5)
        assert not t.is_alive()
