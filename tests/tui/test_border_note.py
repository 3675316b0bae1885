"""The section table's scale note (its bottom border) changes by repainting that border row alone
(panels/border_note.py): setting `border_subtitle` dropped every cached line of the table, so each step on
which the session's calibration moved re-rendered the whole table (~4.5 ms at 200x60), the slowest steps
of a run (issue 15.1's p95)."""

from __future__ import annotations

import copy
from pathlib import Path

from textual.app import App, ComposeResult
from textual.geometry import Region

from engine.recording.journal import trace_of
from inspector.cli import load_events
from panels.manifest import ManifestPanel

DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"


class One(App[None]):
    CSS = "ManifestPanel { border: round white; }"  # (the app's: inspector/app.tcss)

    def compose(self) -> ComposeResult:
        yield ManifestPanel()


def _screen(app: App[None]) -> list[str]:
    strips = app.screen._compositor.render_full_update().strips
    return ["".join(seg.text for strip in line for seg in strip) for line in strips]


def _two_turns() -> tuple[dict, dict]:
    events, _, _ = load_events(str(DEMO))
    first = [trace_of(e) for e in events if e.get("k") == "turn"][10]
    second = copy.deepcopy(first)
    first["calibration"], second["calibration"] = 1.06, 1.09  # the same rows, another learned ratio
    return first, second


async def test_a_new_scale_note_repaints_the_border_row_alone() -> None:
    first, second = _two_turns()
    app = One()
    async with app.run_test(size=(120, 20)) as pilot:
        panel = app.query_one(ManifestPanel)
        panel.show(first)
        await pilot.pause(0.2)
        assert "≈×1.06, learned" in (panel.border_subtitle or "")
        # What the step marks to be drawn again: the border's row, not the whole table (no region).
        marked: list[tuple[Region, ...]] = []
        set_dirty = panel._set_dirty

        def recorded(*regions: Region) -> None:
            marked.append(regions)
            set_dirty(*regions)

        panel._set_dirty = recorded  # type: ignore[method-assign]
        panel.show(second)
        panel._set_dirty = set_dirty  # type: ignore[method-assign]
        bottom = panel.outer_size.height - 1
        offset = panel.content_offset  # (the regions are the content's: the border lies outside it)
        assert [tuple(r.translate(offset) for r in regions) for regions in marked] == [
            (Region(0, bottom, panel.outer_size.width, 1),)]
        await pilot.pause()
        await pilot.pause()
        assert "≈×1.09, learned" in (panel.border_subtitle or "")
        bottom = panel.region.bottom - 1
        shown = _screen(app)
        assert "≈×1.09, learned" in shown[bottom], shown[bottom]
    # The screen is the one a table showing the second turn from the start draws.
    fresh = One()
    async with fresh.run_test(size=(120, 20)) as pilot:
        fresh.query_one(ManifestPanel).show(second)
        await pilot.pause()
        await pilot.pause()
        assert _screen(fresh) == shown
