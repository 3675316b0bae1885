"""LinePanel draws a line whose spans lie in order and apart without Content.render's general path
(`_pieces`), and a line given as Keyed only when no line of that key is drawn on its row yet
(panels/line_panel.py). What is drawn must be what Content.render and a panel drawing from scratch give,
across new figures, a resize and a theme change."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.content import Content, Span
from textual.style import Style
from textual.visual import Visual

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.cache_layout import CacheLayoutPanel
from panels.line_panel import LinePanel
from panels.pressure import PressurePanel, _covered
from tests.tui.conftest import settle

STYLES = ("", "bold", "$text-muted", "$accent", "bold $error", "reverse", "$success on $panel", "italic $warning",
          "not-a-style [", "$no-such-variable")
TEXT = st.text(alphabet="ab 01█─▒\t", max_size=8)


@st.composite
def lines(draw: st.DrawFn) -> Content:
    """Assembled lines (spans in order and apart, adjacent ones of the same style among them), and lines
    with spans in any order, nested, overlapping or empty (the general path's)."""
    if draw(st.booleans()):
        parts = draw(st.lists(st.one_of(TEXT, st.tuples(TEXT, st.sampled_from(STYLES))), max_size=8))
        return Content.assemble(*parts)
    text = draw(TEXT)
    spans = []
    for _ in range(draw(st.integers(0, 5))):  # (Content.render itself fails on a span past the text)
        start, end = sorted(draw(st.lists(st.integers(0, len(text)), min_size=2, max_size=2)))
        spans.append(Span(start, end, draw(st.one_of(st.sampled_from(STYLES), st.just(Style(bold=True))))))
    return Content(text, spans)


async def test_pieces_are_what_content_render_yields() -> None:
    app = InspectorApp(SyntheticSource(12), start_turn=3)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        panel = app.query_one(PressurePanel)
        base = panel.visual_style
        taken: list[bool] = []

        @settings(max_examples=400, deadline=None)
        @given(lines())
        def check(line: Content) -> None:
            panel._styled = {}
            pieces = panel._pieces(line, base)
            general = list(line.render(base, end="", parse_style=panel._get_style))
            taken.append(pieces is not None)
            if pieces is not None:
                assert pieces == general

        check()
        # Both paths were exercised, and every assembled line takes the short one.
        assert any(taken) and not all(taken)
        assembled = Content.assemble("raw ", ("0.52", "bold"), ("a", "$accent"), ("b", "$accent"), "  ")
        assert panel._pieces(assembled, base) is not None


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=0, max_value=2), unique=True, max_size=50),
       st.one_of(st.floats(), st.just(math.nan), st.just(math.inf), st.just(-math.inf)))
def test_a_bar_covers_the_columns_whose_fraction_it_reaches(fractions: list[float], pressure: float) -> None:
    fractions.sort()
    assert _covered(fractions, pressure) == sum(1 for f in fractions if f <= pressure)


def _drawn(panel: LinePanel) -> list[list[tuple[str, object]]]:
    return [[(s.text, s.style) for s in panel.render_line(y)] for y in range(len(panel._shown))]


def _fresh(panel: LinePanel) -> list[list[tuple[str, object]]]:
    """The panel's lines as a panel that never drew any would draw them."""
    strips = Visual.to_strips(panel, panel.render(), panel.size.width, None, panel.visual_style)
    return [[(s.text, s.style) for s in strip.simplify()] for strip in strips]


async def test_an_unchanged_line_is_not_built_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: every step built every line's Content (the bar's and the cache line's loops over every
    # column), also for lines showing what they showed the turn before.
    app = InspectorApp(SyntheticSource(40), start_turn=10)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot)
        built: list[int] = []
        original = Content.assemble

        def counted(*parts: object, **kwargs: object) -> Content:
            built.append(1)
            return original(*parts, **kwargs)  # type: ignore[arg-type]

        for cls in (PressurePanel, CacheLayoutPanel):
            panel = app.query_one(cls)
            trace = panel.trace
            assert trace is not None
            monkeypatch.setattr(Content, "assemble", counted)
            panel.redraw()  # what a step onto a turn showing the same figures does
            monkeypatch.setattr(Content, "assemble", original)
            assert built == [], cls.__name__
            # New figures: the lines showing them are built and drawn, and only those.
            changed = dict(trace, pressure={**trace["pressure"], "raw": trace["pressure"]["raw"] / 2})
            if cls is CacheLayoutPanel:
                changed = dict(trace, markers=[])
            before = _drawn(panel)
            monkeypatch.setattr(Content, "assemble", counted)
            panel.trace = changed
            monkeypatch.setattr(Content, "assemble", original)
            assert 0 < len(built) < len(before), cls.__name__
            assert _drawn(panel) != before and [[(t, s) for t, s in row if t] for row in _drawn(panel)] == [
                [(t, s) for t, s in row if t] for row in _fresh(panel)]
            built.clear()


async def test_kept_lines_follow_new_turns_a_resize_and_a_theme() -> None:
    app = InspectorApp(SyntheticSource(40), start_turn=20)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot)

        async def same_as_fresh(what: str) -> None:
            await settle(pilot)
            for cls in (PressurePanel, CacheLayoutPanel):
                panel = app.query_one(cls)
                drawn = [[(t, s) for t, s in row if t] for row in _drawn(panel)]
                assert drawn == [[(t, s) for t, s in row if t] for row in _fresh(panel)], (what, cls.__name__)

        for key in ("right", "right", "left", "left", "home", "end"):
            await pilot.press(key)
            await same_as_fresh(key)
        theme = app.theme
        app.theme = "cp-light"
        await same_as_fresh("theme")
        pressure = app.query_one(PressurePanel)
        assert pressure.visual_style != Style() and app.theme != theme
        await pilot.resize_terminal(150, 45)
        await same_as_fresh("resize")
        await pilot.press("left")
        await same_as_fresh("left after resize")
