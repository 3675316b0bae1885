"""Fixtures for the TUI tests: deterministic synthetic sources and a helper to settle the app."""

from __future__ import annotations

import asyncio
import itertools
import time
import warnings

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Tab, Tabs
from textual.widgets._tabs import Underline
from textual.worker import WorkerCancelled, WorkerState

from inspector.sources.synthetic import SyntheticSource

SETTLE_WAIT_S = 300.0  # a hang guard, not a timing bound: start-up takes ~0.1-2 s, seconds at load 14


async def settle(pilot: Pilot) -> None:
    """Let the source/content/re-plan workers finish and the screen catch up, and start-up end.

    An exclusive worker replaced by a newer one ends cancelled; that is expected, not a failure. Start-up
    (InspectorApp.startup_finished) goes on between key presses after the first screen (the hidden
    What-if controls mount in pieces), so a test that times or counts what a step does waits for it too.
    It waits for start-up itself: it gave up after 10 s and the test went on reading a screen still
    starting, which a slow enough host could reach (none of tests/tui's 383 tests reached it at load 6).
    An app that never finishes starting (a source that never delivers) fails here after SETTLE_WAIT_S,
    saying so, rather than hanging the suite. Last, what still moves on its own (a tab
    underline sliding, an animated scroll: `moving`) comes to rest, so what a test reads or snapshots
    next is the frame at rest, not one in flight."""
    give_up = time.monotonic() + SETTLE_WAIT_S
    for i in itertools.count():
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerCancelled:
            pass
        await pilot.pause()
        idle = not any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in pilot.app.workers)
        started = getattr(pilot.app, "startup_finished", True)
        # (A live source's worker never ends: after 20 rounds the workers are not waited for any more.)
        if started and (idle or i >= 19):
            # What the app asked to do after the next refresh (call_after_refresh: e.g. the what-if
            # scrolling its answer into view once laid out) runs on the screen's update timer, which
            # an idle message queue does not wait for: wait for that refresh, and for the one after it
            # that shows what those callbacks changed. (Without this a snapshot was sometimes taken
            # before the what-if's answer was scrolled into view: 1 run in 6.)
            await pilot.app.screen.wait_for_refresh()
            await pilot.app.screen.wait_for_refresh()
            await pilot.pause()
            await come_to_rest(pilot)
            return
        assert time.monotonic() < give_up, f"settle: the app's start-up did not finish in {SETTLE_WAIT_S:g} s"
        if i >= 19:
            await pilot.pause(0.01)


REST_WAIT_S = 5.0  # a slide lasts 0.3 s; this bound is only reached by something that never stops


def moving(app: App[object]) -> bool:
    """Whether something on the screen still moves on its own: an animation running or scheduled in the
    animator (an animated scroll, a tab underline's slide), or a tab strip's underline not yet under its
    active tab. Switching tabs (or relabelling one) starts the underline's 0.3 s slide from a 20 ms timer
    and then after a refresh, so for that while the animator has nothing yet: a frame compared or
    snapshotted then shows the underline in flight (a stale row in test_partial_compositor, 1 CI run in
    ~4; a snapshot taken by snap_compare, which waits for the animator only, under the old tab)."""
    animator = app.animator
    if getattr(animator, "_animations", None) or getattr(animator, "_scheduled", None):
        return True
    for tabs in app.screen.query(Tabs):
        active = tabs.query(Tab).filter(".-active")
        if not active or not tabs.display:
            continue
        tab = active.first()
        start, end = tab.virtual_region.shrink(tab.styles.gutter).column_span
        underline = tabs.query_one(Underline)
        if underline.show_highlight and (underline.highlight_start, underline.highlight_end) != (start, end):
            return True
    return False


async def come_to_rest(pilot: Pilot) -> None:
    """Wait until nothing moves (`moving`), then for the frame that shows it at rest. Bounded: a live
    source's workers go on, but nothing here waits for them, only for animations, which end."""
    if not moving(pilot.app):
        return
    give_up = time.monotonic() + REST_WAIT_S
    while moving(pilot.app):
        if time.monotonic() > give_up:
            warnings.warn(f"settle: the screen still moves after {REST_WAIT_S} s", stacklevel=2)
            break
        await pilot.wait_for_scheduled_animations()
        await asyncio.sleep(0.01)
    await pilot.app.screen.wait_for_refresh()
    await pilot.pause()


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
