"""How an agent that failed is said to have ended: one wording (inspector.agent_end) for `run`'s and `demo`'s
child (its return code) and `attach`'s zombie (its wait status), which the status line reads back as a
failure. A real-time signal (SIGRTMIN+1, 35: valid, so it ends a process, but signal.Signals has no name
for it) made `run`'s summary raise ValueError, and `run`'s and `attach`'s two copies of the wording
said an unnamed signal two ways ("ended (-35)", "was ended by signal 35")."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.attach_command import process_ended
from inspector.cli import app
from inspector.proxy_cli import agent_ended

RT_SIGNAL = signal.SIGRTMIN + 1  # (35 on Linux: no name in signal.Signals)


def _zombie(code: int | None, sig: int | None) -> subprocess.Popen[bytes]:
    """A child that exits with `code` or is ended by `sig`, left unreaped (a zombie, as `attach` finds an
    agent its parent has not waited for yet)."""
    if sig is not None:
        argv = [sys.executable, "-c", f"import os; os.kill(os.getpid(), {sig})"]
    else:
        argv = [sys.executable, "-c", f"import sys; sys.exit({code})"]
    child = subprocess.Popen(argv)
    stat = Path(f"/proc/{child.pid}/stat")
    while stat.read_bytes().rsplit(b")", 1)[-1].split()[:1] != [b"Z"]:  # (until it has ended)
        time.sleep(0.01)
    return child


@pytest.mark.parametrize(
    "code, sig, said",
    [
        (3, None, "the agent exited with status 3"),
        (None, signal.SIGKILL, "the agent was ended by SIGKILL"),
        (None, RT_SIGNAL, f"the agent was ended by signal {RT_SIGNAL}"),
    ],
)
def test_attach_and_run_say_an_agents_end_alike_and_the_status_line_reads_it_as_a_failure(
    tmp_path: Path, code: int | None, sig: int | None, said: str
) -> None:
    from inspector.status import failed_head

    child = _zombie(code, sig)
    try:
        attached = process_ended(child.pid)()  # (read from /proc while it is a zombie)
    finally:
        child.wait()
    ran = agent_ended(child, tmp_path / "agent.log")
    assert attached == said, attached
    assert ran == f"{said} (its output: {tmp_path / 'agent.log'})", ran
    head = failed_head(ran)
    assert head is not None and head == failed_head(attached), (head, failed_head(attached))
    assert head == "Agent " + said.removeprefix("the agent ").replace("was ended by", "ended by"), head


def test_run_says_an_agent_ended_by_a_signal_with_no_name(tmp_path: Path) -> None:
    """`cp-inspect run` whose agent a real-time signal ended before its first call: said, exit 128 + 35."""
    agent = [sys.executable, "-c", f"import os; os.kill(os.getpid(), {RT_SIGNAL})"]
    r = CliRunner().invoke(app, ["run", "--no-tui", "--record-dir", str(tmp_path / "rec"), "--", *agent])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 128 + RT_SIGNAL, r.output
    assert f"the agent was ended by signal {RT_SIGNAL} before making one" in r.output, r.output
    assert not (tmp_path / "rec").exists()  # (nothing recorded, nothing left)
