"""The content's scrollbar draws from rows cached by what each row shows (panels/scrollbar_rows.py), and a
step repaints widgets without a message round trip through each of them (panels/repaint.py): the same
drawing as Textual's own path, for less work."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from textual import messages
from textual.geometry import Region
from textual.scrollbar import ScrollBar, ScrollBarRender

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.content_viewer import ContentBody, ContentViewer
from panels.scrollbar_rows import RowScrollBar, rows_moved, thumb
from tests.tui.conftest import settle


def _drawn(height: int, virtual: int, window: int, position: float) -> list[tuple[str, object]]:
    bar = ScrollBarRender.render_bar(size=height, virtual_size=virtual, window_size=window if window < virtual else 0,
                                     position=position, thickness=1, vertical=True)
    return [(s.text, s.style) for s in bar.segments]


@settings(max_examples=500, deadline=None)
@given(height=st.integers(1, 80), window=st.integers(1, 80), before=st.integers(1, 5000),
       after=st.integers(1, 5000), at=st.floats(0, 1))
def test_rows_moved_holds_every_row_whose_drawing_changes(height: int, window: int, before: int, after: int,
                                                          at: float) -> None:
    """Between two virtual sizes at one position, every row textual draws differently is among the
    rows `rows_moved` names (it may name a few more: repainting those is harmless)."""
    position = int(at * max(0, min(before, after) - window) * 8) / 8  # a valid, 1/8-granular position
    a, b = _drawn(height, before, window, position), _drawn(height, after, window, position)
    changed = {y for y in range(height) if a[y] != b[y]}
    named = set(rows_moved(height, thumb(height, before, window, position), thumb(height, after, window, position)))
    assert changed <= named
    assert all(0 <= y < height for y in named)


async def test_the_scrollbar_draws_what_textual_draws() -> None:
    """For many thumb sizes and positions, and with the mouse over it, each frame of the content's
    RowScrollBar (rows from its cache or drawn afresh) equals a plain ScrollBar's full render."""
    app = InspectorApp(SyntheticSource(20))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        body = app.query_one("#content", ContentViewer).query_one(ContentBody)
        bar = body.vertical_scrollbar
        assert isinstance(bar, RowScrollBar)
        rng = random.Random(15)
        height = bar.size.height
        for i in range(300):
            virtual = rng.choice([height + 1, height * 2, rng.randint(1, 4000)])
            bar.set_reactive(ScrollBar.window_virtual_size, virtual)
            bar.set_reactive(ScrollBar.position, int(rng.random() * max(0, virtual - bar.window_size) * 8) / 8)
            bar.set_reactive(ScrollBar.mouse_over, i % 50 == 49)
            top = rng.randrange(height)
            crop = Region(0, top, bar.size.width, rng.randint(1, height - top))
            ours = [strip.text for strip in bar.render_lines(crop)], [list(strip) for strip in bar.render_lines(crop)]
            bar._layout_cache.clear()  # Textual's own full render of the bar as it is now
            bar._styles_cache.clear()
            bar._set_dirty()
            full = ScrollBar.render_lines(bar, bar.size.region)[crop.y: crop.bottom]
            assert ours == ([strip.text for strip in full], [list(strip) for strip in full]), (i, virtual)


async def test_a_step_repaints_without_a_message_to_each_panel(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A step's panels reach the screen's dirty set directly: the screen gets no Update message for
    them (the old path had each repainted widget wake up on a Prompt and send one)."""
    app = InspectorApp(SyntheticSource(20))
    updates: list[str] = []
    original = messages.Update.__init__

    def recording(self, widget) -> None:  # type: ignore[no-untyped-def]
        updates.append(type(widget).__name__)
        original(self, widget)

    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        monkeypatch.setattr(messages.Update, "__init__", recording)
        for key in ("right", "right", "left"):
            await pilot.press(key)
            await pilot.pause()
        # The line panels (overview, timeline, status, title) and the content body repaint through
        # panels.repaint on every step; the scrollbars' own reactives (a scroll) still refresh.
        panels = {"PressurePanel", "TierPanel", "CacheLayoutPanel", "TimelineStrip", "MarkupLine", "ContentBody"}
        assert app.index == 18 and not [name for name in updates if name in panels], updates


async def test_without_textuals_private_caches_the_bar_and_body_draw_the_same(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A Textual without the private members the bar's row cache empties (pyproject allows any >= 1.0)
    # must not fail a frame: the bar is Textual's own drawing, no row kept, the screens the same. (The
    # content body's fast path only empties the styles cache when there is one.)
    import panels.scrollbar_rows

    async def screens() -> tuple[list[str], int]:
        app = InspectorApp(SyntheticSource(40), start_turn=5)
        shots = []
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            for key in ("pagedown", "right", "right", "left", "end", "home"):
                await pilot.press(key)
                await settle(pilot)
                shots.append(app.export_screenshot())
            bar = app.query_one("#content", ContentViewer).query_one(ContentBody).vertical_scrollbar
            assert isinstance(bar, RowScrollBar)
        return shots, len(bar._rows)

    kept, rows = await screens()
    monkeypatch.setattr(panels.scrollbar_rows, "_REDRAW", ("_layout_cache", "_no_such_cache"))
    without, none = await screens()
    assert rows > 0 and none == 0
    assert without == kept


async def test_a_new_thumb_end_is_made_without_drawing_the_whole_bar() -> None:
    """Once a full drawing showed each row is its segment in the bar's style, a row not seen yet (a new
    thumb end) is made from its segment: Textual's whole-bar drawing is not run again for it (it was, for
    every new segment, ~2.8 ms at 200x60), and the rows are the ones that drawing gives."""
    app = InspectorApp(SyntheticSource(20))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        bar = app.query_one("#content", ContentViewer).query_one(ContentBody).vertical_scrollbar
        assert isinstance(bar, RowScrollBar)
        height = bar.size.height
        bar.set_reactive(ScrollBar.window_virtual_size, height * 7)
        bar.set_reactive(ScrollBar.position, 0)
        bar.render_lines(bar.size.region)  # the first drawing of this state: Textual's, whole
        full_draws = 0
        textuals = ScrollBar.render_lines

        def counted(self, crop):  # type: ignore[no-untyped-def]
            nonlocal full_draws
            full_draws += 1
            return textuals(self, crop)

        ScrollBar.render_lines = counted  # type: ignore[method-assign]
        try:
            made = 0
            for eighth in range(1, 64):  # the thumb moved by an eighth of a cell at a time
                before = len(bar._rows)
                bar.set_reactive(ScrollBar.position, eighth * height * 6 / 8 / 40)
                ours = [list(strip) for strip in bar.render_lines(bar.size.region)]
                made += len(bar._rows) - before
                bar._layout_cache.clear()  # Textual's own full render of the bar as it is now
                bar._styles_cache.clear()
                bar._set_dirty()
                drawn = full_draws
                full = [list(strip) for strip in textuals(bar, bar.size.region)]
                assert ours == full, eighth
                full_draws = drawn
        finally:
            ScrollBar.render_lines = textuals  # type: ignore[method-assign]
        assert made > 0 and full_draws == 0
