"""Fixtures for the TUI tests: deterministic synthetic sources and a helper to settle the app."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot
from textual.worker import WorkerCancelled, WorkerState

from inspector.sources.synthetic import SyntheticSource


async def settle(pilot: Pilot) -> None:
    """Let the source/content/re-plan workers finish and the screen catch up.

    An exclusive worker replaced by a newer one ends cancelled; that is expected, not a failure."""
    for _ in range(20):
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerCancelled:
            pass
        await pilot.pause()
        if not any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in pilot.app.workers):
            return


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
