"""A burst of events the agent holds back for a fold client is marked once in its ring, not once an event.

Each mark (engine.probe.ring, "Held events") is a store the agent's thread makes cold, after the model
call or the tool run: five a paced turn cost it ~20 us (bench_probe --publish-split --split-reader fold).
The inspector asks only after it has seen the count stay put for its idle, so the later marks of a burst
told it nothing: an event held within ring.MARK_GAP of the newest mark, with no frame written since, is
not marked again. A frame written since, or a gap longer than that, marks it again, so the inspector
still asks for what is held after its last ask. Real agent (a Pipeline serving its probe), real socket
and ring, the real live source.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from engine.probe.ring import MARK_GAP
from inspector.sources.live import LiveSource
from tests.test_probe_fold import T, _Follower, _pipeline
from tests.test_probe_fold_held import _close, _reply


def _fold_client(pipe: Any) -> tuple[Any, _Follower]:
    """Turn 0 closed and replied, then a fold client attached (the live source on the fold stream, which
    never asks) and waited for until its ring says what is held: the client and the follower reading it."""
    probe = pipe.probe
    _close(pipe, 0)
    _reply(pipe, 0)
    src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True)
    assert src._folding
    client = src.client
    view = _Follower(src)
    deadline = time.monotonic() + T
    while not (probe.client_count == 1 and client.held() is not None):
        assert time.monotonic() < deadline, "the fold client never got a ring that says what is held"
        time.sleep(0.005)
    return client, view


def _sent(probe: Any, client: Any) -> None:
    """Wait until the turn's batch is in the ring (nothing held since) and the I/O thread has settled
    (it names the ring client again once it is about to sleep with nothing due: publish's straight path)."""
    deadline = time.monotonic() + T
    while not (client.held() == 0 and probe._ring_one is not None and not probe._wake_pending):
        assert time.monotonic() < deadline, f"the turn's batch never went ({client.held()} held)"
        time.sleep(0.005)


def test_a_burst_of_held_events_is_marked_once_and_marked_again_after_a_frame_or_a_gap(rtdir: Path) -> None:
    pipe = _pipeline(rtdir)
    probe = pipe.probe
    probe.fold_coalesce = 0.0  # every close sent at once: frames where the test says
    try:
        client, view = _fold_client(pipe)
        _close(pipe, 1)  # the turn's batch: a frame, nothing held since
        _sent(probe, client)
        # A gap longer than any scheduler delay here between the burst's calls (the default is 10 ms).
        probe.mark_gap = 5.0
        calls = pipe.assistant("step 1", [{"id": "c1", "name": "bash", "arguments": "{}"}])
        first = client.held()
        assert first, "the reply held back, unmarked"
        held = probe._holds
        pipe.tool_result(calls[0].id, "output of step 1")  # the tool result and its content: two more
        assert probe._holds > held, "the tool result was not held back"
        # Before: the count stored again for each event (first + 2).
        assert client.held() == first, "a burst of held events marked more than once"
        # A frame since: the next event held is marked at once, whatever the gap.
        pipe.next_request()
        pipe.record_usage({"input_tokens": 100, "output_tokens": 10})
        _sent(probe, client)
        calls = pipe.assistant("step 2", [{"id": "c2", "name": "bash", "arguments": "{}"}])
        second = client.held()
        assert second > first
        # Past the gap with no frame: marked again, so a reader that asked since learns of it.
        probe.mark_gap = MARK_GAP
        time.sleep(MARK_GAP * 3)
        pipe.tool_result(calls[0].id, "output of step 2")
        assert client.held() > second
        view.stop()
    finally:
        pipe.close()
