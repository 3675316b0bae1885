"""A panel drawn line by line, repainting only the lines whose content changed.

The overview panels (pressure, tier, cache layout, timeline strip) show a few lines each, and a step
changes some of them (the turn, the bars) and not others (legends, reserves, the sparkline's start).
A plain `render()` widget turns all of its Content into Strips on every refresh (a few ms a panel, per
step). Here `lines()` builds the Content of each line, each line is rendered once per distinct Content
(cached), and only lines that differ from what is on screen are marked for repaint, so the compositor
redraws those rows and nothing else of the panel. Output is the same as `render()` would give for the
lines joined with newlines: each line goes through Textual's own `Visual.to_strips` (wrapping included).
The border and padding around a changed row are put on by FramedRows (row_frame.py), not by Textual's
styles cache.

A line may also be given as `Keyed(key, build)`: what it is made from (the key) and how to make its
Content. A line whose key is cached on its row is neither built nor rendered: most of a panel's lines
show the same values as on the turn before (the legends, the tick labels, a bar that moved by less than
a cell), and building their Content (loops over every column, spans assembled) was about as costly as
rendering it. The key must hold everything the line is made from but the width and the base style (the
cache is emptied when either changes: a resize, a theme, a new CSS rule).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import NamedTuple

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.content import Content
from textual.geometry import Region
from textual.selection import Selection
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual
from textual.widget import Widget

from panels.repaint import repaint
from panels.row_frame import FramedRows

CACHE_LINES = 256  # distinct line Contents kept per panel (a few per step: ample for stepping back)
CACHE_STYLES = 4096  # distinct (style, x, y) of segments kept per panel


class Keyed(NamedTuple):
    """A line given by what it is made from (`key`) and how to make it (`build`): see the module's doc."""

    key: Hashable
    build: Callable[[], Content]


Line = Content | Keyed


def content_of(line: Line) -> Content:
    return line.build() if isinstance(line, Keyed) else line


