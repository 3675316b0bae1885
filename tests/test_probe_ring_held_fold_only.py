"""The agent marks the events it holds back (engine.probe.ring, "Held events") in a fold client's ring only.

The marks spare a fold inspector an ask for the journal's end after a quiet gap in which the agent holds
nothing: its turn's batch carries everything, the request too while the model is slow. A client of the
quiet elided stream is never in that case: the request and the reply are elided kinds, held in the agent's
queue through every model call and tool run, so after any quiet gap there is something held and it asks
once, marks or not. Marking each held event cost a paced agent's thread ~15-30 us a turn (five stores,
cold after the model call: bench_probe --publish-split). Such a client now hears no `held` in its ring
frame and asks once a quiet period, as before the marks; it still gets the events held after its last
batch. Real agent (a Pipeline serving its probe), real socket and ring, the real live source.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from inspector.sources.live import LiveSource
from tests.test_probe_fold import T, _Follower, _pipeline
from tests.test_probe_fold_held import GAP, IDLE, _close, _reply, _settled


def _ring_attached(src: LiveSource, pipe: Any) -> None:
    deadline = time.monotonic() + T
    while not (pipe.probe.client_count == 1 and src.client.ring):
        assert time.monotonic() < deadline, (
            f"the elided client never read its frames from a ring: {pipe.probe.client_count} clients, "
            f"ring {src.client.ring}"
        )
        time.sleep(0.005)


def test_an_elided_ring_client_costs_the_agent_no_held_marks_and_still_gets_what_is_held(rtdir: Path) -> None:
    pipe = _pipeline(rtdir)
    probe = pipe.probe
    try:
        _close(pipe, 0)
        _reply(pipe, 0)
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=IDLE)  # the elided stream, not the fold one
        assert src._elided and not src._folding
        view = _Follower(src)
        _ring_attached(src, pipe)
        assert src.client.held() is None  # the agent does not say it marks: the client asks a quiet period
        holds = probe._holds
        for t in range(1, 6):
            _close(pipe, t)  # the request and usage, held; the turn goes
            _reply(pipe, t)  # the reply and the tool's result, held after the turn's batch
        # Before: the agent stored a mark in the ring's header for each of those (20 here).
        assert probe._holds == holds
        view.wait_for(5)
        # The quiet gap: the inspector asks for the journal's end and gets the reply and result held.
        time.sleep(GAP)
        _settled(pipe, src)
        assert src._jpos == len(probe._journal())
    finally:
        view.stop()
        src.close()
        pipe.close()


def test_a_fold_client_still_hears_that_the_agent_marks_what_it_holds(rtdir: Path) -> None:
    pipe = _pipeline(rtdir)
    probe = pipe.probe
    try:
        _close(pipe, 0)
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=IDLE, fold=True)
        assert src._folding
        view = _Follower(src)
        deadline = time.monotonic() + T
        while not (probe.client_count == 1 and src.client.held() is not None):
            assert time.monotonic() < deadline, "the fold client never got a ring that says what is held"
            time.sleep(0.005)
        holds = probe._holds
        _close(pipe, 1)
        _reply(pipe, 1)
        assert probe._holds > holds
    finally:
        view.stop()
        src.close()
        pipe.close()
