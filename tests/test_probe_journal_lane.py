"""The journal's lane to the probe (engine.probe.journal_lane) leaves the probe as the journal's own path does.

A serving agent that does not record hands each journal event to its probe one call deep, a held event's
part of publish() in line. Real agent (a Pipeline serving its probe), real socket and ring, the inspector's
real live source on the fold stream: the same turns through the lane and through the journal's own methods
(Journal.append, the Pipeline's subscriber, publish) leave the same held marks, held closes and sends, and the
inspector shows the agent's own traces either way.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engine.probe.fold_send import LONG_WAIT
from tests.support.fold_stream import assert_shown_as_sent, fold_pipeline, fold_stream, wait_until
from tests.test_probe_fold import _turn

LANE = ("append", "append_deferred")


def _settled(probe: Any) -> None:
    """Until the I/O thread, about to sleep with nothing due, has named the fold client for publish()'s
    straight path again (so the next turn takes that path, in either run)."""
    wait_until(
        lambda: probe._ring_one is not None and not probe._wake_pending,
        "the fold client was never named again",
    )


def _run(rtdir: Path, lane: bool) -> tuple[int, ...]:
    with fold_stream(rtdir, record=False) as fs:
        journal, probe = fs.pipe.journal, fs.probe
        assert all(name in vars(journal) for name in LANE), "a serving agent that does not record has no lane"
        if not lane:
            for name in LANE:
                del vars(journal)[name]  # the journal's own methods: its subscriber, then publish()
        # No clock in what is compared: every close sent at once, every held event marked.
        probe.fold_coalesce = 0.0
        probe.mark_gap = 0.0
        _settled(probe)
        holds, closes, sends = probe._holds, probe.fold_closes_held, probe.agent_sends
        for t in range(2, 10):
            if t == 8:
                # A model call longer than LONG_WAIT (by the journal's times): the next turn's request goes
                # at once (fold_send, "Before a long wait"), a send of its own; its quick outcome undoes it.
                req = fs.pipe.next_request()
                time.sleep(LONG_WAIT + 0.1)
                fs.pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10})
                calls = fs.pipe.assistant("step 8", [{"id": "c8", "name": "bash", "arguments": "{}"}])
                fs.pipe.tool_result(calls[0].id, "output of step 8")
            else:
                _turn(fs.pipe, t)
            if t == 5:
                # A close held back (as within fold_coalesce of the last send): it waits for the next.
                probe.fold_coalesce = 3600.0
            elif t == 6:
                probe.fold_coalesce = 0.0
            _settled(probe)
        fs.view.wait_for(9)
        # (Not the reader's ring.held(): how many the agent held when it held the newest, if nothing was
        # written since, a moment's state that depends on when the I/O thread last wrote: 56 or 63.)
        counts = (
            probe._holds - holds,
            probe.fold_closes_held - closes,
            probe.agent_sends - sends,
            probe.publish_errors,
        )
        assert_shown_as_sent(fs, list(range(10)))
        return counts


def test_the_lane_leaves_the_probe_as_the_journals_own_path_does(rtdir: Path) -> None:
    lane = _run(rtdir, lane=True)
    general = _run(rtdir, lane=False)
    assert lane == general
    held, closes_held, sends, errors = lane
    assert (held > 8 * 4, closes_held, sends, errors) == (True, 2, 7, 0), lane


def test_a_later_subscriber_takes_the_lane_off_and_gets_every_event(rtdir: Path) -> None:
    """An exporter that subscribes after the probe (OpenTelemetry, opened after the sinks) gets every event,
    the turn's close built for it, as it did before the lane: the journal's own methods again."""
    pipe = fold_pipeline(rtdir, record=None)
    try:
        journal = pipe.journal
        assert all(name in vars(journal) for name in LANE)
        got: list[dict[str, Any]] = []
        journal.subscribe(got.append)
        start = len(journal.events)
        _turn(pipe, 0)
        _turn(pipe, 1)
        assert got == list(journal.events)[start:]
        assert [ev["turn"] for ev in got if ev["k"] == "turn"] == [0, 1]
    finally:
        pipe.close()


def test_a_recording_agent_hands_its_events_on_as_before(rtdir: Path) -> None:
    """The lane is for an agent whose one sink is its probe: a recording agent's events go through its
    recorder (which encodes each once for the file and the probe) as before."""
    pipe = fold_pipeline(rtdir, record=str(rtdir.parent / "a.cpsession"))
    try:
        assert pipe.recorder is not None
        assert not any(name in vars(pipe.journal) for name in LANE)
    finally:
        pipe.close()
