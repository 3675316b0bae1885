"""The main screen's partial updates (inspector/partial_compositor.py): what reaches the terminal is
what a full render shows, and a step renders only the widgets whose rows changed.

The terminal is modelled as a grid of cells: a full update (LayoutUpdate) replaces it, a partial one
(ChopsUpdate) writes its chops inside its spans, as ChopsUpdate.__rich_console__ does. After each
action the grid must equal a full render of the screen: a row left stale by a partial refresh fails."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import pytest
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual._compositor import ChopsUpdate, LayoutUpdate
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Tabs

from inspector.app import InspectorApp
from inspector.partial_compositor import DirtyRowsCompositor
from inspector.sources.synthetic import SyntheticSource
from panels.content_viewer import ContentBody
from panels.manifest import ManifestPanel
from panels.row_frame import FramedRows
from tests.tui.conftest import settle

Cell = tuple[str, Style | None]


def _cells(segments: Iterable[Segment]) -> list[Cell]:
    out: list[Cell] = []
    for text, style, control in segments:
        if control:
            continue
        # Meta (click handlers, offsets) is not drawn: compare what a person sees.
        shown = style.copy() if style is not None else None
        if shown is not None:
            shown._meta = None
        for char in text:
            out.append((char, shown))
            out.extend([("", shown)] * (cell_len(char) - 1))
    return out


class Terminal:
    """The cells on screen, as the updates the app sent leave them."""

    def __init__(self) -> None:
        self.rows: list[list[Cell]] = []
        self.partial = 0

    def apply(self, update: object) -> None:
        if isinstance(update, LayoutUpdate):
            self.rows = [
                _cells(Segment(t, s) for strip in line for t, s, _ in strip) for line in update.strips
            ]
        elif isinstance(update, ChopsUpdate):
            self.partial += 1
            for y, x1, x2 in update.spans:
                for end, (x, strip) in zip(update.chop_ends[y], update.chops[y].items(), strict=False):
                    if strip is None or x >= x2 or end <= x1:
                        continue
                    # A chop inside its span is written whole, even past its own end (as
                    # ChopsUpdate does: the compositor hands one chop for a widget's whole row);
                    # one that crosses the span's edge is cut to it.
                    whole = x1 <= x and end <= x2
                    for i, cell in enumerate(_cells(strip)):
                        if whole or x1 <= x + i < x2:
                            self.rows[y][x + i] = cell


def watch_terminal(app: InspectorApp) -> Terminal:
    term = Terminal()
    display = app._display

    def capture(screen: object, renderable: object) -> None:
        if screen is app.screen:
            term.apply(renderable)
        display(screen, renderable)  # type: ignore[arg-type]

    app._display = capture  # type: ignore[method-assign]
    return term


def full_render(app: InspectorApp) -> list[list[Cell]]:
    return [_cells(strip) for strip in app.screen._compositor.render_strips()]


def stale_rows(term: Terminal, app: InspectorApp) -> list[int]:
    want = full_render(app)
    return [y for y, (a, b) in enumerate(zip(term.rows, want, strict=True)) if a != b]


@pytest.mark.parametrize("size", [(120, 40), (200, 60)])
async def test_partial_updates_leave_nothing_stale(size: tuple[int, int]) -> None:
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert isinstance(app.screen._compositor, DirtyRowsCompositor)
        term = watch_terminal(app)
        app.screen.refresh()  # a full update starts the model of the terminal
        await pilot.pause()
        assert term.rows and not stale_rows(term, app)
        actions = [
            ("home",),
            ("right",),
            ("right",),
            ("right",),
            ("left",),
            ("down",),
            ("right",),
            ("down", "down"),
            ("right",),
            ("w",),
            ("right",),
            ("c",),
            ("right",),
            ("b",),
            ("right",),
            ("pagedown",),
            ("up",),
            ("end",),
            ("left",),
        ]
        for keys in actions:
            await pilot.press(*keys)
            await settle(pilot)  # (which waits for the tab underline to stop sliding: conftest.moving)
            assert not stale_rows(term, app), f"stale rows after {keys}"
        assert term.partial > len(actions) / 2  # the steps were drawn as partial updates


async def test_a_step_renders_only_the_widgets_that_changed() -> None:
    """Fails on Textual's own partial update, which renders every widget in the dirty regions'
    bounding box: a step dirties the status line and the manifest, so that was all of them."""
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("home")
        await settle(pilot)
        rendered: Counter[str] = Counter()
        render_lines = Widget.render_lines
        body_render = ContentBody.render_lines
        manifest_render = ManifestPanel.render_lines
        framed_render = FramedRows.render_lines  # the overview panels' and the manifest's rows

        def count(widget: Widget, crop: object) -> object:
            rendered[type(widget).__name__] += 1
            return render_lines(widget, crop)  # type: ignore[arg-type]

        def count_framed(widget: FramedRows, crop: object) -> object:
            rendered[type(widget).__name__] += 1
            return framed_render(widget, crop)  # type: ignore[arg-type]

        def count_body(widget: ContentBody, crop: object) -> object:
            rendered["ContentBody"] += 1
            return body_render(widget, crop)  # type: ignore[arg-type]

        def count_manifest(widget: ManifestPanel, crop: object) -> object:
            rendered["ManifestPanel"] += 1
            return manifest_render(widget, crop)  # type: ignore[arg-type]

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(Widget, "render_lines", count)
            mp.setattr(FramedRows, "render_lines", count_framed)
            mp.setattr(ContentBody, "render_lines", count_body)
            mp.setattr(ManifestPanel, "render_lines", count_manifest)
            await pilot.press("right")
            await settle(pilot)
        assert app.index == 1
        assert rendered["TierPanel"] and rendered["MarkupLine"]  # the turn's figures and the status line
        for unchanged in (Footer.__name__, Tabs.__name__, "ContentTab", "Underline"):
            assert not rendered[unchanged], f"{unchanged} rendered on a step: {dict(rendered)}"


async def test_a_failing_partial_update_falls_back_to_textuals_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The override leans on Textual internals: if it ever raises (another Textual), the screen
    draws with Textual's own partial update from then on, and nothing is left stale or lost."""
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        compositor = app.screen._compositor
        assert isinstance(compositor, DirtyRowsCompositor)
        term = watch_terminal(app)
        app.screen.refresh()
        await pilot.pause()
        calls = Counter[str]()

        def broken(self: DirtyRowsCompositor, regions: object) -> None:
            calls["override"] += 1
            raise AttributeError("a Textual without the internals this override reads")

        monkeypatch.setattr(DirtyRowsCompositor, "_render_partial", broken)
        for keys in [("right",), ("right",), ("down",), ("left",)]:
            await pilot.press(*keys)
            await settle(pilot)
            assert not stale_rows(term, app), f"stale rows after {keys}"
        assert calls["override"] == 1  # tried once, then Textual's own for good
        assert compositor._usable is False and term.partial >= 3


