"""What an attached inspector says when its agent ends: the end's toast waits for how the agent ended
(inspector/arrivals.py) and says it ("Agent pid N disconnected" over an agent that had run to its end
read as a connection lost), and `attach` knows the agent's exit status while its parent has not reaped
it (inspector/attach_command.process_ended). Real processes; the app on a synthetic live source."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from inspector.attach_command import process_ended
from inspector.messages import SourceDisconnected
from inspector.sources.synthetic import SyntheticSource
from inspector.status import EXITED, FINISHED
from tests.tui.conftest import settle


def _exited(code: str) -> subprocess.Popen[bytes]:
    """A child that exits at once and is left unreaped (a zombie) until the caller waits for it."""
    child = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 30
    while True:
        with open(f"/proc/{child.pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[-1].split()[:1] == [b"Z"]:
                return child
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("pass", FINISHED),
        ("import sys; sys.exit(3)", "the agent exited with status 3"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "the agent was ended by SIGKILL"),
    ],
)
def test_attach_says_the_status_of_an_agent_its_parent_has_not_reaped(code: str, said: str) -> None:
    child = _exited(code)
    try:
        assert process_ended(child.pid)() == said
        assert process_ended(child.pid, session=2)() != said  # (a session's process: the session ended)
    finally:
        child.wait()
    assert process_ended(child.pid)() == EXITED  # reaped: gone, its status not known here


def test_a_running_agent_has_not_ended() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert process_ended(child.pid)() is None
    finally:
        child.kill()
        child.wait()


async def _ended_with(ended: str | None) -> tuple[str | None, list[str]]:
    """The app on a live agent that goes away, told `ended` when it asks how: (what its status line's
    disconnected is then, the toasts)."""
    from inspector.app import InspectorApp

    src = SyntheticSource(12, live=True, initial=12, delay=0.01, disconnect=False)
    src.header |= {"recording": "/tmp/rec/agent.cpsession"}
    app = InspectorApp(src)
    asks: list[int] = []

    def agent_ended() -> str | None:
        asks.append(1)
        return ended if len(asks) > 2 else None  # (the socket closes a moment before the process ends)

    app.agent_ended = agent_ended
    async with app.run_test(size=(200, 40), notifications=True) as pilot:
        await settle(pilot)
        app.post_message(SourceDisconnected("agent pid 4242 disconnected"))
        for _ in range(200):
            await pilot.pause(0.05)
            if app.agent_ended is None:
                break
        await settle(pilot)
        return app.disconnected, [n.message for n in app._notifications]


async def test_an_agent_that_exited_is_not_said_to_have_disconnected() -> None:
    disconnected, told = await _ended_with(EXITED)
    assert disconnected == EXITED
    assert told == ["The agent's process has ended. 12 turns kept; the agent's recording is kept at "
                    "/tmp/rec/agent.cpsession."], told
    disconnected, told = await _ended_with(FINISHED)
    assert disconnected == FINISHED and told[0].startswith("The agent exited with status 0. 12 turns kept;")


async def test_an_agent_still_there_is_said_to_have_disconnected_and_a_failure_is_said(tmp_path: Path) -> None:
    disconnected, told = await _ended_with(None)  # (the process is there when the asking stops)
    assert disconnected == "agent pid 4242 disconnected"
    assert told == ["Agent pid 4242 disconnected. 12 turns kept; the agent's recording is kept at "
                    "/tmp/rec/agent.cpsession."], told
    # an attached agent its parent has not reaped yet: its status is known, and said (not "disconnected")
    disconnected, told = await _ended_with("the agent exited with status 3")
    assert disconnected == "the agent exited with status 3"
    assert told == ["The agent exited with status 3. 12 turns kept; the agent's recording is kept at "
                    "/tmp/rec/agent.cpsession."], told
