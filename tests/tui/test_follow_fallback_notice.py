"""A followed recording cut while the inspector shows it: the follower falls back to the agent's live
stream and the app says so on screen (the header's follow_stopped was shown nowhere: the view went on
with no word that it was no longer the file's). A real demo agent, a real recording, the real follower."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from inspector.app import InspectorApp
from inspector.attach_command import process_ended
from inspector.sources.live_recording import RecordingFollower, open_live
from tests.tui.test_user48_removed_recording import TURNS, _recording_agent


async def test_a_recording_cut_while_followed_is_said_on_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    rt = Path(tempfile.mkdtemp(prefix="cpf-", dir="/tmp"))  # a Unix socket path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    record = rt / "agent.cpsession"
    agent = _recording_agent(rt, record)
    try:
        src, why = open_live(agent.pid)
        assert why is None and isinstance(src, RecordingFollower), why
        app = InspectorApp(src)
        app.agent_ended = process_ended(agent.pid)
        async with app.run_test(size=(120, 40)) as pilot:
            give_up = time.monotonic() + 60
            while len(app.timeline) < 1 and time.monotonic() < give_up:
                await pilot.pause(0.1)
            os.truncate(record, 100)  # cut shorter than what was read: the follower attaches live
            while not src.header.get("follow_stopped") and time.monotonic() < give_up:
                await pilot.pause(0.1)
            stopped = src.header.get("follow_stopped")
            assert stopped, "the follower did not fall back"
            notice = ("not following its recording", f"{stopped}: its turns are sent live from here on")
            while (
                notice not in [(n.title, n.message) for n in app._notifications]
                and time.monotonic() < give_up
            ):
                await pilot.pause(0.1)
            assert notice in [(n.title, n.message) for n in app._notifications], app._notifications
            while len(app.timeline) < TURNS and time.monotonic() < give_up:
                await pilot.pause(0.1)
            assert len(app.timeline) == TURNS  # and every turn came, the later ones live
    finally:
        agent.kill()
        agent.wait()
        shutil.rmtree(rt, ignore_errors=True)
