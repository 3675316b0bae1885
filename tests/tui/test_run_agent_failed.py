"""`cp-inspect run` with the TUI over an agent that fails (exits with status 3), in a real terminal (tmux),
as a person meets it: the status line said "Agent disconnected", a connection lost, though the run knew
the agent's exit status; and once q was pressed, the summary on the terminal said nothing of it. Now the
banner says "Agent exited with status 3" and the summary says it beside where the agent's output is."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.capture.conftest import verify_ok
from tests.capture.standin import StandIn
from tests.capture.test_run_tmux import _end_tmux, _start_run, _tmux, _wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux to drive a real terminal")


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    s = StandIn().start()
    yield s
    s.stop()


def test_run_of_a_failing_agent_says_its_exit_status_on_screen_and_after(
    standin: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> None:
    rtdir = tmp_path_factory.mktemp("rt")  # (a short path: Unix socket paths are limited)
    rec = tmp_path_factory.mktemp("rec")
    name = f"cpfail-{uuid.uuid4().hex[:8]}"
    sock = rtdir / "tmux"
    agent = f"{sys.executable} -m tests.capture.script_agent --turns 3 --delay 0.3 --exit 3"
    _start_run(sock, name, rec, rtdir, standin, agent, "echo EXIT=$?; sleep 300")
    try:
        _wait_for(sock, name, "You are a script agent.")
        screen = _wait_for(sock, name, "Agent exited with status 3")
        head = screen.splitlines()[0]
        assert "ENDED" in head and "3 turns kept" in head, head
        assert "disconnected" not in screen, screen
        subprocess.run(_tmux(sock, "send-keys", "-t", name, "q"), check=True)
        screen = _wait_for(sock, name, "EXIT=", timeout=120)
        assert "EXIT=3" in screen, screen
        said = " ".join(screen.split())  # (the pane wraps long lines)
        assert "cp-inspect: the agent exited with status 3; its output is in " in said, screen
    finally:
        _end_tmux(sock, name)
    (recording,) = rec.glob("*.cpsession")
    assert verify_ok(recording) == 3
