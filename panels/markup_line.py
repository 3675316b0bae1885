"""One line of markup (the status line, the content view's title), drawn through LinePanel.

A Static re-renders its markup through Textual's generic Visual path on every update (~1 ms a step for
the status line, as much again for the title); here the line is drawn by LinePanel's line cache and fast
path, with the same output (the same Content, the same styles).

Parsing markup was still ~0.3 ms a step for the status line, whose text changes with every turn. So a
line may be given as parts: balanced markup fragments (each closes the tags it opens), parsed once per
distinct fragment and kept, and (text, style) pairs, literal text in one style with no parsing at all
(the turn number). Joined, they give the Content that parsing the joined markup gives (same text, same
spans: tests/tui/test_markup_parts.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from textual.content import Content
from textual.visual import VisualType
from textual.widget import Widget

from panels.fmt import literal
from panels.line_panel import LinePanel

Part = str | tuple[str, str]  # markup, or (literal text, style)


@lru_cache(maxsize=512)
def parse(markup: str) -> Content:
    """The Content of one balanced markup fragment (kept: the status line's fragments repeat)."""
    return Content.from_markup(markup)


def assemble(parts: Sequence[Part]) -> Content:
    """The parts joined into one Content."""
    contents = [parse(part) if isinstance(part, str)
                else Content.styled(part[0], part[1]) if part[1] else Content(part[0]) for part in parts]
    return contents[0] if len(contents) == 1 else Content("").join(contents)


def as_markup(parts: Sequence[Part]) -> str:
    """The parts as one markup string (what they stand for)."""
    return "".join(part if isinstance(part, str) else f"[{part[1]}]{literal(part[0])}[/]" if part[1]
                   else literal(part[0]) for part in parts)


class MarkupLine(LinePanel):
    def __init__(self, markup: str = "", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._parts: tuple[Part, ...] = (markup,)
        self._content = Content.from_markup(markup)
        # Called with the new width when the line is laid out at another width: an owner whose parts
        # depend on the width (the status line) updates them then.
        self.on_width: Callable[[int], object] | None = None
        # The tooltip, made when the mouse rests on the line (not on every update): what a line cut to
        # the terminal's width left out. None: the tooltip set as on any widget.
        self.whole: Callable[[], str | None] | None = None

    @property
    def tooltip(self) -> VisualType | None:
        return self.whole() if self.whole is not None else self._tooltip

    @tooltip.setter
    def tooltip(self, tooltip: VisualType | None) -> None:
        Widget.tooltip.fset(self, tooltip)  # type: ignore[attr-defined]

    def on_resize(self) -> None:
        super().on_resize()
        if self.on_width is not None:
            self.on_width(self.content_region.width)

    @property
    def markup(self) -> str:
        return as_markup(self._parts)

    def update(self, markup: str | Sequence[Part]) -> None:
        """Show this markup instead (as Static.update does with a string), or these parts joined
        (see the module's doc); nothing if it is the same."""
        parts = (markup,) if isinstance(markup, str) else tuple(markup)
        if parts == self._parts:
            return
        self._parts = parts
        self._content = assemble(parts)
        self.redraw()

    def lines(self, width: int) -> list[Content]:
        return [self._content]
