"""`?` describes every tab the inspector shows, the Shadow tab included when the session has one."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Markdown, Tab, TabbedContent

from engine.whatif import Overrides
from inspector.app import InspectorApp
from inspector.screens.help import HelpScreen
from inspector.sources.file import FileSource
from tests.test_shadow import agent
from tests.tui.conftest import settle


async def test_the_help_screen_describes_every_tab(tmp_path: Path) -> None:
    path = tmp_path / "s.cpsession"
    agent(path, Overrides(gates={"drop_rounds": False}), turns=6)
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        tabs = [str(tab.label) for tab in app.query_one(TabbedContent).query(Tab)]
        assert "Shadow" in tabs
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.query_one(Markdown).source
        panels = text.split("## Panels", 1)[1]
        # Why miss and Shadow were left out: a person met two tabs `?` did not explain.
        missing = [t for t in tabs if f"**{t}**" not in panels and f"/ {t}**" not in panels and f"**{t} /" not in panels]
        assert not missing, missing
