"""One line of markup (the status line, the content view's title), drawn through LinePanel.

A Static re-renders its markup through Textual's generic Visual path on every update (~1 ms a step for
the status line, as much again for the title); here the line is parsed once per distinct markup and
drawn by LinePanel's line cache and fast path, with the same output (the same Content, the same styles)."""

from __future__ import annotations

from textual.content import Content

from panels.line_panel import LinePanel


class MarkupLine(LinePanel):
    def __init__(self, markup: str = "", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._markup = markup
        self._content = Content.from_markup(markup)

    @property
    def markup(self) -> str:
        return self._markup

    def update(self, markup: str) -> None:
        """Show this markup instead (as Static.update does with a string); nothing if it is the same."""
        if markup == self._markup:
            return
        self._markup = markup
        self._content = Content.from_markup(markup)
        self.redraw()

    def lines(self, width: int) -> list[Content]:
        return [self._content]
