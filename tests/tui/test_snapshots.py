"""SVG snapshots of the main screen: replay in every theme at 80x24 and 160x48, and a live session
after the agent disconnected. Synthetic data, no clocks, no cursor blink: byte-stable.

Update with `pytest tests/tui --snapshot-update` after an intended visual change."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from inspector.sources.synthetic import SyntheticSource
from tests.tui.conftest import settle

SIZES = {"narrow": (80, 24), "wide": (160, 48)}


@pytest.mark.parametrize("theme", ["cp-dark", "cp-light", "cp-high-contrast"])
@pytest.mark.parametrize("size", ["narrow", "wide"])
def test_replay_main_screen(snap_compare, theme: str, size: str) -> None:
    app = InspectorApp(SyntheticSource(40), theme=theme, start_turn=30)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=settle)


@pytest.mark.parametrize("size", ["narrow", "wide"])
def test_live_disconnected_main_screen(snap_compare, size: str) -> None:
    app = InspectorApp(SyntheticSource(30, live=True, initial=20), theme="cp-dark")

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        pilot.app.clear_notifications()  # the toast repeats the status line and would cover the panels
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)


def test_whatif_tab_after_replan(snap_compare) -> None:
    app = InspectorApp(SyntheticSource(40), theme="cp-dark", start_turn=31)

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("w")
        pilot.app.query_one("#budget").focus()
        await pilot.press("shift+right", "shift+right")
        await settle(pilot)
        pilot.app.query_one("#manifest").focus()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 48), run_before=run_before)


def test_whatif_session_wide_narrow(snap_compare) -> None:
    """Session-wide what-if at 80x24: the comparison table comes first in the panel."""
    app = InspectorApp(SyntheticSource(40), theme="cp-dark", start_turn=31)

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("w")
        pilot.app.query_one("#session").toggle()
        await settle(pilot)
        pilot.app.query_one("#manifest").focus()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


# A real engine recording (the committed demo session), not only the synthetic source: 80x24 and 120x40.
DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"
REAL_SIZES = {"80x24": (80, 24), "120x40": (120, 40)}


@pytest.mark.parametrize("size", list(REAL_SIZES))
def test_real_recording_main_screen(snap_compare, size: str) -> None:
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=25)
    assert snap_compare(app, terminal_size=REAL_SIZES[size], run_before=settle)


@pytest.mark.parametrize("size", list(REAL_SIZES))
def test_real_recording_whatif_after_replan(snap_compare, size: str) -> None:
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=25)

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("w")
        pilot.app.query_one("#budget").focus()
        await pilot.press("shift+right")
        await settle(pilot)

    assert snap_compare(app, terminal_size=REAL_SIZES[size], run_before=run_before)
