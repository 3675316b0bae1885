"""The "Why miss" tab on a real recording: each turn's request against the previous one, rebuilt by replay."""

from __future__ import annotations

from pathlib import Path

from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from panels.why_miss import WhyMissPanel
from tests.tui.conftest import settle

DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"


async def test_why_tab_names_the_latch_flip_and_follows_stepping() -> None:
    app = InspectorApp(FileSource(DEMO), start_turn=15)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        panel = app.query_one("#why", WhyMissPanel)
        await pilot.press("m")
        await settle(pilot)
        assert panel.why is not None and panel.why["turn"] == 15
        text = str(panel.render())
        assert "latch_changed" in text and "permissions: read-write" in text
        await pilot.press("right")
        await settle(pilot)
        assert panel.why is not None and panel.why["turn"] == 16
        assert "prefix kept: appended" in str(panel.render())
        await pilot.press("right")
        await settle(pilot)
        assert panel.why is not None and panel.why["turn"] == 17
        assert "history_compacted: message 1 (user)" in str(panel.render())