def merge_runs(cells: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(text, style) cells with neighbours of the same style joined: one span per run, not per cell."""
    out: list[tuple[str, str]] = []
    for text, style in cells:
        if out and out[-1][1] == style:
            out[-1] = (out[-1][0] + text, style)
        else:
            out.append((text, style))
    return out


class LinePanel(FramedRows, Widget):
    """Subclasses implement `lines(width)`, and call `redraw()` when what they show changes (their
    reactives are declared with repaint=False, so nothing repaints the whole panel behind its back)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: list[Strip] = []
        self._rendered: dict[tuple[object, ...], list[Strip]] = {}  # (line number, text, spans) -> its rows
        self._keyed: dict[tuple[int, Hashable], tuple[int, list[Strip]]] = {}  # (line number, key) -> (lines, rows)
        self._key: tuple[int, object] | None = None  # (width, style) the cache was rendered for
        self._checked = False  # within render_lines, which has made sure the lines are current
        self._styled: dict[str | VisualStyle, VisualStyle] = {}  # see _build
        # (segment style, x, y) -> the segment's Rich style on this panel's base style, with the offsets
        # text selection reads. Making one costs ~10-20 us (a Rich Style with meta); a step's changed
        # lines mostly put the same styles at the same places (numbers, bars, the sparkline), so most
        # are found here. Kept with the line cache: valid for one (width, base style).
        self._offset_styles: dict[tuple[VisualStyle, int, int], RichStyle] = {}

    def lines(self, width: int) -> Sequence[Line]:
        raise NotImplementedError

    def render(self) -> Content:
        """The whole panel as one Content (what is shown, for tests and text selection)."""
        return Content("\n").join([content_of(line) for line in self.lines(max(10, self.size.width))])

    def redraw(self) -> None:
        """Render what changed and repaint only the lines that differ from those on screen."""
        width = self.size.width if self.is_mounted else 0  # (`size` is not free: asked once here)
        if not width:
            self.refresh()
            return
        old = self._shown
        new = self._build(width)
        if len(new) != len(old):
            self.refresh()
            return
        changed = [Region(0, y, width, 1) for y, (a, b) in enumerate(zip(old, new, strict=True)) if a is not b]
        if changed:  # one repaint for all of them: each call clears caches and wakes the screen
            repaint(self, *changed)

    def _build(self, width: int) -> list[Strip]:
        style = self.visual_style
        selection = self.text_selection
        restyled = self._key != (width, style)
        if restyled or selection is not None or len(self._rendered) > CACHE_LINES or len(self._keyed) > CACHE_LINES:
            self._rendered, self._keyed = {}, {}
            self._key = (width, style)
        if restyled or len(self._offset_styles) > CACHE_STYLES:
            self._offset_styles = {}
        # A span's style, parsed (theme variables resolved) and put over the base style: once a build,
        # so a theme's new variables are read by the next one.
        self._styled = {}
        strips: list[Strip] = []
        cached = self._rendered if selection is None else None
        keyed = self._keyed if selection is None else None
        y = 0  # the line's first row number (of the lines split at newlines, as `render` joins them)
        for line in self.lines(max(10, width)):
            if isinstance(line, Keyed):
                key = (y, line.key)
                found = keyed.get(key) if keyed is not None else None
                if found is None:
                    found = self._line_rows(line.build(), y, width, style, cached)
                    if keyed is not None:
                        keyed[key] = found
                count, rows = found
            else:
                count, rows = self._line_rows(line, y, width, style, cached)
            strips.extend(rows)
            y += count
        self._shown = strips
        return strips

    def _line_rows(
        self, content: Content, y: int, width: int, style: VisualStyle, cached: dict[tuple[object, ...], list[Strip]] | None
    ) -> tuple[int, list[Strip]]:
        """How many lines `content` is once split at newlines, and their rows (each line's cached)."""
        parts = content.split("\n") if "\n" in content.plain else [content]
        rows: list[Strip] = []
        for i, part in enumerate(parts, y):
            # Keyed by text and spans: Content's own equality compares the text only.
            key = (i, part.plain, tuple(part.spans))
            rendered = cached.get(key) if cached is not None else None
            if rendered is None:
                rendered = self._render_line(part, i, width, style, cached is not None)
                if cached is not None:
                    cached[key] = rendered
            rows.extend(rendered)
        return len(parts), rows

    def _render_line(self, line: Content, y: int, width: int, style: VisualStyle, fast: bool) -> list[Strip]:
        """One line's rows, with the (x, y) offsets text selection reads, as in the whole panel's render."""
        if fast and line.cell_length <= width and self.styles.text_align in ("left", "start"):
            # A line that fits needs no wrapping or aligning: Content.to_strip's own loop, without the
            # formatting machinery around it (most of the cost for a short line).
            segments, x = [], 0
            made = self._offset_styles
            pieces: Iterable[tuple[str, VisualStyle]] | None = self._pieces(line, style)
            if pieces is None:
                pieces = line.render(style, end="", parse_style=self._get_style)
            for text, text_style in pieces:
                key = (text_style, x, y)
                rich_style = made.get(key)
                if rich_style is None:
                    rich_style = made[key] = (style + text_style).rich_style_with_offset(x, y)
                segments.append(Segment(text, rich_style))
                x += len(text)
            return [Strip(segments, line.cell_length)]
        # Rendered below y empty lines, so the strips carry this line's y in their offsets.
        return Visual.to_strips(self, Content("\n" * y) + line, width, None, style)[y:]

    def _pieces(self, line: Content, base: VisualStyle) -> list[tuple[str, VisualStyle]] | None:
        """What `line.render(base)` yields for a line whose spans lie in order and apart (the panels'
        lines are assembled from (text, style) parts): the text between spans in the base style, each
        span's text in the base style plus its own; None for any other line (Content.render's general
        path, a stack of the styles open at each offset, cost more than the rest of drawing a line).
        tests/tui/test_line_pieces.py compares the two."""
        text, spans = line.plain, line.spans
        if not spans:
            return [(text, base)]  # as Content.render: an empty line too
        styled = self._styled
        pieces: list[tuple[str, VisualStyle]] = []
        end = 0
        for span in spans:
            start, stop, span_style = span
            if start < end or stop < start:
                return None
            if start > end:
                pieces.append((text[end:start], base))
            if stop > start:
                text_style = styled.get(span_style)
                if text_style is None:
                    parsed = self._get_style(span_style) if isinstance(span_style, str) else span_style
                    text_style = styled[span_style] = base + parsed
                pieces.append((text[start:stop], text_style))
            end = stop
        if end > len(text):
            return None
        if end < len(text):
            pieces.append((text[end:], base))
        return pieces

    def render_lines(self, crop: Region) -> list[Strip]:
        # Checked once a frame, not once a row (`size` and `visual_style` are ~5 us each).
        self._current()
        self._checked = True
        try:
            return super().render_lines(crop)
        finally:
            self._checked = False

    def _current(self) -> None:
        width = self.size.width
        if self._key != (width, self.visual_style) or not self._shown:
            self._build(width)

    def render_line(self, y: int) -> Strip:
        if not self._checked:
            self._current()
        if y < len(self._shown):
            return self._shown[y]
        return Strip.blank(self.size.width, self.visual_style.rich_style)

    def on_resize(self) -> None:
        self._key = None
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._key = None

    def selection_updated(self, selection: Selection | None) -> None:
        self._key = None
        self.refresh()
