"""`cp-inspect ps` when the probe's runtime directory is not safely ours: one line that says what is
wrong and how to fix it, exit 1 (it was a PermissionDenied traceback; `attach` and `top` already said it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app


@pytest.mark.parametrize("args", [["ps"], ["ps", "--json"]])
def test_ps_with_a_runtime_directory_open_to_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    args: list[str]) -> None:
    rtdir = tmp_path / "contextpipe"
    rtdir.mkdir()
    os.chmod(rtdir, 0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert f"{rtdir} has mode 0755" in res.output and f"chmod 700 {rtdir}" in res.output
    assert "Traceback" not in res.output


def test_ps_with_an_agent_that_does_not_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stopped agent (SIGSTOP, a debugger): its row said "None None None" and nothing of why; now
    "-" for what it could not say, and that it is not answering."""
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    rt = Path(tempfile.mkdtemp(prefix="cpps-", dir="/tmp"))  # a Unix socket path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    agent = subprocess.Popen([sys.executable, "-m", "inspector.demo_agent", "--serve", "--turns", "400",
                              "--delay", "0.5"], env={**os.environ, "XDG_RUNTIME_DIR": str(rt)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sock = rt / "contextpipe" / f"{agent.pid}.sock"
        give_up = time.monotonic() + 20
        while not sock.exists() and time.monotonic() < give_up:
            time.sleep(0.05)
        assert sock.exists()
        agent.send_signal(signal.SIGSTOP)
        res = CliRunner().invoke(app, ["ps"])
        assert res.exit_code == 0, res.output
        row = next(line for line in res.output.splitlines() if line.split()[0] == str(agent.pid))
        assert "None" not in row and row.split()[1:4] == ["-", "-", "-"], row
        assert "[not answering: " in row and "stopped or busy" in row, row
    finally:
        agent.kill()
        agent.wait()
        import shutil

        shutil.rmtree(rt, ignore_errors=True)
