"""`top`, Enter on an agent that then runs to its end: the status line says "Agent exited", as `attach`
says it (tests/tui/test_attach_exited.py). Seen using `top` on the demo agent and on a `cp-inspect run`
session: the inspector top's Enter opened was not told how to learn that the agent had ended, so an
agent that finished well read as a red "Agent disconnected". A real demo agent serving its probe."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from inspector.fleet_cli import attach_from_top, inspector_from_top
from inspector.status import EXITED
from inspector.top_app import TopView
from panels.markup_line import MarkupLine
from tests.served_demo import served_demo


async def test_an_agent_attached_from_top_that_runs_to_its_end_has_exited(monkeypatch: pytest.MonkeyPatch) -> None:
    rt = Path(tempfile.mkdtemp(prefix="cpe-", dir="/tmp"))  # a Unix socket path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    agent = served_demo(rt, 6, 0.3)
    try:
        view = TopView()
        source = attach_from_top(str(agent.pid), view)  # what top's Enter on the agent's row does
        assert source is not None, view.notice
        app = inspector_from_top(source, str(agent.pid))
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
