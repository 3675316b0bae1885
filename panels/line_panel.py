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
"""

from __future__ import annotations

from collections.abc import Sequence

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
        self._key: tuple[int, object] | None = None  # (width, style) the cache was rendered for
        # (segment style, x, y) -> the segment's Rich style on this panel's base style, with the offsets
        # text selection reads. Making one costs ~10-20 us (a Rich Style with meta); a step's changed
        # lines mostly put the same styles at the same places (numbers, bars, the sparkline), so most
        # are found here. Kept with the line cache: valid for one (width, base style).
        self._offset_styles: dict[tuple[VisualStyle, int, int], RichStyle] = {}

    def lines(self, width: int) -> list[Content]:
        raise NotImplementedError

    def render(self) -> Content:
        """The whole panel as one Content (what is shown, for tests and text selection)."""
        return Content("\n").join(self.lines(max(10, self.size.width)))

    def redraw(self) -> None:
        """Render what changed and repaint only the lines that differ from those on screen."""
        if not self.is_mounted or not self.size.width:
            self.refresh()
            return
        old = self._shown
        new = self._build()
        if len(new) != len(old):
            self.refresh()
            return
        width = self.size.width
        changed = [Region(0, y, width, 1) for y, (a, b) in enumerate(zip(old, new, strict=True)) if a is not b]
        if changed:  # one repaint for all of them: each call clears caches and wakes the screen
            repaint(self, *changed)

    def _build(self) -> list[Strip]:
        width = self.size.width
        style = self.visual_style
        selection = self.text_selection
        restyled = self._key != (width, style)
        if restyled or selection is not None or len(self._rendered) > CACHE_LINES:
            self._rendered = {}
            self._key = (width, style)
        if restyled or len(self._offset_styles) > CACHE_STYLES:
            self._offset_styles = {}
        strips: list[Strip] = []
        lines = [part for line in self.lines(max(10, width)) for part in line.split("\n")]
        for y, line in enumerate(lines):
            # Keyed by text and spans: Content's own equality compares the text only.
            key = (y, line.plain, tuple(line.spans))
            rendered = self._rendered.get(key) if selection is None else None
            if rendered is None:
                rendered = self._render_line(line, y, width, style, selection is None)
                if selection is None:
                    self._rendered[key] = rendered
            strips.extend(rendered)
        self._shown = strips
        return strips

    def _render_line(self, line: Content, y: int, width: int, style: VisualStyle, fast: bool) -> list[Strip]:
        """One line's rows, with the (x, y) offsets text selection reads, as in the whole panel's render."""
        if fast and line.cell_length <= width and self.styles.text_align in ("left", "start"):
            # A line that fits needs no wrapping or aligning: Content.to_strip's own loop, without the
            # formatting machinery around it (most of the cost for a short line).
            segments, x = [], 0
            made = self._offset_styles
            for text, text_style in line.render(style, end="", parse_style=self._get_style):
                key = (text_style, x, y)
                rich_style = made.get(key)
                if rich_style is None:
                    rich_style = made[key] = (style + text_style).rich_style_with_offset(x, y)
                segments.append(Segment(text, rich_style))
                x += len(text)
            return [Strip(segments, line.cell_length)]
        # Rendered below y empty lines, so the strips carry this line's y in their offsets.
        return Visual.to_strips(self, Content("\n" * y) + line, width, None, style)[y:]

    def render_line(self, y: int) -> Strip:
        if self._key != (self.size.width, self.visual_style) or not self._shown:
            self._build()
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
