"""A pid where a recording goes, and a recording where a pid goes: `replay 1234` said only "no such file:
1234", `attach run.cpsession` only "'run.cpsession' is not a pid"; each now says which command takes
what was given (attach watches a running agent, replay steps through a recording)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from inspector import attach_command
from inspector.cli import app

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"


@pytest.mark.parametrize("command", ["replay", "verify", "simulate"])
def test_a_pid_given_as_a_recording_says_attach(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # (no file named 4242 here)
    r = CliRunner().invoke(app, [command, "4242"])
    assert r.exit_code == 1, r.output
    assert (
        r.output == "cp-inspect: no such file: 4242 (an agent's pid? `cp-inspect attach 4242` watches it)\n"
    )
    r = CliRunner().invoke(app, [command, "missing.cpsession"])  # (a file name: no such hint)
    assert r.exit_code == 1 and r.output == "cp-inspect: no such file: missing.cpsession\n", r.output


def test_a_recording_given_to_attach_says_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(DEMO, tmp_path / "run.cpsession")
    want = (
        "cp-inspect: 'run.cpsession' is not a pid: give PID or PID.SESSION as `cp-inspect ps` lists them; "
        "to step through the recording run.cpsession: cp-inspect replay run.cpsession\n"
    )
    # typer's path (with --record) and the plain one the console script takes (attach_command)
    r = CliRunner().invoke(app, ["attach", "run.cpsession", "--record", "saved.cpsession"])
    assert r.exit_code == 2 and r.output == want, r.output
    with pytest.raises(typer.Exit) as exc:
        attach_command.attach("run.cpsession")
    assert exc.value.exit_code == 2 and capsys.readouterr().err == want
    r = CliRunner().invoke(app, ["attach", "nothing-here"])  # (not a file either: as before)
    assert r.exit_code == 2, r.output
    assert (
        r.output
        == "cp-inspect: 'nothing-here' is not a pid: give PID or PID.SESSION as `cp-inspect ps` lists them\n"
    )


@pytest.mark.parametrize("record", [True, False])
def test_a_live_agents_pid_given_as_a_recording_names_its_recording(
    record: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`simulate PID` / `verify PID` of a running agent: the hint sent the person to watch it, when what
    they wanted was the file it writes. A real demo agent serving its probe, recording or not."""
    from tests.support.served_agent import served_agent

    with served_agent(monkeypatch, turns=400, delay=0.5, record=record) as agent:
        monkeypatch.chdir(tmp_path)  # (no file named PID here)
        pid = agent.proc.pid
        for command in ("simulate", "verify"):
            r = CliRunner().invoke(app, [command, str(pid)])
            assert r.exit_code == 1, r.output
            if record:
                want = (f"cp-inspect: no such file: {pid} (agent {pid} records to {agent.record}: give that "
                        f"file; `cp-inspect attach {pid}` watches it)\n")
            else:
                want = (f"cp-inspect: no such file: {pid} (agent {pid} is live and records nothing: "
                        f"`cp-inspect attach {pid}` watches it, and s there saves its turns to a file)\n")
            assert r.output == want, r.output
