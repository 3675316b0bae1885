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
