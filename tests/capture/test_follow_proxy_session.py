"""A proxy session's inspector follows the session's recording (the proxy records every conversation it
serves): its probe offers the file (engine/capture/proxy/proxy_tap.py), the inspector reads the turns
there and the proxy sends it nothing a turn, through the file's park (its footer written when the
session goes quiet) and its reopening (the footer cut off when the session calls again). Real proxy,
real stand-in upstream, real probe sockets and files."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.server import ProxyServer
from engine.recording.cpsession import RecordingReader
from inspector.sources import NewTurn, Notice
from inspector.sources.live_recording import RecordingFollower, open_live
from tests.capture.standin import StandIn
from tests.capture.test_proxy_files import _call, _recorded


def _wait(cond: Any, what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_proxy_session_is_followed_through_its_files_park_and_reopening(
    standin: StandIn, tmp_path: Path, rtdir: Path
) -> None:
    d = tmp_path / "rec"
    rec = Recorder(d, serve=True, idle_park=0.3)
    server = ProxyServer({"anthropic": standin.url, "openai": standin.url}, rec).start()
    src = None
    try:
        _call(server.url, "a task followed")
        _recorded(rec, 1)
        ((info, tap),) = rec.sessions.values()
        src, why = open_live(os.getpid(), session=info.number, timeout=10)
        assert why is None and isinstance(src, RecordingFollower), why
        assert src.header["recording"] == str(info.path)
        assert tap.pipe is not None
        probe = tap.pipe.probe
        assert probe is not None and probe.client_count == 0  # a follower: nothing is sent to it
        shown = [v["turn"] for c in src.load_chunks() for v in c.traces]
        got: list[Any] = []
        follower = src

        def follow() -> None:
            for ev in follower.follow():
                got.append(ev)

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        writer = tap.pipe.recorder
        assert writer is not None
        _wait(lambda: writer.parked, "the quiet session's file was not parked")
        with RecordingReader.open(info.path) as r:
            assert r.finished  # (its footer written while the inspector follows it)
        time.sleep(0.3)  # (the follower reads the footer)
        _call(server.url, "a task followed", then="and again")
        _recorded(rec, 2)
        _wait(lambda: any(isinstance(e, NewTurn) for e in got), "the second call's turn never came")
        assert shown == [0] and [e.trace["turn"] for e in got if isinstance(e, NewTurn)] == [1]
        assert not [e for e in got if isinstance(e, Notice)] and "follow_stopped" not in src.header
        assert probe.client_count == 0
        assert src.full_trace(1)["turn"] == 1
    finally:
        if src is not None:
            src.close()
        server.stop()
        rec.close()


def test_a_parked_files_footer_cut_off_is_not_taken_for_a_cut_recording(rtdir: Path) -> None:
    """The moment a parked file's writer resumes: its footer cut off (the file back to where its events
    end), the next chunk not yet written. A follower looking then must read on, not fall back to the
    stream as for a recording cut under it (the session's second turn arrives from the file)."""
    from tests.support.fold_stream import fold_pipeline
    from tests.test_probe_fold import _turn

    path = rtdir / "s.cpsession"
    pipe = fold_pipeline(rtdir, record=str(path))
    src = None
    try:
        _turn(pipe, 0)
        src, why = open_live(os.getpid(), timeout=10)
        assert why is None and isinstance(src, RecordingFollower), why
        list(src.load_chunks())
        got: list[Any] = []
        follower = src
        thread = threading.Thread(target=lambda: got.extend(follower.follow()), daemon=True)
        thread.start()
        assert pipe.recorder.park()
        _wait(lambda: follower.reader.finished, "the follower never read the footer")
        data_end = follower.reader.data_end
        footer = path.read_bytes()[data_end:]
        os.truncate(path, data_end)  # (as the writer's resume does first)
        time.sleep(0.5)  # the follower looks several times (every 0.1 s at most when quiet)
        assert "follow_stopped" not in src.header, src.header["follow_stopped"]
        with open(path, "ab") as f:  # (the file as parked again: the writer resumes it as its own)
            f.write(footer)
        _turn(pipe, 1)
        _wait(lambda: any(isinstance(e, NewTurn) for e in got), "the second turn never came")
        assert "follow_stopped" not in src.header and not [e for e in got if isinstance(e, Notice)]
    finally:
        if src is not None:
            src.close()
        pipe.close()
