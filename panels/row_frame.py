"""The border and padding around a widget's content rows, put around new content without Textual's styles cache.

Textual draws a widget's row through its styles cache (Textual 8.2, `StylesCache.render_widget` and
`render_line`): for every changed row it works out the border's segments, the padding, tint, opacity,
hatch and outline again, then applies the app's line filters to the whole row. For the overview panels
a step changes a dozen such rows (the figures, the bars, the timeline's marker, the status line; the
manifest's rows too), and that styling was ~3 ms of a History step at 200x60.

A content row of a widget with no tint, opacity, hatch, text opacity or outline is always the same
three pieces: what lies left of the content (the left border and padding), the content padded to the
content width, and what lies right of it. `RowFrame` keeps the two outer pieces, taken from a row the
styles cache drew, and checks once that joining them around that row's content gives exactly the row
the styles cache drew (segment by segment, styles included). If it does not (some style it does not
model), the widget keeps Textual's path. The line filters Textual applies to the whole row work segment
by segment, so filtering the content alone and joining it to the (already filtered) outer pieces gives
the same segments. A frame holds for one key (`framing_key`: the styles of the widget and its ancestors,
its size, the line filters); under a new key it is learned again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.style import Style as RichStyle
from textual.color import Color
from textual.css.styles import RenderStyles
from textual.filter import LineFilter
from textual.geometry import Region
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.widget import Widget

FramingKey = tuple[object, ...]

# What this module reads of Textual's and Rich's private state (present in Textual 8.2): a widget's style
# update count and a style's link id. pyproject allows any Textual >= 1.0, so a version without them keeps
# Textual's own drawing for every row (and nothing is kept by style key) rather than failing on a step.
FRAMING = isinstance(getattr(RenderStyles, "_cache_key", None), property) and hasattr(RichStyle(), "_link_id")
CACHE_ROWS = 512  # framed rows kept per widget, by their content strip (stepping back finds them)


def styles_key(widget: Widget) -> tuple[int, ...]:
    """A key that changes whenever the styles of the widget or of any of its ancestors change (Textual
    counts each style's updates): what it draws with (backgrounds, colours, borders) comes from them."""
    return tuple(node.styles._cache_key for node in widget.ancestors_with_self)


def kept_rich_style(widget: Widget) -> RichStyle:
    """`widget.rich_style`, kept while the styles it is made from (the widget's and its ancestors') are
    unchanged. Textual keeps it too, but every repaint empties that (Widget.refresh, and panels/repaint.py
    does as refresh does), and it walks the ancestors' backgrounds and colours: ~0.1 ms, asked by the
    content body's and the manifest's frames on every step."""
    if not FRAMING:
        return widget.rich_style
    key = styles_key(widget)
    kept: tuple[tuple[int, ...], RichStyle] | None = getattr(widget, "_kept_rich_style", None)
    if kept is not None and kept[0] == key:
        return kept[1]
    style = widget.rich_style
    setattr(widget, "_kept_rich_style", (key, style))  # noqa: B010 (any widget, no attribute declared)
    return style


def framing_key(widget: Widget) -> FramingKey:
    """What a frame is made from: the styles of the widget and its ancestors (its border and padding
    among them), its size, and the app's line filters. (Scrollbars are not: the styles cache draws the
    rows under them as content rows, and the compositor draws the bars over them.)"""
    return (styles_key(widget), widget.outer_size, tuple(widget.get_line_filters()))


def plain_styles(widget: Widget) -> bool:
    """No style that changes a content row's segments beyond border and padding: Textual's styles cache
    would apply tint, opacity, text opacity, hatch or an outline to them."""
    styles = widget.styles
    if styles.tint.a or widget.opacity != 1.0 or styles.text_opacity != 1.0:
        return False
    if styles.has_rule("hatch") and styles.hatch != "none":
        return False
    if any(edge for edge, _color in styles.outline):
        return False
    hover = widget.hover_style
    return not (widget.auto_links and hover._link_id)


class RowFrame:
    """The pieces around one widget's content rows, and the rows framed so far (by their content strip)."""

    __slots__ = ("key", "top", "bottom", "left", "right", "content_width", "pad", "filters", "background", "rows")

    def __init__(self, key: FramingKey, top: int, bottom: int, left: Strip, right: Strip, content_width: int,
                 pad: RichStyle, filters: Sequence[LineFilter], background: Color) -> None:
        self.key = key
        self.top, self.bottom = top, bottom  # content rows are top <= y < bottom (widget coordinates)
        self.left, self.right = left, right
        self.content_width, self.pad = content_width, pad
        self.filters, self.background = tuple(filters), background
        self.rows: dict[int, tuple[Strip, Strip]] = {}  # id(content strip) -> (that strip, framed row)

    def frame(self, content: Strip) -> Strip:
        """The widget's row for this content strip, as Textual's styles cache would draw it."""
        found = self.rows.get(id(content))
        if found is not None and found[0] is content:
            return found[1]
        strip = content.adjust_cell_length(self.content_width, self.pad)
        for line_filter in self.filters:
            strip = strip.apply_filter(line_filter, self.background)
        framed = Strip.join([self.left, strip, self.right])
        if len(self.rows) >= CACHE_ROWS:
            self.rows.clear()
        self.rows[id(content)] = (content, framed)
        return framed

    def covers(self, crop: Region) -> bool:
        top, bottom = crop.line_span
        return self.top <= top and bottom <= self.bottom


def learn(widget: Widget, key: FramingKey, crop: Region, drawn: Sequence[Strip],
          content_row: Callable[[int], Strip]) -> RowFrame | bool:
    """A frame for `widget` if the first content row among `drawn` (the rows of `crop` as Textual's
    styles cache drew them) is exactly its content strip framed by the pieces left and right of it;
    False if it is not (the widget keeps Textual's path); True if `drawn` holds no full-width content
    row to learn from (a later frame may)."""
    width, height = widget.outer_size  # (`size` is the content area's)
    gutter = widget.styles.gutter  # border and padding: what the styles cache frames content rows with
    top, bottom = gutter.top, height - gutter.bottom
    rows = [y for y in crop.line_range if top <= y < bottom]
    if crop.column_span != (0, width) or not rows:
        return True
    if not (gutter.left + gutter.right < width) or bottom - top != widget.content_region.height:
        return False
    row = drawn[rows[0] - crop.y]
    if row.cell_length != width:
        return False
    base, background = widget.background_colors
    frame = RowFrame(key, top, bottom, row.crop(0, gutter.left), row.crop(width - gutter.right, width),
                     widget.content_region.width, VisualStyle(background=base + background).rich_style,
                     widget.get_line_filters(), background)
    framed = frame.frame(content_row(rows[0] - top))
    if framed.cell_length != width or list(framed) != list(row):
        return False
    return frame


def framed_rows(frame: RowFrame, crop: Region, content_row: Callable[[int], Strip], width: int) -> list[Strip]:
    """The rows of `crop` (all content rows of the frame), framed, cut to its columns."""
    top = frame.top
    rows = [frame.frame(content_row(y - top)) for y in crop.line_range]
    x1, x2 = crop.column_span
    if (x1, x2) != (0, width):
        rows = [row.crop(x1, x2) for row in rows]
    return rows


if TYPE_CHECKING:
    from textual.widget import Widget as _WidgetMixin
else:
    # A plain mixin at run time: Textual takes a widget's default CSS (and its CSS type names) along the
    # first DOMNode base of each class only, so a Widget subclass listed first would hide ScrollView's
    # rules (overflow: auto) from the manifest.
    _WidgetMixin = object


class FramedRows(_WidgetMixin):
    """Mixed into a widget (listed before its Widget base): its changed content rows are framed by a
    RowFrame (see the module's doc) instead of Textual's styles cache, once the frame has been learned
    from a row that cache drew and checked. Rows outside the content (border, padding rows) and anything
    the frame cannot show exactly are Textual's. New styles (its own or an ancestor's), a new size, or new
    line filters make a new key: the frame is learned again."""

    _frame: RowFrame | None = None
    _unframed: FramingKey | None = None  # the key a frame could not be learned for (not tried again)

    def render_lines(self, crop: Region) -> list[Strip]:
        if not FRAMING:
            return super().render_lines(crop)
        key = framing_key(self)
        frame = self._frame
        if frame is not None and frame.key == key and frame.covers(crop):
            return framed_rows(frame, crop, self.render_line, self.outer_size.width)
        rows = super().render_lines(crop)
        if (frame is None or frame.key != key) and key != self._unframed:
            learned = learn(self, key, crop, rows, self.render_line) if plain_styles(self) else False
            self._frame = learned if isinstance(learned, RowFrame) else None
            if learned is False:
                self._unframed = key
        return rows
