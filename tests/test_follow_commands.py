"""`cp-inspect find PID`, `explain PID` and `cp-inspect demo`'s inspector read a recording agent's turns
from its recording (inspector/sources/live_recording.py: open_recorded, open_when_serving), checked as
`attach` checks it, and say the same as over the live stream. Real agents (Pipelines serving their probe,
the demo agent's process), real sockets and files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from engine.recording.cpsession import RecordingReader
from inspector.cli_explain import explain
from inspector.cli_find import find
from inspector.sources import Disconnected, NewTurn
from inspector.sources.live import LiveSource
from inspector.sources.live_recording import RecordingFollower, open_recorded, open_when_serving
from tests.conftest import demo_agent
from tests.support.fold_stream import fold_pipeline, wait_until
from tests.test_probe_fold import T, _turn


def _agent(rtdir: Path, record: bool, turns: int = 12) -> Any:
    pipe = fold_pipeline(rtdir, record=str(rtdir.parent / "s.cpsession") if record else None)
    for t in range(turns):
        _turn(pipe, t, size=5 + t)
    return pipe


def _run(capsys: pytest.CaptureFixture[str], command: Any, *args: Any, **kw: Any) -> tuple[int, str, str]:
    import typer

    code = 0
    try:
        command(*args, **kw)
    except SystemExit as exc:
        code = int(exc.code or 0)
    except typer.Exit as exc:  # (fail()'s)
        code = exc.exit_code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_one_shot_command_reads_a_recording_agents_file(rtdir: Path) -> None:
    """open_recorded: the agent's recording, checked, the connection let go (the agent keeps no
    follower); an agent that does not record: the fold stream, as before."""
    pipe = _agent(rtdir, record=True, turns=3)
    try:
        got, why = open_recorded(os.getpid(), timeout=T)
        try:
            assert why is None and isinstance(got, RecordingReader)
            assert got.turn_numbers() == [0, 1, 2] and got.path == rtdir.parent / "s.cpsession"
        finally:
            got.close()
        wait_until(lambda: pipe.probe._nfollowers == 0, "the agent kept the command's connection")
    finally:
        pipe.close()
    pipe = _agent(rtdir, record=False, turns=3)
    try:
        got, why = open_recorded(os.getpid(), timeout=T)
        try:
            assert why is None and type(got) is LiveSource and not got.client.following
        finally:
            got.close()
    finally:
        pipe.close()


@pytest.mark.parametrize(("fmt", "turns"), [("text", 12), ("json", 12), ("text", 200)])
def test_find_and_explain_pid_say_the_same_from_the_recording_as_from_the_stream(
    rtdir: Path, capsys: pytest.CaptureFixture[str], fmt: str, turns: int
) -> None:
    """The same agent asked twice: following its recording, then (its probe no longer offering the file,
    as an agent from before following answers) over the stream: the same output, byte for byte. At 200
    turns the stream's snapshot is its tail (past TAIL_MIN events): `explain PID` said "no completed
    turns yet" until it fetched the journal to its end, as `find PID` does."""
    pipe = _agent(rtdir, record=True, turns=turns)
    try:
        pid = str(os.getpid())
        as_json = fmt == "json"
        runs: list[list[tuple[int, str, str]]] = []
        for follows in (True, False):
            pipe.probe.follow_recording = follows
            runs.append(
                [
                    _run(capsys, find, pid, "output of step 3", as_json=as_json),
                    _run(capsys, find, pid, "not sent at all", as_json=as_json),
                    _run(capsys, explain, pid, None, fmt=fmt),
                    _run(capsys, explain, pid, "4", "900", fmt=fmt),
                    _run(capsys, explain, pid, "9999", fmt=fmt),
                ]
            )
        followed, streamed = runs
        assert followed == streamed
        (found, _, err), (none, _, _), (explained, text, _), (replanned, _, _), (missing, _, said) = followed
        assert (found, none, explained, replanned, missing) == (0, 1, 0, 0, 2) and err == ""
        assert "turn 9999 is not in" in said
        if as_json:
            assert json.loads(text)["turn"] == turns - 1
        else:
            assert f"turn {turns - 1}" in text.lower()
    finally:
        pipe.close()


def test_find_pid_on_an_untrusted_recording_warns_and_reads_the_stream(
    rtdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording that is not the agent's own any more (replaced under its name): said on stderr, the
    stream read instead, the same listing."""
    pipe = _agent(rtdir, record=True)
    try:
        pid = str(os.getpid())
        code, before, _ = _run(capsys, find, pid, "output of step 3")
        path = rtdir.parent / "s.cpsession"
        os.rename(path, path.with_name("moved.cpsession"))
        path.write_bytes(b"not the agent's")
        code2, after, err = _run(capsys, find, pid, "output of step 3")
        assert (code, code2) == (0, 0) and before == after
        assert err.startswith("cp-inspect: warning: ") and "its turns are sent live instead" in err
    finally:
        pipe.close()


def test_the_demos_inspector_follows_the_demo_agents_recording(tmp_path: Path) -> None:
    """`cp-inspect demo`'s source: the demo agent records, so its inspector follows the file (the agent
    sends it nothing a turn); every turn it shows is the one the stream shows, and the agent's end
    ends it after the last turn."""
    with demo_agent(tmp_path, turns=6, delay=0.4) as child:
        src, why = open_when_serving(child, wait_s=30)
        stream = LiveSource(child.pid, timeout=T, fold=True)  # (attach's stream, as the demo's was)
        try:
            assert why is None and isinstance(src, RecordingFollower)
            assert src.header["recording"] == str(tmp_path / "live.cpsession")
            shown = [v for c in src.load_chunks() for v in c.traces]
            ended = None
            for ev in src.follow():
                if isinstance(ev, NewTurn):
                    shown.append(ev.trace)
                elif isinstance(ev, Disconnected):
                    ended = ev
                    break
            assert ended is not None and [v["turn"] for v in shown] == list(range(6))
            deadline = time.monotonic() + 30
            for ev in stream.follow():  # (the stream's turns, to its end too)
                if isinstance(ev, Disconnected) or time.monotonic() > deadline:
                    break
            for t in range(6):
                assert src.full_trace(t) == stream.full_trace(t), t
        finally:
            src.close()
            stream.close()
