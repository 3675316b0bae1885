"""A step onto a turn whose content the worker prepared while the person looked at the one before
shows it in the step's own frame (no second frame when the worker's result would arrive); a message
from a worker that a step replaced never puts an older turn back; the scrollbar is not repainted when
a new text would draw it the same."""

from __future__ import annotations

import threading

from inspector.app import InspectorApp
from inspector.messages import ContentLoaded
from inspector.sources.synthetic import SyntheticSource
from panels import content_viewer
from panels.content_viewer import ContentBody, ContentViewer
from panels.scrollbar_rows import thumb
from panels.text_document import prepare
from tests.tui.conftest import settle


class Growing(SyntheticSource):
    """A history that grows by a line each turn, held back while the test says so, and counted."""

    def __init__(self, n_turns: int) -> None:
        super().__init__(n_turns)
        self.release = threading.Event()
        self.release.set()
        self.asked: list[int] = []

    def section_content(self, turn: int, section_id: str) -> str:
        self.asked.append(turn)
        self.release.wait(timeout=30)
        return "\n".join(f"turn {turn} line {i} " + "word " * (i % 30) for i in range(1000 + turn))


def _first_line(body: ContentBody) -> str:
    return body.render_line(0).text.rstrip()


async def test_a_step_onto_a_prepared_turn_shows_it_in_its_own_frame() -> None:
    source = Growing(40)
    app = InspectorApp(source, start_turn=10)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        viewer = app.query_one("#content", ContentViewer)
        body = viewer.query_one(ContentBody)
        await pilot.press("right")  # turn 11; the person steps right: turn 12 is prepared meanwhile
        await settle(pilot)
        assert _first_line(body) == "turn 11 line 0" and 12 in source.asked
        source.release.clear()  # from here on, anything the worker fetches waits
        await pilot.press("right")
        await pilot.pause()  # the step's own frame
        assert " · turn 12 · " in viewer.title and _first_line(body) == "turn 12 line 0"
        assert body.document is not None and body.virtual_size.height == len(body.document.rows)
        await pilot.press("left")  # back to 11: kept as well
        await pilot.pause()
        assert " · turn 11 · " in viewer.title and _first_line(body) == "turn 11 line 0"
        source.release.set()
        await settle(pilot)
        assert " · turn 11 · " in viewer.title and _first_line(body) == "turn 11 line 0"
        # Not prepared (a jump): the old text stays until the worker brings the new one.
        source.release.clear()
        await pilot.press("home")
        await pilot.pause()
        assert _first_line(body) == "turn 11 line 0"
        source.release.set()
        await settle(pilot)
        assert " · turn 0 · " in viewer.title and _first_line(body) == "turn 0 line 0"


async def test_a_message_from_a_replaced_worker_is_dropped() -> None:
    source = Growing(20)
    app = InspectorApp(source)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        viewer = app.query_one("#content", ContentViewer)
        title, text = viewer.title, viewer.text
        old = source.section_content(3, "history")
        app.post_message(ContentLoaded(title.replace("turn 19", "turn 3"), old, None, None, ("history", "x")))
        await settle(pilot)
        assert (viewer.title, viewer.text) == (title, text)


