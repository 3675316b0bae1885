"""Content viewer: one section's content, or the whole serialized request, highlighted.

The app fetches text from the source in a worker and calls `show()`; the viewer never reads files."""

from __future__ import annotations

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

    def compose(self) -> ComposeResult:
        yield Static("select a section (Enter) or press b for the request body", id="content-title")
        yield Static("", id="content-body")

    def show(self, title: str, text: str) -> None:
        if (title, text) == (self._title, self._text) and self._theme_dark == self.app.current_theme.dark:
            return  # the same section of the same turn: nothing to redraw
        self._title, self._text = title, text
        self._theme_dark = self.app.current_theme.dark
        language = guess_language(text)
        self.query_one("#content-title", Static).update(f"{title}  ·  {language}  ·  {len(text):,} chars")
        dark = self.app.current_theme.dark
        self.query_one("#content-body", Static).update(highlight(text, language, dark))
        self.scroll_home(animate=False)

    @property
    def title(self) -> str:
        return self._title

    @property
    def text(self) -> str:
        """The text shown (before highlighting)."""
        return self._text
