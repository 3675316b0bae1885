"""A followed recording cut while the inspector shows it: the follower falls back to the agent's live
stream and the app says so on screen (the header's follow_stopped was shown nowhere: the view went on
with no word that it was no longer the file's). A real demo agent, a real recording, the real follower."""

from __future__ import annotations

import os

import pytest

from tests.support.served_agent import followed_app, until, wait_for_turns

# The cut is seen as the file being shorter than what was read, on the follower's next look (0.1 s at
# the most): an agent that writes its next turn first grows the file back past that (a hole where the cut
# was, the follower's data intact), and the follower reads on, rightly, with no cut to say. At 0.4 s a turn
# a loaded host (load 13) let that happen in 2 runs of 6; the turns here come 2 s apart.
TURNS, DELAY = 4, 2.0


async def test_a_recording_cut_while_followed_is_said_on_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    async with followed_app(monkeypatch, TURNS, DELAY) as f:
        app, src, pilot = f.app, f.src, f.pilot
        os.truncate(f.record, 100)  # cut shorter than what was read: the follower attaches live
        await until(pilot, lambda: src.header.get("follow_stopped"))
        stopped = src.header.get("follow_stopped")
        assert stopped, "the follower did not fall back"
        notice = ("not following its recording", f"{stopped}: its turns are sent live from here on")

        def said() -> list[tuple[str, str]]:
            return [(n.title, n.message) for n in app._notifications]

        await until(pilot, lambda: notice in said())
        assert notice in said(), said()
        await wait_for_turns(app, pilot, TURNS)
        assert len(app.timeline) == TURNS  # and every turn came, the later ones live