def _spy_repaints(monkeypatch, widget) -> list[tuple[object, ...]]:  # type: ignore[no-untyped-def]
    """The regions of each repaint (panels.repaint) or refresh of `widget` asked for from now on."""
    calls: list[tuple[object, ...]] = []
    original_repaint, original_refresh = content_viewer.repaint, widget.refresh

    def repaint(target, *regions):  # type: ignore[no-untyped-def]
        if target is widget:
            calls.append(regions)
        return original_repaint(target, *regions)

    def refresh(*regions, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(regions)
        return original_refresh(*regions, **kwargs)

    monkeypatch.setattr(content_viewer, "repaint", repaint)
    widget.refresh = refresh
    return calls


async def test_the_scrollbar_is_repainted_only_when_its_drawing_changes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    source = Growing(20)
    app = InspectorApp(source)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        body = app.query_one("#content", ContentViewer).query_one(ContentBody)
        bar = body.vertical_scrollbar
        repaints = _spy_repaints(monkeypatch, bar)
        dark, width = app.current_theme.dark, body.wrap_width
        rows = len(body.document.rows) if body.document else 0
        grown = prepare(source.section_content(19, "history") + "\none more line", dark, width)
        assert len(grown.rows) == rows + 1
        assert thumb(bar.size.height, rows, bar.window_size, 0) == thumb(bar.size.height, rows + 1, bar.window_size, 0)
        body.set_document(grown)
        await pilot.pause()
        assert repaints == [] and bar.window_virtual_size == rows + 1
        drawn = [strip.text for strip in bar.render_lines(bar.size.region)]
        bar._styles_cache.clear()
        assert [strip.text for strip in bar.render_lines(bar.size.region)] == drawn, "drawn as a repaint would"
        short = prepare("\n".join(["x"] * 100), dark, width)  # a thumb a third of the bar
        body.set_document(short)
        await pilot.pause()
        assert repaints and bar.window_virtual_size == 100


async def test_a_document_is_offered_for_reuse_only_after_its_first_rows_are_drawn(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from inspector import content_loader

    app = InspectorApp(Growing(20))
    seen: list[bool] = []
    original = content_loader.prerender

    def checking(doc, screen, console):  # type: ignore[no-untyped-def]
        seen.append(app.content._last is doc)  # another worker could take it from _last right now
        original(doc, screen, console)

    monkeypatch.setattr(content_loader, "prerender", checking)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("left", "left")
        await settle(pilot)
        assert seen and not any(seen)


async def test_a_moved_thumb_repaints_only_the_rows_that_change(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A document a few rows longer moves the thumb's ends: only those rows of the bar are repainted
    (not the whole bar), and the bar then shows what a repaint of all of it shows."""
    from textual.geometry import Region

    source = Growing(20)
    app = InspectorApp(source)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        body = app.query_one("#content", ContentViewer).query_one(ContentBody)
        bar = body.vertical_scrollbar
        dark, width = app.current_theme.dark, body.wrap_width
        body.set_document(prepare("\n".join(["x"] * 100), dark, width))
        await pilot.pause()
        before = [strip.text for strip in bar.render_lines(bar.size.region)]
        regions = _spy_repaints(monkeypatch, bar)
        body.set_document(prepare("\n".join(["x"] * 112), dark, width))
        await pilot.pause()
        assert len(regions) == 1 and regions[0], "one refresh, of some rows only"
        rows = sorted(region.y for region in regions[0] if isinstance(region, Region))
        assert 0 < len(rows) < bar.size.height // 2
        drawn = [strip.text for strip in bar.render_lines(bar.size.region)]
        assert drawn != before
        assert [y for y in range(len(drawn)) if drawn[y] != before[y]] == [y for y in rows if drawn[y] != before[y]]
        bar._styles_cache.clear()
        bar._render_content()
        assert [strip.text for strip in bar.render_lines(bar.size.region)] == drawn, "drawn as a repaint would"


async def test_a_prepared_screenful_comes_with_its_terminal_output() -> None:
    # The worker makes the escape sequences of the rows it draws: the frame that shows them hands the
    # driver strips whose output is made (Strip.render's cache), and the same as the UI thread would make.
    source = Growing(40)
    app = InspectorApp(source, start_turn=10)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        body = app.query_one("#content", ContentViewer).query_one(ContentBody)
        await pilot.press("right")
        await settle(pilot)
        source.release.clear()  # from here on, anything the worker fetches waits: what shows is prepared
        await pilot.press("right")
        await pilot.pause()
        assert _first_line(body) == "turn 12 line 0"
        strips = body.render_lines(body.size.region)
        assert len(strips) == body.size.height
        made = [strip._render_cache for strip in strips]
        assert all(out is not None for out in made)
        # The piece left of the scrollbar, which a step's frame writes (it repaints the text only).
        cuts = [body.scrollable_content_region.width, body.size.width]
        assert cuts[0] < cuts[1]
        assert all(strip.divide(cuts)[0]._render_cache is not None for strip in strips)
        for strip, out in zip(strips, made, strict=True):
            strip._render_cache = None
            assert strip.render(app.console) == out
        source.release.set()
        await settle(pilot)
