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
from pathlib import Path

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


def _joined(sock: Path, name: str) -> str:
    """The pane's text with the lines the terminal wrapped joined again (tmux's -J), spaces normalised."""
    out = subprocess.run(
        _tmux(sock, "capture-pane", "-p", "-J", "-t", name), capture_output=True, text=True, timeout=30
    ).stdout
    return " ".join(out.split())


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
        said = _joined(sock, name)
        assert "cp-inspect: the agent exited with status 3; its output is in " in said, said
    finally:
        _end_tmux(sock, name)
    (recording,) = rec.glob("*.cpsession")
    assert verify_ok(recording) == 3


def test_run_of_an_agent_that_fails_before_any_call_says_its_status_once(
    standin: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The run's summary said the exit status, then said it again beside the output's file."""
    rtdir = tmp_path_factory.mktemp("rt")
    rec = tmp_path_factory.mktemp("rec")
    name = f"cpfail0-{uuid.uuid4().hex[:8]}"
    sock = rtdir / "tmux"
    _start_run(
        sock,
        name,
        rec,
        rtdir,
        standin,
        f"{sys.executable} -c 'import sys; sys.exit(2)'",
        "echo EXIT=$?; sleep 300",
    )
    try:
        _wait_for(sock, name, "EXIT=", timeout=120)
        said = _joined(sock, name)
    finally:
        _end_tmux(sock, name)
    assert "EXIT=2" in said, said
    assert "the agent exited with status 2 before making one (its output says why)" in said, said
    assert said.count("exited with status 2") == 1, said
    assert "cp-inspect: the agent's output is in " in said, said
