"""Short terminals (a split pane of 15 or 20 rows): the detail tabs had no rows left under the overview,
the strips and the manifest, so `w`, `c`, `k`, `a` and `m` showed nothing. There a tab chosen by its key
now takes the screen, and Esc brings the overview back."""

from __future__ import annotations

import pytest
from textual.widgets import TabbedContent, Tabs

from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from tests.tui.conftest import settle
from tests.tui.test_hardening import DEMO


def screen_text(app: InspectorApp) -> str:
    """What is on screen, as plain text lines."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())

# Each tab's key and what its first rows say on the demo's last turn (39).
TABS = [
    ("w", "budget"),  # the What-if's first slider
    ("c", "tools · turn 39"),  # the Content viewer's head (the manifest's first section)
    ("k", "compact_history"),  # the Skipped tab's first transform
    ("a", "turn  severity"),  # the Alerts table's header
    ("m", "vs turn 38"),  # Why miss: this request against the one before
]


@pytest.mark.parametrize("size", [(40, 15), (80, 20)])
@pytest.mark.parametrize("key, first", TABS)
async def test_each_detail_tab_shows_its_first_rows_on_a_short_terminal(
        size: tuple[int, int], key: str, first: str) -> None:
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await settle(pilot)
        text = screen_text(app)
        assert first in text, text
        assert "esc Back" in text, text  # and the footer says how to get the overview back
        await pilot.press("left")  # stepping still works with the tab on screen
        await settle(pilot)
        assert "turn 38" in screen_text(app).splitlines()[0]
        await pilot.press("escape")
        await settle(pilot)
        text = screen_text(app)
        assert "History" in text or "history" in text, text  # the overview is back
        assert "esc Back" not in text, text
        assert app.focused is app.query_one("#manifest")


async def test_a_tall_enough_terminal_keeps_the_overview_beside_the_tab() -> None:
    # 80x24 (the stacked layout's smallest that fits) and the snapshots' sizes: nothing changes there.
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        text = screen_text(app)
        assert "turn  severity" in text and "History" in text, text
        assert "esc Back" not in text, text


async def test_growing_the_terminal_ends_the_zoom() -> None:
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(40, 15)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        await pilot.resize_terminal(80, 30)
        await settle(pilot)
        text = screen_text(app)
        assert "turn  severity" in text and "History" in text and "esc Back" not in text, text
        await pilot.resize_terminal(40, 15)  # short again: the overview stays until a tab is chosen
        await settle(pilot)
        assert "History" in screen_text(app)


def test_short_terminal_alerts_tab_snapshot(snap_compare) -> None:
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)

    assert snap_compare(InspectorApp(FileSource(DEMO)), terminal_size=(40, 15), run_before=run_before)


async def test_the_footer_says_what_the_arrows_do_on_the_tab_strip() -> None:
    # One Tab from the manifest focuses the detail tabs' strip, where ←/→ switch tabs; its own bindings
    # for them were hidden, so the footer showed nothing for the arrows there.
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert screen_text(app).splitlines()[-1].startswith(" ←→ Turn")
        await pilot.press("tab")
        await settle(pilot)
        assert isinstance(app.focused, Tabs)
        assert screen_text(app).splitlines()[-1].startswith(" ←→ Tab "), screen_text(app)
        await pilot.press("right")
        await settle(pilot)
        assert app.query_one("#details", TabbedContent).active == "tab-whatif"
        await pilot.press("escape")  # back on the manifest: the arrows step turns, and the footer says so
        await settle(pilot)
        assert screen_text(app).splitlines()[-1].startswith(" ←→ Turn")


async def test_the_tab_strips_arrows_are_the_tabs_own_public_bindings() -> None:
    # The "←→ Tab" entry came from replacing the strip's private binding map (Tabs._bindings); it is now
    # the detail tabs' own BINDINGS, enabled only while the strip has focus (check_action).
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("tab")
        await settle(pilot)
        for key in ("left", "right"):
            active = app.screen.active_bindings[key]
            assert active.node is app.query_one("#details") and active.binding.show, active
        # Textual's Tabs keeps its own (hidden) bindings: nothing replaced them.
        assert not any(b.show for _key, b in app.focused._bindings)  # type: ignore[union-attr]
        await pilot.press("tab")  # into the content viewer: the arrows step turns again there
        await settle(pilot)
        assert app.screen.active_bindings["left"].node is not app.query_one("#details")
        await pilot.press("left")
        await settle(pilot)
        assert "turn 38" in screen_text(app).splitlines()[0]
        assert app.query_one("#details", TabbedContent).active == "tab-content"


@pytest.mark.parametrize("size", [(40, 15), (80, 20)])
@pytest.mark.parametrize("key", ["c", "a"])
async def test_up_and_down_move_the_section_while_a_tab_is_zoomed(size: tuple[int, int], key: str) -> None:
    # Zoomed, the manifest is hidden (and loses focus): ↑/↓ did nothing and nothing said how to pick
    # another section. They now move its selection, the Content tab shows that section, and the footer
    # says so ("↑↓ Section") while the zoom lasts.
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await settle(pilot)
        assert "↑↓ Section" in screen_text(app).splitlines()[-1]
        await pilot.press("down")
        await settle(pilot)
        text = screen_text(app)
        assert app.query_one("#details", TabbedContent).active == "tab-content"
        assert "identity · turn 39" in text, text  # the manifest's second section
        await pilot.press("down", "up", "up")  # and back past the first row: it stays there
        await settle(pilot)
        assert "tools · turn 39" in screen_text(app)
        await pilot.press("escape")  # the overview is back, its cursor on the section shown
        await settle(pilot)
        assert app.focused is app.query_one("#manifest")
        assert app.query_one("#manifest").selected_section() == "tools"  # type: ignore[attr-defined]
        assert "↑↓ Section" not in screen_text(app)
        await pilot.press("down")  # not zoomed: the manifest's own ↓, as before
        await settle(pilot)
        assert app.query_one("#manifest").selected_section() == "identity"  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [(40, 15), (80, 20)])
async def test_the_section_chosen_while_zoomed_is_on_screen_after_esc(size: tuple[int, int]) -> None:
    # The hidden manifest's cursor moves scrolled it against no height: back from the zoom, the selected
    # row could be out of view (↓ ↓ ↑ then Esc: Identity selected, the table scrolled past it).
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("c", "down", "down", "up", "escape")
        await settle(pilot)
        manifest = app.query_one("#manifest")
        assert manifest.selected_section() == "identity"  # type: ignore[attr-defined]
        rows = [line for line in screen_text(app).splitlines() if line.lstrip().startswith("Identity")]
        assert rows, screen_text(app)
