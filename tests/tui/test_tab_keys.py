"""Two keys that took a detour: `c` after `b` showed the Content tab still holding the request body (the
section came back only with Enter on the manifest), and in the What-if tab Tab stopped on the pane itself
before the first slider."""

from __future__ import annotations

from textual.widgets import TabbedContent, Tabs

from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from panels.content_viewer import ContentViewer
from panels.manifest import ManifestPanel
from panels.slider import Slider
from panels.whatif import WhatIfPanel
from tests.tui.conftest import settle
from tests.tui.test_hardening import DEMO


async def test_c_after_b_shows_the_selected_sections_content() -> None:
    app = InspectorApp(FileSource(DEMO), start_turn=11)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        manifest = app.query_one("#manifest", ManifestPanel)
        manifest.move_cursor(row=len(manifest._ids) - 1)  # the last row: `c` follows the cursor, not a default
        await settle(pilot)
        viewer = app.query_one("#content", ContentViewer)
        section_title, section_text = viewer.title, viewer.text
        assert not section_title.startswith("request body")
        await pilot.press("b")
        await settle(pilot)
        assert viewer.title.startswith("request body")
        await pilot.press("c")
        await settle(pilot)
        assert app.query_one("#details", TabbedContent).active == "tab-content"
        assert (viewer.title, viewer.text) == (section_title, section_text)
        # From another tab, `c` after `b` is the section's too.
        await pilot.press("b")
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        assert app.query_one("#details", TabbedContent).active == "tab-content"
        assert viewer.title == section_title
        # And a step then shows the next turn's section, not the request body.
        await pilot.press("right")
        await settle(pilot)
        assert not viewer.title.startswith("request body") and "turn 12" in viewer.title, viewer.title


async def test_tab_goes_from_the_tab_strip_to_the_first_slider() -> None:
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        await pilot.press("tab")  # from the manifest to the tab strip
        await settle(pilot)
        assert isinstance(app.focused, Tabs)
        await pilot.press("tab")
        await settle(pilot)
        assert isinstance(app.focused, Slider) and app.focused.id == "budget", app.focused
        await pilot.press("shift+tab")  # and back to the strip in one
        await settle(pilot)
        assert isinstance(app.focused, Tabs)


async def test_the_arrows_scroll_the_whatif_pane_from_a_slider() -> None:
    # Why the pane needs no focus stop for reading: at 80x24 its controls and answer overflow it, and
    # ↑/↓ scroll it with a slider focused (the slider takes only ←/→).
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        pane = app.query_one("#whatif", WhatIfPanel)
        await pilot.press("tab", "tab")
        await settle(pilot)
        assert isinstance(app.focused, Slider)
        assert pane.max_scroll_y > 0
        await pilot.press("down", "down")
        await settle(pilot)
        assert pane.scroll_y == 2
        await pilot.press("up")
        await settle(pilot)
        assert pane.scroll_y == 1


async def test_w_again_puts_the_arrows_on_the_first_slider_and_esc_gives_them_back() -> None:
    # Seen in tmux: `w`, then Tab (to the tab strip) and ← showed the Content tab instead of moving the
    # budget. The pane says how to reach the sliders, and a second `w` does it.
    app = InspectorApp(FileSource(DEMO), start_turn=11)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        details = app.query_one("#details", TabbedContent)
        # showing the tab moves no focus
        assert details.active == "tab-whatif" and not isinstance(app.focused, Slider)
        hint = str(app.query_one("#whatif-result").render())
        assert hint.startswith("w again for the sliders"), hint
        await pilot.press("w")
        await settle(pilot)
        budget = app.query_one("#budget", Slider)
        assert app.focused is budget and details.active == "tab-whatif"
        before, turn = budget.value, app.index
        await pilot.press("left")  # the budget moves, the turn does not
        await settle(pilot)
        assert budget.value < before and app.index == turn
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("left")  # the arrows step turns again
        await settle(pilot)
        assert app.index == turn - 1
