"""Content viewer: one section's content, or the whole serialized request, highlighted.

The app fetches text from the source in a worker and calls `show()`; the viewer never reads files."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from panels.highlight import guess_language, highlight
from panels.keys import TURN_KEYS


class ContentViewer(VerticalScroll):
    DEFAULT_CSS = """
    ContentViewer { height: 1fr; }
    ContentViewer #content-title { color: $text-muted; text-style: bold; }
    """
    # Left/Right/Home/End step turns here too; scrolling stays on Up/Down/PageUp/PageDown.
    BINDINGS = TURN_KEYS

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._text, self._title = "", ""
        self._theme_dark: bool | None = None
        self._title_fits = False  # the title shown fits on one line

    def compose(self) -> ComposeResult:
        yield Static("select a section (Enter) or press b for the request body", id="content-title")
        yield Static("", id="content-body")

    def show(self, title: str, text: str, highlighted: Text | None = None, dark: bool | None = None) -> None:
        """Show `text` under `title`. `highlighted` is the text already highlighted (off the UI thread)
        for the `dark` or light theme; it is used when that is still the current theme."""
        if (title, text) == (self._title, self._text) and self._theme_dark == self.app.current_theme.dark:
            return  # the same section of the same turn: nothing to redraw
        same_body = text == self._text and self._theme_dark == self.app.current_theme.dark
        self._title, self._text = title, text
        self._theme_dark = self.app.current_theme.dark
        language = guess_language(text)
        heading = f"{title}  ·  {language}  ·  {len(text):,} chars"
        title_widget = self.query_one("#content-title", Static)
        # A one-line title replaced by another one-line title keeps its height: no layout pass needed.
        width = title_widget.size.width
        fits = 0 < width and cell_len(heading) <= width
        title_widget.update(heading, layout=not (fits and self._title_fits))
        self._title_fits = fits
        if same_body:
            return  # stepping past a section that did not change (tools, identity): nothing else to redraw
        current = self.app.current_theme.dark
        body = highlighted if highlighted is not None and dark == current else highlight(text, language, current)
        self.query_one("#content-body", Static).update(body)
        self.scroll_home(animate=False)

    @property
    def title(self) -> str:
        return self._title

    @property
    def text(self) -> str:
        """The text shown (before highlighting)."""
        return self._text
