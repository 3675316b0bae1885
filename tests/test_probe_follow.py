"""Following a recording agent's recording instead of being sent its turns (engine.probe.handshake,
"Following the recording"; inspector/sources/live_recording.py): the agent publishes nothing for such a
client; a file the inspector must not trust, an agent that does not record, a recording that stops or
is cut while followed, each falls back to today's live stream and loses no turn. Real agents (Pipelines
serving their probe), real sockets and files."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from engine.probe.client import ProbeClient
from engine.probe.server import ProbeServer
from engine.recording.cpsession import RecordingError, RecordingWriter
from inspector.sources.live import LiveSource
from inspector.sources.live_recording import RecordingFollower, open_live
from tests.support.fold_stream import fold_pipeline, wait_until
from tests.test_probe_fold import T, _Follower, _turn

HELLO = {"model": "claude-sonnet-4", "provider": "anthropic", "engine_version": "0.2.0", "start_time": 1234.5}


def _recording(path: Path, header: dict[str, Any] = HELLO) -> Path:
    with RecordingWriter(path, {k: header[k] for k in ("model", "provider", "start_time")}) as w:
        w.append({"k": "turn", "turn": 0, "trace": {"turn": 0}})
    return path


def test_a_follower_is_sent_nothing_and_still_answered(rtdir: Path) -> None:
    path = rtdir.parent / "s.cpsession"
    pipe = fold_pipeline(rtdir, record=str(path))
    try:
        _turn(pipe, 0)
        c = ProbeClient.connect(
            os.getpid(), timeout=T, poll=True, follow=True, lean=True, elide=True, fold=True
        )
        try:
            assert c.following and c.hello["recording"] == str(path) and c.hello["snapshot"] == 0
            wait_until(lambda: pipe.probe._nfollowers == 1, "no follower")
            for t in range(1, 6):
                _turn(pipe, t)
            assert pipe.probe.client_count == 0 and not pipe.probe._pending
            assert c.ping()
            assert c.recv(T, on_socket=True) == {"k": "pong"}  # no event came before the pong
        finally:
            c.close()
        wait_until(lambda: pipe.probe._nfollowers == 0, "the follower was not let go")
    finally:
        pipe.close()


def test_an_agent_that_does_not_record_is_attached_as_before(rtdir: Path) -> None:
    pipe = fold_pipeline(rtdir, record=None)
    try:
        _turn(pipe, 0)
        src, why = open_live(os.getpid(), timeout=T)
        try:
            assert why is None and type(src) is LiveSource and src._folding and not src.client.following
            wait_until(lambda: pipe.probe.client_count == 1, "not attached")
        finally:
            src.close()
    finally:
        pipe.close()


def _hostile(rtdir: Path, name: str) -> tuple[Any, str]:
    """(what the hello names as the recording, the words the refusal must hold)."""
    d = rtdir.parent
    if name == "symlink":
        real = _recording(d / "real.cpsession")
        (d / "link.cpsession").symlink_to(real)
        return str(d / "link.cpsession"), "symbolic link"
    if name == "fifo":
        os.mkfifo(d / "fifo.cpsession")
        return str(d / "fifo.cpsession"), "not a regular file"
    if name == "devzero":
        return "/dev/zero", "not a regular file"
    if name == "missing":
        return str(d / "gone.cpsession"), "cannot be read here"
    if name == "relative":
        return "s.cpsession", "not an absolute path"
    if name == "other_session":
        return str(
            _recording(d / "other.cpsession", {**HELLO, "start_time": 99.0})
        ), "not this agent's recording"
    if name == "not_a_recording":
        (d / "huge.cpsession").write_bytes(b"\0" * (4 << 20))
        return str(d / "huge.cpsession"), "cannot be read"
    assert name == "other_user"
    if os.getuid() != 0:
        pytest.skip("needs root to give a file to another user")
    p = _recording(d / "theirs.cpsession")
    os.chown(p, 65534, 65534)
    return str(p), "belongs to uid 65534"


@pytest.mark.parametrize(
    "name",
    ["symlink", "fifo", "devzero", "missing", "relative", "other_session", "not_a_recording", "other_user"],
)
def test_a_recording_the_inspector_must_not_trust_is_not_followed(rtdir: Path, name: str) -> None:
    named, words = _hostile(rtdir, name)
    events: list[dict[str, Any]] = [{"k": "turn", "turn": 0, "trace": {"turn": 0}}]
    server = ProbeServer({**HELLO, "recording": named}, lambda: events)
    server.follow_recording = True
    server.start()
    try:
        src, why = open_live(os.getpid(), timeout=T, fold=False)
        try:
            assert type(src) is LiveSource and not src.client.following
            assert why is not None and words in why and why.endswith("its turns are sent live instead"), why
            # Attached as before, on its second connection: the snapshot came whole.
            wait_until(lambda: server.client_count == 1 and server._nfollowers == 0, "not attached")
            assert [t["turn"] for t in src.load_initial()] == [0]
        finally:
            src.close()
    finally:
        server.close()


def _follow(rtdir: Path, path: Path) -> tuple[Any, RecordingFollower, _Follower]:
    pipe = fold_pipeline(rtdir, record=str(path))
    for t in range(3):
        _turn(pipe, t)
    src, why = open_live(os.getpid(), timeout=T)
    assert why is None and isinstance(src, RecordingFollower)
    view = _Follower(src)  # type: ignore[arg-type]
    wait_until(lambda: pipe.probe._nfollowers == 1, "no follower")
    return pipe, src, view


def _shown_once_each(view: _Follower, last: int) -> None:
    view.wait_for(last)
    seen = [t["turn"] for t in view.turns]
    assert seen == list(range(last + 1)), seen


@pytest.mark.parametrize(
    "trouble",
    [
        pytest.param(
            "stopped",
            marks=pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full (writes fail ENOSPC)"),
        ),
        "truncated",
    ],
)
def test_a_recording_that_goes_wrong_while_followed_loses_no_turn(rtdir: Path, trouble: str) -> None:
    path = rtdir.parent / "s.cpsession"
    pipe, src, view = _follow(rtdir, path)
    try:
        for t in range(3, 6):
            _turn(pipe, t)
        view.wait_for(5)
        if trouble == "stopped":
            # A full disk under the agent's recording: its descriptor now writes to /dev/full, so the
            # recorder's next write fails ENOSPC (Pipeline._publish): the recording stops, the probe's
            # followers are told, and attach again.
            full = os.open("/dev/full", os.O_WRONLY)
            try:
                os.dup2(full, pipe.recorder._fd)
            finally:
                os.close(full)
        else:
            os.truncate(path, 100)
            time.sleep(0.3)  # (looked at before the agent's next write: see _file_trouble)
        for t in range(6, 10):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # "recording stopped, the agent goes on"
                _turn(pipe, t)
            if trouble == "stopped" and t == 6:
                assert isinstance(pipe.recording_error, RecordingError), pipe.recording_error
                wait_until(lambda: pipe.probe.client_count == 1, "the follower did not attach again")
            time.sleep(0.02)
        pipe.close_turn()
        _shown_once_each(view, 9)
        assert src.header.get("follow_stopped")
        # What it shows of a turn after the fall-back is the agent's own trace.
        want = pipe.traces.raw(8)
        want = want if isinstance(want, dict) else want.build()
        assert src.full_trace(8)["request_sha256"] == want["request_sha256"]
        view.stop()
    finally:
        pipe.close()


def test_the_agent_leaving_ends_the_view_after_its_last_turns(rtdir: Path) -> None:
    path = rtdir.parent / "s.cpsession"
    pipe, src, view = _follow(rtdir, path)
    src.texts.budget = 0  # (every text read from the file when it is asked for: see below)
    try:
        moved = path.with_name("moved.cpsession")
        os.rename(path, moved)  # (still the file the agent writes: followed on)
        path.write_bytes(b"not the agent's")  # (and what now has its name is not read)
        for t in range(3, 8):
            _turn(pipe, t)
    finally:
        pipe.close()
    _shown_once_each(view, 7)
    sections = src.full_trace(7)["sections"]
    assert sections and all(isinstance(src.section_content(7, s["id"]), str) for s in sections)
    assert "output of step 6" in src.request_body(7)
    assert src.texts.reads > 0  # read from the agent's file, which no longer has the name it was given
    deadline = time.monotonic() + T
    while view.thread.is_alive():
        assert time.monotonic() < deadline, "follow() did not end when the agent left"
        time.sleep(0.01)
    view.stop()


def test_following_again_and_again_leaves_no_descriptor(rtdir: Path) -> None:
    """Each follower's descriptors (the recording's reader and its text window's, the probe socket, the
    wake-up pair) go when it is closed, after its follow() has run and ended."""
    import gc

    path = rtdir.parent / "s.cpsession"
    pipe = fold_pipeline(rtdir, record=str(path))
    try:
        for t in range(3):
            _turn(pipe, t)
        before = None
        for i in range(5):
            src, why = open_live(os.getpid(), timeout=T)
            assert why is None and isinstance(src, RecordingFollower)
            view = _Follower(src)  # type: ignore[arg-type]
            _turn(pipe, 3 + i)
            view.wait_for(3 + i)
            assert src.full_trace(3 + i)["turn"] == 3 + i  # (the text window's reader opened too)
            view.stop()
            assert not view.thread.is_alive()
            wait_until(lambda: pipe.probe._nfollowers == 0, "the agent kept the follower")
            gc.collect()
            n = len(os.listdir("/proc/self/fd"))
            if before is None:
                before = n
            assert n == before, (i, n, before)
    finally:
        pipe.close()


def test_a_redacting_agent_is_not_followed(rtdir: Path) -> None:
    """Its recording is not redacted, and its hello does not name it: attached live, redacted, no warning."""
    from engine.pipeline import Pipeline

    pipe = Pipeline(
        "claude-sonnet-4",
        "anthropic",
        200_000,
        serve=True,
        redact=True,
        record=str(rtdir.parent / "r.cpsession"),
    )
    try:
        pipe.user("Fix the failing test.")
        _turn(pipe, 0)
        src, why = open_live(os.getpid(), timeout=T)
        try:
            assert why is None and type(src) is LiveSource and not src.client.following
            assert src.client.hello["redacted"] is True and "recording" not in src.client.hello
        finally:
            src.close()
    finally:
        pipe.close()


def test_a_long_history_shows_the_newest_turn_first_then_fills_in(rtdir: Path) -> None:
    """More turns than the first chunk: the newest whole and stand-ins before it, filled in place by
    follow() with what a replay of the recording shows of each turn (HistoryFilled at the end), while a
    turn the agent takes meanwhile still arrives."""
    from inspector.sources import HistoryFilled, NewTurn
    from inspector.sources.file import FileSource
    from inspector.sources.live_recording import FILL_BATCH

    path = rtdir.parent / "s.cpsession"
    pipe = fold_pipeline(rtdir, record=str(path))
    n = FILL_BATCH + 80  # (two batches)
    try:
        for t in range(n):
            _turn(pipe, t, note=False)
        src, why = open_live(os.getpid(), timeout=T)
        assert why is None and isinstance(src, RecordingFollower)
        try:
            chunks = list(src.load_chunks())
            assert len(chunks) == 1
            first = chunks[0].traces
            assert [v["turn"] for v in first] == list(range(n)) and first[-1]["final_tokens"] > 0
            assert all(v["final_tokens"] == 0 for v in first[:-1])  # stand-ins, not yet filled
            events = src.follow()
            _turn(pipe, n, note=False)
            seen: list[Any] = []
            for ev in events:
                seen.append(ev)
                if any(isinstance(e, NewTurn) for e in seen) and any(
                    isinstance(e, HistoryFilled) for e in seen
                ):
                    break
            assert [e.trace["turn"] for e in seen if isinstance(e, NewTurn)] == [n]
            rec = FileSource(path, follow=True)
            try:
                want = [t for c in rec.load_chunks() for t in c.traces][:n]
            finally:
                rec.close()
            assert first == want
        finally:
            src.close()
    finally:
        pipe.close()


async def test_the_inspector_on_a_follower_shows_the_newest_then_the_history_and_new_turns(
    rtdir: Path,
) -> None:
    """The app itself (headless, as `cp-inspect attach` runs it) on a recording agent's follower: the first
    frame at the newest turn, the stand-ins filled, a turn the agent takes after shown when it comes."""
    from inspector.app import InspectorApp
    from inspector.sources.live_recording import FILL_BATCH

    path = rtdir.parent / "s.cpsession"
    pipe = fold_pipeline(rtdir, record=str(path))
    n = FILL_BATCH + 20
    try:
        for t in range(n):
            _turn(pipe, t, note=False)
        src, why = open_live(os.getpid(), timeout=T)
        assert why is None and isinstance(src, RecordingFollower)
        app = InspectorApp(src)
        async with app.run_test(size=(120, 40)) as pilot:
            give_up = time.monotonic() + 4 * T

            async def until(done: Any, what: str) -> None:
                while not done():
                    assert time.monotonic() < give_up, what
                    await pilot.pause(0.05)

            await until(lambda: app.index >= 0 and len(app.view.timeline) == n, "the first frame")
            assert app.view.timeline.traces[app.index]["turn"] == n - 1
            await until(
                lambda: app.view.history is None and app.view.timeline.traces[0]["final_tokens"] > 0,
                "the history filled",
            )
            _turn(pipe, n, note=False)
            await until(lambda: len(app.view.timeline) == n + 1, "the new turn")
            await until(lambda: app.view.timeline.traces[app.index]["turn"] == n, "the view on the new turn")
            await pilot.press("q")
    finally:
        pipe.close()
