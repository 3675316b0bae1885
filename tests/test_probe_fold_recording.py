"""What `cp-inspect attach` shows of a paced agent is what the same session's recording shows, turn by turn.

The fold stream (engine.probe.elide.fold_out) ships the journal's events and the inspector rebuilds each
turn itself; the agent's thread sends a paced turn from publish() (agent_send._fold_now), closes that come
closer together than FOLD_COALESCE wait for the next, and what waits at a pause is asked for after the
inspector's idle. Whatever path a turn took, the attached view must show the turn the recording does.
Real agent (a Pipeline serving its probe, paced as one waiting on its model), real socket and ring, the
real live source folding the stream as `cp-inspect attach` does, and the real replay source
(inspector/sources/file.py) on the recording: per turn the trace, the request body, every section's
content and why the cache missed. A recording agent's recording is its own (its frames ride along to the
probe); an agent that does not record has the same journal written to a recording once it is closed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from engine.probe.agent_send import AGENT_WINDOW
from engine.recording.cpsession import RecordingWriter
from inspector.sources.file import FileSource
from inspector.sources.live_recording import RecordingFollower, open_live
from tests.support.fold_stream import attach_folding, fold_pipeline, wait_until
from tests.test_probe_fold import T, _Follower, _turn

IDLE = 0.15  # the inspector's backfill_idle: what a paced agent holds back comes within it of a pause


def _session(pipe: Any, turns: list[int]) -> None:
    """Paced turns of several shapes: annotated or not, an error, a window change, results long enough
    to compact and to spill, back to back now and then (closes coalesced), with pauses (held events)."""
    for t in turns:
        shape = t % 7
        if shape == 3:
            pipe.set_window(60_000)
        big = 12_000 if shape == 5 else 2_000 if shape == 2 else 40
        _turn(pipe, t, big, note=shape in (1, 4), error=shape == 6)
        time.sleep(0 if shape == 0 else IDLE * 2 if shape == 4 else AGENT_WINDOW / 4)


def _record_journal(pipe: Any, hello: dict[str, Any], path: Path) -> None:
    """The agent's journal as a recording, as its own recorder would have written it (its header is the
    one the probe's hello carries)."""
    header = {k: hello[k] for k in ("model", "provider", "engine_version", "start_time")}
    with RecordingWriter(path, header, counter=pipe.counter) as w:
        for ev in pipe.journal.events:
            w.append(ev)


@pytest.mark.parametrize("record,follow", [(False, False), (True, False), (True, True)])
def test_the_attached_view_of_a_paced_agent_is_its_recording_turn_by_turn(
    rtdir: Path, record: bool, follow: bool
) -> None:
    """follow: `cp-inspect attach`'s source (open_live) on a recording agent reads the turns from the
    recording itself (inspector/sources/live_recording.py): the agent publishes nothing for it."""
    path = rtdir.parent / f"session-{record}.cpsession"
    pipe = fold_pipeline(rtdir, record=str(path) if record else None)
    probe = pipe.probe
    closed = False
    try:
        _turn(pipe, 0)
        src: Any
        if follow:
            src, why = open_live(os.getpid(), timeout=T, backfill_idle=IDLE)
            assert why is None and isinstance(src, RecordingFollower)
            wait_until(lambda: probe._nfollowers == 1, "the follower never said hello")
            assert probe.client_count == 0  # not attached: publish() returns at its first test
            view = _Follower(src)  # type: ignore[arg-type]  # (a follower answers what a LiveSource does)
        else:
            src, view = attach_folding(pipe, IDLE)
        turns = list(range(1, 22))
        sends = probe.agent_sends
        _session(pipe, turns)
        pipe.close_turn()
        view.wait_for(turns[-1])
        if follow:
            # Nothing was sent, queued or encoded for it on any thread.
            assert probe.agent_sends == sends == 0 and probe.agent_writes == 0
            assert not probe._pending and probe.client_count == 0
        else:
            # The paced turns went from publish() on the agent's thread (not all by the I/O thread).
            assert probe.agent_sends > sends
            assert src.asked_traces == 0  # every turn rebuilt from the stream, none asked of the agent
        shown = {
            t: (
                dict(src.full_trace(t)),
                src.request_body(t),
                {s["id"]: src.section_content(t, s["id"]) for s in src.full_trace(t)["sections"]},
                src.why_missed(t),
            )
            for t in turns
        }
        view.stop()
        pipe.close()
        closed = True
        if not record:
            _record_journal(pipe, probe._hello, path)
        rec = FileSource(path)
        try:
            for t in turns:
                trace, body, sections, missed = shown[t]
                want: dict[str, Any] = dict(rec.full_trace(t))
                assert trace == want, t
                assert list(trace) == list(want), t  # key order too
                assert body == rec.request_body(t), t
                assert sections == {s["id"]: rec.section_content(t, s["id"]) for s in want["sections"]}, t
                assert missed == rec.why_missed(t), t
        finally:
            rec.close()
    finally:
        if not closed:
            pipe.close()
