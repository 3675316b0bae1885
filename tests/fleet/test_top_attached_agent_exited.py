"""`top`, Enter on an agent that then runs to its end: the status line says "Agent exited", as `attach`
says it (tests/tui/test_attach_exited.py). Seen using `top` on the demo agent and on a `cp-inspect run`
session: the inspector top's Enter opened was not told how to learn that the agent had ended, so an
agent that finished well read as a red "Agent disconnected". A real demo agent serving its probe."""

from __future__ import annotations

import pytest

from inspector.fleet_cli import attach_from_top, inspector_from_top
from inspector.top_app import TopView
from tests.support.served_agent import assert_said_to_have_exited, served_agent


async def test_an_agent_attached_from_top_that_runs_to_its_end_has_exited(monkeypatch: pytest.MonkeyPatch) -> None:
    with served_agent(monkeypatch, 6, 0.3) as agent:
        view = TopView()
        source = attach_from_top(str(agent.proc.pid), view)  # what top's Enter on the agent's row does
        assert source is not None, view.notice
        app = inspector_from_top(source, str(agent.proc.pid))
        await assert_said_to_have_exited(app, agent)
