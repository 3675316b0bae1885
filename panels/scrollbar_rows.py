"""A vertical scrollbar drawn from row strips cached by what each row shows.

Textual's ScrollBar renders itself as one Rich renderable: any repaint, even of the two rows where a
thumb's end moved by an eighth of a cell, runs the whole bar through Rich (every row rendered, split,
styled and filtered). The content view's bar moves on most steps while a growing history is shown,
and that was the largest single piece of such a step's frame (1.5-2.2 ms at 200x60).

Every row of a vertical bar is one segment of `ScrollBarRender.render_bar` (the track above the thumb,
the track below it, the thumb, or one of its eight-step end glyphs), and the strip the frame gets for a
row depends only on that segment and on the bar's own styles, not on the row's position. So the rows
are keyed by their segment (text and style: the style carries the mouse action, which differs above
and below the thumb), and a frame looks them up. A segment not seen yet is drawn by Textual's own path:
the whole bar once, afresh, and every row of it is kept. A change of size, colours (hover, grab, theme)
or line filters starts the cache again.

A row so drawn is its segment over the bar's own style, through the line filters (`_row`). Where that
gives every row of the full drawing exactly, later segments of the same state are made that way, not by
drawing the whole bar again: each new thumb end did that (~2.8 ms at 200x60, History shown, on about a
quarter of the steps, most of the slowest ones once the table's border no longer repainted it whole).
"""

from __future__ import annotations

from math import ceil

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.color import Color as TextualColor
from textual.filter import LineFilter
from textual.geometry import Region
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip

_GREY, _MAGENTA = Color.parse("#555555"), Color.parse("bright_magenta")  # render_bar's own defaults
# Drawing the whole bar afresh through Textual empties the caches Widget keeps it in (Textual 8.2: its last
# renderable, its styled rows) and marks it dirty, through these private members. pyproject allows any
# Textual >= 1.0: where one of them is missing, the bar is Textual's own drawing (no row kept).
_REDRAW = ("_layout_cache", "_styles_cache")
_KEEPS_ROWS = hasattr(ScrollBar, "_set_dirty")


def thumb(height: int, virtual: float, window: float, position: float) -> tuple[int, int] | None:
    """Where a vertical scrollbar `height` cells high draws its thumb, in eighths of a cell (start,
    end), as textual's ScrollBarRender computes it; None: no thumb (the content fits)."""
    window = ceil(window) if window < virtual else 0
    virtual = ceil(virtual)
    if not (window and height and virtual and height != virtual):
        return None
    size = max(1, window / (virtual / height))
    start = int((height - size) * (position / (virtual - window)) * len(ScrollBarRender.VERTICAL_BARS))
    return start, start + ceil(size * len(ScrollBarRender.VERTICAL_BARS))


def bar_segments(bar: ScrollBarRender, height: int, width: int) -> list[Segment]:
    """The segment of each row of a vertical bar `height` rows high, as ScrollBarRender draws it for
    the console (its `__rich_console__`: the height is the bar's length, the width its thickness)."""
    style = bar.style if isinstance(bar.style, Style) else Style.parse(str(bar.style))
    drawn = bar.render_bar(size=height, window_size=bar.window_size, virtual_size=bar.virtual_size,
                           position=bar.position, vertical=True, thickness=width,
                           back_color=style.bgcolor or _GREY, bar_color=style.color or _MAGENTA)
    return list(drawn.segments)


def _row(segment: Segment, base: Style, background: TextualColor, filters: tuple[LineFilter, ...]) -> Strip:
    """A bar's row as Textual draws it (a ScrollBar has no border, padding, tint or hatch): the row's
    segment over the bar's own style, through the line filters. RowScrollBar uses it only in a state
    in which it gave every row of Textual's full drawing exactly."""
    strip = Strip([Segment(segment.text, base + segment.style if segment.style else base)])
    for line_filter in filters:
        strip = strip.apply_filter(line_filter, background)
    return strip


def rows_moved(height: int, before: tuple[int, int] | None, after: tuple[int, int] | None) -> range | list[int]:
    """The rows of a vertical bar whose drawing may differ between two thumbs (start, end in eighths of
    a cell, as `thumb` gives them; None: no thumb): the cells each end of the
    thumb moved across, or every row when a thumb appears or goes."""
    if before is None or after is None:
        return range(height) if before != after else []
    rows: set[int] = set()
    for a, b in ((before[0], after[0]), (before[1], after[1])):
        if a != b:
            rows.update(range(min(a, b) // 8, max(a, b) // 8 + 1))
    return sorted(y for y in rows if 0 <= y < height)


class RowScrollBar(ScrollBar):
    """A ScrollBar whose vertical rows come from a cache keyed by the segment they show (see above);
    anything else (horizontal, another renderer, a renderable that is not a bar) is Textual's."""

    def __init__(self, vertical: bool = True, name: str | None = None, *, thickness: int = 1) -> None:
        super().__init__(vertical=vertical, name=name, thickness=thickness)
        self._rows: dict[tuple[str, Style | None], Strip] = {}
        self._rows_for: tuple[object, ...] | None = None  # what the cached rows were drawn with
        # The state in which every row Textual drew was its segment in the bar's style and line filters
        # (`_row`): a row not drawn yet is made so then, without drawing the whole bar again.
        self._direct_for: tuple[object, ...] | None = None
        # Whether this Textual has the private members a kept row relies on (Widget sets them up in
        # its __init__): asked once here, not on every frame.
        self._keeps_rows = _KEEPS_ROWS and all(hasattr(self, name) for name in _REDRAW)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._rows_for = self._direct_for = None

    def render_lines(self, crop: Region) -> list[Strip]:
        width, height = self.size
        renderable = self.render() if self._keeps_rows and self.vertical and width and height else None
        if type(renderable) is not ScrollBarRender or not renderable.vertical:
            return super().render_lines(crop)
        segments = bar_segments(renderable, height, width)
        if len(segments) != height:
            return super().render_lines(crop)
        state = (width, height, renderable.style, tuple(self.get_line_filters()))
        if state != self._rows_for:
            self._rows, self._rows_for = {}, state
        rows, wanted = self._rows, crop.line_range
        missing = [y for y in wanted if (segments[y].text, segments[y].style) not in rows]
        if missing and self._direct_for == state:
            # Rows in this state are their segment in the bar's style (checked on every row of the last
            # full drawing): a new one is made so, not by drawing the whole bar again.
            base, background, filters = self.rich_style, self.background_colors[1], state[3]
            for y in missing:
                segment = segments[y]
                rows[(segment.text, segment.style)] = _row(segment, base, background, filters)
        elif missing:
            # Draw the whole bar afresh through Textual (no row of it from an earlier state) and keep each
            # row under its segment: the next frames of this bar find them.
            self._layout_cache.clear()  # where Widget keeps the bar's last renderable: drawn from now
            self._styles_cache.clear()
            self._set_dirty()
            drawn = super().render_lines(self.size.region)
            for segment, strip in zip(segments, drawn, strict=True):
                rows[(segment.text, segment.style)] = strip
            base, background, filters = self.rich_style, self.background_colors[1], state[3]
            if all(list(_row(segment, base, background, filters)) == list(strip)
                   for segment, strip in zip(segments, drawn, strict=True)):
                self._direct_for = state
        strips = [rows[(segments[y].text, segments[y].style)] for y in wanted]
        if crop.column_span != (0, width):
            strips = [strip.crop(*crop.column_span) for strip in strips]
        return strips

