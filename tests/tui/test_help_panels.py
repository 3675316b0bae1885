"""`?` describes every tab the inspector shows, the Shadow tab included when the session has one."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Markdown, Tab, TabbedContent

from engine.whatif import Overrides
from inspector.app import InspectorApp
from inspector.screens.help import HelpScreen
from inspector.sources.file import FileSource
from tests.test_shadow import agent
from tests.tui.conftest import settle
from tests.tui.test_hardening import DEMO


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


@pytest.mark.parametrize("key, says", [("question_mark", "esc Close"), ("g", "esc Cancel")])
async def test_a_modal_screen_has_a_footer_of_its_own(key: str, says: str) -> None:
    # The main screen's footer showed through beneath help and the go-to prompt, offering keys that do
    # nothing there or something else (←→ Turn, q Quit: q closes help, and is typed in the prompt), and
    # help never said how to close it.
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await settle(pilot)
        row = "\n".join(s.text for s in app.screen._compositor.render_strips()).splitlines()[-1]
        assert row.strip().startswith(says) and "Turn" not in row and "Quit" not in row, row


def test_the_help_screen_says_what_each_manifest_column_and_pressure_figure_is() -> None:
    # The manifest's Δ (a ● on some rows) and hash columns, and the pressure head's "uncompacted 15.52",
    # were explained nowhere; budget/plan/sent gave no unit.
    from inspector.screens.help import PANELS
    from panels.manifest import COLUMNS

    sections = PANELS.split("**Sections**", 1)[1].split("\n- ", 1)[0]
    unexplained = [c for c in COLUMNS if c != "section" and f"`{c}`" not in sections]
    assert not unexplained, (unexplained, sections)
    assert "tokens" in sections, sections
    # `plan` read "the plan gave it" beside a history planned 82k under a 2.7k budget: it is the section
    # before the optimize steps cut it
    assert "`plan`: its content before the optimize steps that cut it" in " ".join(sections.split()), sections
    # the mark by a section's name (panels.manifest.NOTE_MARK) was explained nowhere
    from panels.manifest import NOTE_MARK

    assert f"`{NOTE_MARK}` after a name: the section carries a note" in " ".join(sections.split()), sections
    pressure = PANELS.split("**Pressure**", 1)[1].split("\n- ", 1)[0]
    assert "`uncompacted`" in pressure and "1.00 is full" in pressure, pressure
