"""`/` in the inspector attached to a running agent as `cp-inspect attach` attaches (open_live: the fold
stream): what the search bar says, and that the search builds none of the turns received. The source's
fold indexes each turn's sections as it builds the turn's trace (content_search.arrival_index); the first
`/` built every turn received again in a pipeline of its own (~0.6 ms a turn). A real agent (a Pipeline
serving its probe in this process), a real socket."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from inspector.app import InspectorApp
from inspector.sources.live_recording import open_live
from tests.support.probe_agent import T, one_turn, serving_pipeline
from tests.tui.test_content_search import bar, search, turn, until


def _turns(pipe: Any, first: int, last: int) -> None:
    for t in range(first, last):  # the text first sent in the result of step 5, again in step 9's
        one_turn(pipe, t, f"output of step {t}" + (" NEEDLE" if t in (5, 9) else ""))


async def test_slash_on_an_attached_agent_says_where_the_text_enters_and_builds_no_turn(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    pipe = serving_pipeline(monkeypatch, rtdir)
    pipe.probe.fold_coalesce = 0.0
    _turns(pipe, 0, 14)
    src, why = open_live(os.getpid(), timeout=T, backfill_idle=None)
    assert why is None
    index = src.search_index
    assert index is not None
    try:
        app = InspectorApp(src, theme="cp-dark")
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: len(app.timeline) == 14 and len(index.turns) == 14)
            assert sorted(index.turns) == list(range(14)), "the fold's builds, indexed as they came"
            await pilot.press("home")
            await search(pilot, "needle")
            await until(pilot, lambda: "enters" in bar(app))
            assert turn(app) == 6, bar(app)
            assert "turn 6: 'needle' enters the prompt in history" in bar(app), bar(app)
            await pilot.press("f")
            await until(pilot, lambda: turn(app) == 10)
            assert "turn 10: 'needle' comes again in history (1 -> 2 matches)" in bar(app), bar(app)
            # (The stream's own pipeline built no turn: `past`, the newest it built. The app's steps
            # re-plan the turns shown for their content, as ever.)
            assert index.past == -1, f"the search built turns again, up to {index.past}"
            await pilot.press("escape")
            # The agent goes on: a new query reads the turns that came from the same index.
            _turns(pipe, 14, 18)
            one_turn(pipe, 18, "output of step 18 FRESH-TEXT")  # (sent by the turn after it)
            one_turn(pipe, 19)
            await until(pilot, lambda: len(app.timeline) == 20 and len(index.turns) == 20)
            await pilot.press("home")
            await search(pilot, "fresh-text")
            await until(pilot, lambda: "enters" in bar(app))
            assert "turn 19: 'fresh-text' enters the prompt in history" in bar(app), bar(app)
            assert index.past == -1, f"the search built turns again, up to {index.past}"
    finally:
        src.close()
        pipe.close()


async def test_slash_on_a_followed_recording_finds_the_turns_its_reader_indexed(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """The same on an agent that records: `attach` follows its file (RecordingFollower), whose thread
    indexes each turn for the search as it reads it (inspector/followed_search.py); the first `/` counts
    what they sent and decides none of them again (it built every turn: ~1 ms each)."""
    from inspector.followed_search import RecordingStream
    from inspector.sources.live_recording import RecordingFollower

    pipe = serving_pipeline(monkeypatch, rtdir, record=str(rtdir.parent / "agent.cpsession"))
    _turns(pipe, 0, 14)
    src, why = open_live(os.getpid(), timeout=T, backfill_idle=None)
    assert why is None and isinstance(src, RecordingFollower)
    index = src.search_index
    assert isinstance(index, RecordingStream)
    try:
        app = InspectorApp(src, theme="cp-dark")
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: len(app.timeline) == 14 and len(index.turns) == 14)
            past = index.past  # (the newest turn the follower's thread indexed)
            await pilot.press("home")
            await search(pilot, "needle")
            await until(pilot, lambda: "enters" in bar(app))
            assert turn(app) == 6, bar(app)
            assert "turn 6: 'needle' enters the prompt in history" in bar(app), bar(app)
            await pilot.press("f")
            await until(pilot, lambda: turn(app) == 10)
            assert "turn 10: 'needle' comes again in history (1 -> 2 matches)" in bar(app), bar(app)
            assert index.past == past, "the search decided turns the follower had indexed"
            await pilot.press("escape")
            # The agent goes on: the follower reads and indexes the turns that come.
            _turns(pipe, 14, 18)
            one_turn(pipe, 18, "output of step 18 FRESH-TEXT")  # (sent by the turn after it)
            one_turn(pipe, 19)
            pipe.next_request()  # (turn 19's chunk is written when its turn closes)
            await until(pilot, lambda: len(app.timeline) == 20 and len(index.turns) == 20)
            await pilot.press("home")
            await search(pilot, "fresh-text")
            await until(pilot, lambda: "enters" in bar(app))
            assert "turn 19: 'fresh-text' enters the prompt in history" in bar(app), bar(app)
    finally:
        src.close()
        pipe.close()