class SameLength(SyntheticSource):
    """Every turn's section text is new but has as many lines: the content's scrollbar never changes."""

    def section_content(self, turn: int, section_id: str) -> str:
        return "\n".join(f"turn {turn} {section_id} line {i}" for i in range(400))


@pytest.mark.parametrize("size", [(120, 40), (200, 60)])
async def test_a_step_repaints_the_text_not_the_scrollbar_beside_it(size: tuple[int, int]) -> None:
    # Before, the body repainted its whole region, so every step drew each row of its scrollbar again.
    from panels.scrollbar_rows import RowScrollBar

    app = InspectorApp(SameLength(40), start_turn=10)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        term = watch_terminal(app)
        app.screen.refresh()
        await pilot.pause()
        drawn: list[int] = []
        laid_out: list[int] = []
        bar_render, refresh_layout = RowScrollBar.render_lines, Screen._refresh_layout

        def count_bar(bar: RowScrollBar, crop: object) -> object:
            drawn.append(1)
            return bar_render(bar, crop)  # type: ignore[arg-type]

        def count_layout(screen: Screen, *args: object, **kwargs: object) -> None:
            laid_out.append(1)
            refresh_layout(screen, *args, **kwargs)  # type: ignore[arg-type]

        quiet = 0  # steps that laid nothing out (the synthetic manifest gains or loses rows on some turns,
        # and a layout pass redraws every scrollbar, as it should)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(RowScrollBar, "render_lines", count_bar)
            mp.setattr(Screen, "_refresh_layout", count_layout)
            for keys in (("right",),) * 4 + (("left",),) * 4:
                drawn.clear()
                laid_out.clear()
                await pilot.press(*keys)
                await settle(pilot)
                if not laid_out:
                    quiet += 1
                    assert not drawn, f"the scrollbar was drawn on a step that moved nothing: {keys}"
                mp.undo()  # (the check below renders the whole screen, the bar included)
                assert not stale_rows(term, app), f"stale rows after {keys}"
                mp.setattr(RowScrollBar, "render_lines", count_bar)
                mp.setattr(Screen, "_refresh_layout", count_layout)
        assert quiet >= 2
        body = app.query_one(ContentBody)
        assert body.document is not None and body.document.plain_lines[0].startswith("turn 10 ")
        drawn.clear()
        body.focus()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(RowScrollBar, "render_lines", count_bar)
            await pilot.press("pagedown")  # the thumb moves with the scroll: the bar is drawn
            await settle(pilot)
            assert drawn
        # (This model of the terminal does not follow a scroll, with Textual's own compositor either: a
        # full update starts it again.)
        app.screen.refresh()
        await pilot.pause()
        assert not stale_rows(term, app)
        await pilot.press("right")  # and back home with the next turn's text: the thumb goes up again
        await settle(pilot)
        assert body.scroll_y == 0 and not stale_rows(term, app)
