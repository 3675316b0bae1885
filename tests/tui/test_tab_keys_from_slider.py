"""The tab keys with a What-if slider focused, as a person meets them: adjusting the window (w, w, →) and
then pressing `m` to see why the cache missed did nothing a person could see. The tab was switched, the
hidden slider's focus went to the next slider of the same pane, and the tabs showed that pane again: `m`
(and c, k, a) only moved the focus from slider to slider. Now the key shows its tab and ←/→ step turns
again, as after Esc."""

from __future__ import annotations

from pathlib import Path

import pytest

from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from panels.markup_line import MarkupLine
from panels.slider import Slider
from tests.tui.conftest import settle

DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"
KEYS = {"m": "tab-why", "c": "tab-content", "k": "tab-skipped", "a": "tab-alerts"}


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.parametrize("key", list(KEYS))
async def test_a_tab_key_with_a_slider_focused_shows_its_tab(key: str, size: tuple[int, int]) -> None:
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=20)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        await pilot.press("w")  # again: the budget slider takes the arrows
        await settle(pilot)
        assert isinstance(app.focused, Slider), app.focused
        await pilot.press(key)
        await settle(pilot)
        assert app.query_one("#details").active == KEYS[key], (key, app.focused)
        assert not isinstance(app.focused, Slider), app.focused
        await pilot.press("left")  # a turn back, not a slider's step
        await settle(pilot)
        status = app.query_one("#status", MarkupLine).render_line(0).text
        assert "turn 19 (20/40)" in status, status
        assert app.query_one("#details").active == KEYS[key]
