"""Fixtures for the TUI tests: deterministic synthetic sources and a helper to settle the app."""

from __future__ import annotations

import itertools
import time

import pytest
from textual.pilot import Pilot
from textual.worker import WorkerCancelled, WorkerState

from inspector.sources.synthetic import SyntheticSource


async def settle(pilot: Pilot) -> None:
    """Let the source/content/re-plan workers finish and the screen catch up, and start-up end.

    An exclusive worker replaced by a newer one ends cancelled; that is expected, not a failure. Start-up
    (InspectorApp.startup_finished) goes on between key presses after the first screen (the hidden
    What-if controls mount in pieces), so a test that times or counts what a step does waits for it too,
    up to 10 s (an app whose source never delivers never finishes starting)."""
    give_up = time.monotonic() + 10
    for i in itertools.count():
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerCancelled:
            pass
        await pilot.pause()
        idle = not any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in pilot.app.workers)
        started = getattr(pilot.app, "startup_finished", True)
        # (A live source's worker never ends: after 20 rounds the workers are not waited for any more.)
        if (started and (idle or i >= 19)) or time.monotonic() > give_up:
            # What the app asked to do after the next refresh (call_after_refresh: e.g. the what-if
            # scrolling its answer into view once laid out) runs on the screen's update timer, which
            # an idle message queue does not wait for: wait for that refresh, and for the one after it
            # that shows what those callbacks changed. (Without this a snapshot was sometimes taken
            # before the what-if's answer was scrolled into view: 1 run in 6.)
            await pilot.app.screen.wait_for_refresh()
            await pilot.app.screen.wait_for_refresh()
            await pilot.pause()
            return
        if i >= 19:
            await pilot.pause(0.01)


@pytest.fixture
def replay_source() -> SyntheticSource:
    return SyntheticSource(40)


@pytest.fixture
def live_source() -> SyntheticSource:
    # 20 turns on attach, 10 more arrive, then the agent exits.
    return SyntheticSource(30, live=True, initial=20)


@pytest.fixture(autouse=True)
def _no_user_theme(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's TEXTUAL_THEME must not leak into tests (harlequin isolates config the same way)."""
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)
