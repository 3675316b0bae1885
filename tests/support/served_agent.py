"""A real demo agent serving its probe (tests/served_demo.py) in a runtime directory of its own, and an
inspector attached to it: what the tests of an attached inspector's end share (tests/tui/test_attach_exited.py,
tests/fleet/test_top_attached_agent_exited.py) and of one that follows the agent's recording
(tests/tui/test_followed_recording_removed.py, tests/tui/test_follow_fallback_notice.py)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from inspector.app import InspectorApp
from inspector.attach_command import process_ended
from inspector.sources.live_recording import RecordingFollower, open_live
from panels.markup_line import MarkupLine
from tests.served_demo import served_demo

WAIT_S = 60.0  # for what a few turns at the agent's pace bring: seconds on a loaded machine, never reached


@dataclass
class ServedAgent:
    rt: Path  # its XDG_RUNTIME_DIR
    proc: subprocess.Popen[bytes]
    record: Path | None  # the recording it writes (`--record`), if asked


@contextmanager
def served_agent(
    monkeypatch: pytest.MonkeyPatch, turns: int, delay: float, record: bool = False
) -> Iterator[ServedAgent]:
    """The demo agent (`turns` turns, `delay` s apart; recording to RT/agent.cpsession with `record`), this
    process's XDG_RUNTIME_DIR set to its runtime directory RT; killed and RT removed on the way out."""
    rt = Path(tempfile.mkdtemp(prefix="cpa-", dir="/tmp"))  # a Unix socket path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    path = rt / "agent.cpsession" if record else None
    try:
        proc = served_demo(rt, turns, delay, record=path)
        try:
            yield ServedAgent(rt, proc, path)
        finally:
            proc.kill()
            proc.wait()
    finally:
        shutil.rmtree(rt, ignore_errors=True)


def status_text(app: InspectorApp) -> str:
    return app.query_one("#status", MarkupLine).render_line(0).text


async def status_once_exited(app: InspectorApp, pilot: Pilot[Any], agent: ServedAgent) -> str:
    """The status line once the agent's process has ended (reaped here, as its parent would: a zombie
    counts as gone too) and the app says "Agent exited", or what it says after WAIT_S."""
    status = ""
    give_up = time.monotonic() + WAIT_S
    while "Agent exited" not in status and time.monotonic() < give_up:
        await pilot.pause(0.1)
        if agent.proc.poll() is not None:
            status = status_text(app)
    return status


async def assert_said_to_have_exited(app: InspectorApp, agent: ServedAgent) -> None:
    """Run `app` (attached to `agent`) until the agent has run to its end: the status line says "Agent
    exited", not the red "Agent disconnected", and the app holds it as EXITED."""
    from inspector.status import EXITED, FINISHED

    async with app.run_test(size=(120, 40)) as pilot:
        status = await status_once_exited(app, pilot, agent)
        assert "Agent exited" in status and "disconnected" not in status, status
        # Which of the two depends on who looks first: the app reads the zombie's exit status (FINISHED,
        # status 0) while this test, the agent's parent, has not reaped it yet; once reaped only EXITED is
        # known. Both are an agent that ended (a loaded CI host took the first path, a quiet one the second).
        assert app.disconnected in (EXITED, FINISHED), app.disconnected


async def until(pilot: Pilot[Any], cond: Callable[[], object]) -> None:
    """Until `cond()` holds, or WAIT_S: the caller asserts what it waited for."""
    give_up = time.monotonic() + WAIT_S
    while not cond() and time.monotonic() < give_up:
        await pilot.pause(0.1)


async def wait_for_turns(app: InspectorApp, pilot: Pilot[Any], n: int) -> None:
    """Until the app's timeline holds `n` turns (or WAIT_S)."""
    await until(pilot, lambda: len(app.timeline) >= n)


@dataclass
class FollowedApp:
    agent: ServedAgent
    record: Path
    src: RecordingFollower
    app: InspectorApp
    pilot: Pilot[Any]


@asynccontextmanager
async def followed_app(
    monkeypatch: pytest.MonkeyPatch, turns: int, delay: float
) -> AsyncIterator[FollowedApp]:
    """A recording demo agent and the inspector `cp-inspect attach` opens on it: open_live's follower of
    its recording (asserted), told how to learn the agent ended, running at 120x40 with the first turn
    shown."""
    with served_agent(monkeypatch, turns, delay, record=True) as agent:
        assert agent.record is not None
        src, why = open_live(agent.proc.pid)
        assert why is None and isinstance(src, RecordingFollower), why
        app = InspectorApp(src)
        app.agent_ended = process_ended(agent.proc.pid)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for_turns(app, pilot, 1)
            yield FollowedApp(agent, agent.record, src, app, pilot)
