"""LinePanel keeps the Rich style of each (segment style, x, y) it has drawn (panels/line_panel.py): a
changed line whose segments sit where the same styles sat before makes no new style, and what it draws
is what a panel drawing from scratch draws, selection offsets included."""

from __future__ import annotations

import random

import pytest
from textual.app import App, ComposeResult
from textual.content import Content
from textual.style import Style

from panels.line_panel import LinePanel

STYLES = ("", "bold", "$text-muted", "$accent", "bold $error", "reverse", "$success on $panel", "italic $warning")


class Lines(LinePanel):
    DEFAULT_CSS = "Lines { height: auto; border: round $primary; }"

    def __init__(self, shown: list[Content], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.shown = shown

    def lines(self, width: int) -> list[Content]:
        return self.shown


class Two(App[None]):
    def compose(self) -> ComposeResult:
        yield Lines([Content("")] * 3, id="warm")
        yield Lines([Content("")] * 3, id="cold")


def _line(rng: random.Random) -> Content:
    parts = [("".join(rng.choice("ab 01█─▒") for _ in range(rng.randint(1, 6))), rng.choice(STYLES))
             for _ in range(rng.randint(1, 8))]
    return Content.assemble(*parts)


def _drawn(panel: Lines) -> list[list[tuple[str, object]]]:
    return [[(s.text, s.style) for s in panel.render_line(y)] for y in range(len(panel.shown))]


async def test_a_warm_panel_draws_what_a_fresh_one_draws() -> None:
    rng = random.Random(15)
    app = Two()
    async with app.run_test(size=(60, 12)) as pilot:
        warm, cold = app.query_one("#warm", Lines), app.query_one("#cold", Lines)
        for _ in range(150):
            lines = [_line(rng) for _ in range(3)]
            warm.shown = lines
            warm.redraw()
            cold.shown = lines
            cold._offset_styles = {}  # nothing kept: every style made afresh
            cold._rendered = {}
            cold.redraw()
            assert _drawn(warm) == _drawn(cold)
        await pilot.pause()


async def test_a_line_with_new_numbers_in_the_same_places_makes_no_new_style(
        monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[int, int]] = []
    original = Style.rich_style_with_offset

    def counted(self: Style, x: int, y: int) -> object:
        made.append((x, y))
        return original(self, x, y)

    app = Two()
    async with app.run_test(size=(60, 12)):
        panel = app.query_one("#warm", Lines)

        def head(raw: float, predicted: float) -> Content:
            return Content.assemble("raw ", (f"{raw:.2f}", "bold"), "  predictive ", (f"{predicted:.2f}", "bold $accent"))

        panel.shown = [head(0.52, 0.55), Content.assemble(("█" * 20, "$success"), ("─" * 10, "$text-muted"))]
        panel.redraw()
        monkeypatch.setattr(Style, "rich_style_with_offset", counted)
        panel.shown = [head(0.61, 0.64), Content.assemble(("█" * 20, "$success"), ("─" * 10, "$text-muted"))]
        panel.redraw()
        assert "0.61" in panel.render_line(0).text
        assert made == []  # before: one new Rich style per segment of the changed line (4 here)
