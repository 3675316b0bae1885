"""`cp-inspect attach PID` to an agent that runs to its end: the status line says "Agent exited", not the
red "Agent disconnected" a connection lost to a running agent shows. `attach` is not the agent's parent,
so it knows the process is gone (attach_command.process_ended), not its exit status."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from inspector.app import InspectorApp
from inspector.attach_command import process_ended
from inspector.sources.live import LiveSource
from inspector.status import EXITED, FINISHED, SESSION_ENDED
from tests.support.served_agent import assert_said_to_have_exited, served_agent


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
        assert ended() == FINISHED  # (and its exit status is known until it is reaped: 0)
    finally:
        child.wait()
    assert ended() == EXITED  # reaped
    # PID.N: the process that ended served the session (a proxy, a parent agent), not the agent itself
    assert process_ended(child.pid, 1)() == SESSION_ENDED
    assert process_ended(os.getpid())() is None and process_ended(os.getpid(), 1)() is None


async def test_an_attached_agent_that_runs_to_its_end_is_said_to_have_exited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with served_agent(monkeypatch, 6, 0.3) as agent:
        app = InspectorApp(LiveSource(agent.proc.pid, fold=True))
        app.agent_ended = process_ended(agent.proc.pid)
        await assert_said_to_have_exited(app, agent)
