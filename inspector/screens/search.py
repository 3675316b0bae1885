"""`/`: a small modal asking for the text to search the session's sent content for; dismisses with it
(stripped of nothing: a leading space can matter) or None."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from inspector.keys_footer import KeysFooter


class SearchScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    SearchScreen { align: center middle; }
    SearchScreen > Vertical { width: 64; max-width: 100%; height: auto; border: round $primary; background: $surface;
                              padding: 0 1; }
    SearchScreen Label { color: $text-muted; width: 100%; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, last: str = "") -> None:
        super().__init__()
        self.last = last

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(
                "Search what each turn sent (any case): Enter jumps to the next turn it enters or "
                "leaves the prompt, Esc cancels",
                id="search-question",
            )
            yield Input(value=self.last, placeholder="text", id="search-input")
        yield KeysFooter(compact=True)

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self.notify("type the text to search for", severity="warning")
            return
        self.dismiss(event.value)
