"""An attached agent's recording removed while it runs: the end does not say "recording kept at PATH".

Seen attaching to `cp-inspect demo --no-tui --record FILE` and removing FILE: the inspector follows the
recording through its open descriptor (inspector/sources/live_recording.py) and showed every turn, but
when the agent ended the notice and the status line said "recording kept at FILE", a file that was
gone. They now say it was removed and that `s` saves what was received, which works (the follower
reads the descriptor it holds). A real demo agent, a real recording, the real follower.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.recording.cpsession import RecordingReader
from inspector.app import InspectorApp
from inspector.sources.live_recording import RecordingFollower, open_live
from tests.support.served_agent import followed_app, served_agent, status_once_exited, wait_for_turns

TURNS = 6
DELAY = 0.4


async def test_a_recording_removed_while_attached_is_not_said_to_be_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    async with followed_app(monkeypatch, TURNS, DELAY) as f:
        app, record = f.app, f.record
        record.unlink()  # the person removes it; the agent goes on writing it
        status = await status_once_exited(app, f.pilot, f.agent)
        assert "Agent exited" in status, status
        assert len(app.timeline) == TURNS  # every turn came, through the removed file
        said = " ".join(n.message for n in app._notifications)
        assert f"the agent's recording {record} was removed; press s to save them" in said, said
        assert "kept at" not in said and "kept at" not in status, (said, status)
        assert "press s to save" in status, status
        # and `s` can: what was received is saved whole
        saved = f.agent.rt / "saved.cpsession"
        assert app.source.save(saved) == TURNS
        with RecordingReader.open(saved) as r:
            assert len(r.turn_numbers()) == TURNS


def test_the_headless_demo_does_not_say_a_removed_recording_is_kept(tmp_path: Path) -> None:
    record = tmp_path / "demo.cpsession"
    demo = subprocess.Popen(
        [sys.executable, "-m", "inspector.cli", "demo", "--no-tui", "--turns", "8", "--delay", "0.3",
         "--record", str(record)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert demo.stdout is not None
        first = demo.stdout.readline()
        assert first.startswith("demo agent pid"), first
        give_up = time.monotonic() + 60
        while not record.exists() and time.monotonic() < give_up:
            time.sleep(0.02)
        record.unlink()
        out, err = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 0, err
    last = out.strip().splitlines()[-1]
    assert last == f"the recording {record} was removed while the demo ran: nothing is kept", last


async def test_a_recording_it_cannot_follow_is_said_on_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attached after the recording was removed: the agent is attached live (as open_live says), and why
    is said on screen too. It was written to stderr before the app took the screen: seen only after q."""
    with served_agent(monkeypatch, TURNS, DELAY, record=True) as agent:
        assert agent.record is not None
        agent.record.unlink()
        src, why = open_live(agent.proc.pid)
        assert why is not None and not isinstance(src, RecordingFollower)
        assert f"the agent's recording {agent.record} cannot be read here" in why, why
        app = InspectorApp(src)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for_turns(app, pilot, 1)
            assert len(app.timeline) >= 1  # attached all the same
            said = [(n.title, n.message) for n in app._notifications]
            assert ("not following its recording", why) in said, said
