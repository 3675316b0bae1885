"""`cp-inspect attach PID` to an agent that runs to its end: the status line says "Agent exited", not the
red "Agent disconnected" a connection lost to a running agent shows. `attach` is not the agent's parent,
so it knows the process is gone (attach_command.process_ended), not its exit status."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from inspector.app import InspectorApp
from inspector.attach_command import process_ended
from inspector.sources.live import LiveSource
from inspector.status import EXITED, SESSION_ENDED
from panels.markup_line import MarkupLine
from tests.served_demo import served_demo


def test_process_ended_while_it_runs_as_a_zombie_and_once_reaped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    ended = process_ended(child.pid)
    try:
        assert ended() is None  # running
        assert child.stdin is not None
        child.stdin.close()
        give_up = time.monotonic() + 30
        while ended() is None and time.monotonic() < give_up:
            time.sleep(0.02)  # exited, not reaped yet: a zombie is gone for the person too
        assert ended() == EXITED
    finally:
        child.wait()
    assert ended() == EXITED  # reaped
    # PID.N: the process that ended served the session (a proxy, a parent agent), not the agent itself
    assert process_ended(child.pid, 1)() == SESSION_ENDED
    assert process_ended(os.getpid())() is None and process_ended(os.getpid(), 1)() is None


async def test_an_attached_agent_that_runs_to_its_end_is_said_to_have_exited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rt = Path(tempfile.mkdtemp(prefix="cpx-", dir="/tmp"))  # a Unix socket path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    agent = served_demo(rt, 6, 0.3)
    try:
        app = InspectorApp(LiveSource(agent.pid, fold=True))
        app.agent_ended = process_ended(agent.pid)
        async with app.run_test(size=(120, 40)) as pilot:
            status = ""
            give_up = time.monotonic() + 60
            while "Agent exited" not in status and time.monotonic() < give_up:
                await pilot.pause(0.1)
                if agent.poll() is None:
                    continue  # (reaped as its parent would: a zombie counts as gone too)
                status = app.query_one("#status", MarkupLine).render_line(0).text
            assert "Agent exited" in status and "disconnected" not in status, status
            assert app.disconnected == EXITED
    finally:
        agent.kill()
        agent.wait()
        shutil.rmtree(rt, ignore_errors=True)
