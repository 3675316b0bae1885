"""`cp-inspect run -- CMD` with a CMD that cannot be started says so before the proxy starts: it
started the proxy, printed 'proxy on http://...' as if all were well, left a proxy log in the record
directory, and only then said it could not start the agent."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    "program, why",
    [("no-such-agent-cmd-b34", "no such command on PATH"), ("/nonexistent/agent", "no such file")],
)
def test_unstartable_command_is_said_before_the_proxy(tmp_path: Path, program: str, why: str) -> None:
    rec = tmp_path / "rec"
    r = runner.invoke(app, ["run", "--no-tui", "--record-dir", str(rec), "--", program, "-t", "x"])
    assert r.exit_code == 1, r.output
    assert f"cannot start {program!r}: {why}" in r.output
    assert "proxy on" not in r.output
    assert not rec.exists() or not any(rec.iterdir())  # no proxy log left behind


def test_a_file_that_is_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    r = runner.invoke(app, ["run", "--no-tui", "--record-dir", str(tmp_path / "rec"), "--", str(script)])
    assert r.exit_code == 1 and "not an executable file" in r.output, r.output


@pytest.mark.parametrize("agent", [["true"], ["sh", "-c", "exit 3"]])
def test_a_run_that_recorded_nothing_leaves_nothing(tmp_path: Path, agent: list[str]) -> None:
    """`cp-inspect run -- true` (an agent that made no model call: failed first, or did not read the base
    URL) left a record directory holding only the proxy's log of its banner, in the directory it ran in."""
    rec = tmp_path / "rec"
    r = runner.invoke(app, ["run", "--no-tui", "--record-dir", str(rec), "--", *agent])
    assert r.exit_code == (3 if "exit 3" in agent else 0), r.output
    assert "no model calls went through the proxy" in r.output
    assert not rec.exists(), list(rec.iterdir())
    rec.mkdir()  # a record directory that was there before stays, without the log
    (rec / "kept.cpsession").write_text("")
    r = runner.invoke(app, ["run", "--no-tui", "--record-dir", str(rec), "--", *agent])
    assert sorted(p.name for p in rec.iterdir()) == ["kept.cpsession"], r.output
