"""`cp-inspect top` over a long-running proxy whose agent has exited: the proxy serves the conversation on
(its probe socket, its recording), so its row read "live" for as long as the proxy ran, and the summary
"1 live agent", beside agents that do run. The row now says "agent gone" once the process that made the
conversation's calls has exited, the summary counts it ended, and Enter still attaches. A real proxy (in
this process) in front of the stand-in, and a real agent process on the openai SDK."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the proxy needs aiohttp (installed by the project's dependencies)")

from textual.coordinate import Coordinate  # noqa: E402

from engine.capture.proxy.recording import Recorder  # noqa: E402
from engine.capture.proxy.server import ProxyServer  # noqa: E402
from engine.fleet import AGENT_GONE  # noqa: E402
from engine.probe.watch import FleetWatcher  # noqa: E402
from inspector.top_app import TopApp  # noqa: E402
from panels.fleet_table import FleetTable  # noqa: E402
from tests.capture.standin import StandIn  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 120.0  # a hang guard: what it waits for takes a second or two


@pytest.fixture
def proxy_url(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    rt = tmp_path_factory.mktemp("rt")  # the probe sockets' directory (a short path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    standin = StandIn().start()
    rec = Recorder(tmp_path_factory.mktemp("rec"), serve=True)
    server = ProxyServer({"openai": standin.url}, rec).start()
    try:
        yield server.url
    finally:
        server.stop()
        rec.close()
        standin.stop()


def _agent(url: str, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_BASE_URL": url + "/v1"}
    return subprocess.Popen([sys.executable, "-m", "tests.capture.script_agent", *args], env=env)


def _until(check: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_proxy_conversation_whose_agent_exited_is_not_shown_live(proxy_url: str) -> None:
    pid = os.getpid()  # (the proxy runs in this process)
    agent = _agent(proxy_url, "--turns", "2")
    assert agent.wait(WAIT_S) == 0
    watcher = FleetWatcher().start()
    try:
        _until(lambda: [a.state for a in watcher.snapshot()] == [AGENT_GONE], "the row to say agent gone")
        (row,) = watcher.snapshot()
        assert row.target == f"{pid}.1" and row.turns == 2, row
        assert row.detail == (
            f"its agent (pid {agent.pid}) has exited; the proxy keeps the conversation and "
            "its recording (Enter attaches)"
        ), row.detail

        async def shown() -> tuple[str, str, str | None]:
            app = TopApp(watcher, refresh_s=0.2)
            async with app.run_test(size=(140, 12)) as pilot:
                await pilot.pause(0.5)
                table = app.query_one(FleetTable)
                column = [c.label.plain for c in table.columns.values()].index("STATE")
                state = str(table.get_cell_at(Coordinate(0, column)))
                summary = str(app.query_one("#summary").render())
                await pilot.press("enter")  # still attachable: top hands the target over
                await pilot.pause()
            return state, summary, app.return_value

        async def drawn() -> str:
            """The row as drawn at 80 columns (its STATE column, 9 cells, read "agent gon")."""
            app = TopApp(watcher, refresh_s=0.2)
            async with app.run_test(size=(80, 12)) as pilot:
                await pilot.pause(0.5)
                return app.query_one(FleetTable).render_line(1).text

        state, summary, picked = asyncio.run(shown())
        assert state == AGENT_GONE, state
        row_drawn = asyncio.run(drawn())
        assert f" {AGENT_GONE} " in f"{row_drawn} ", row_drawn
        assert summary.startswith("0 live agents, 1 ended"), summary
        assert picked == f"{pid}.1"
    finally:
        watcher.stop()


def test_a_conversation_whose_agent_runs_stays_live(proxy_url: str) -> None:
    agent = _agent(proxy_url, "--turns", "60", "--delay", "0.5")
    watcher = FleetWatcher().start()
    try:
        _until(lambda: [a.turns >= 2 for a in watcher.snapshot()] == [True], "two turns")
        watcher.scan()  # (a scan looks at the agent's process again)
        assert [a.state for a in watcher.snapshot()] == ["live"]
    finally:
        agent.kill()
        agent.wait()
        watcher.stop()
