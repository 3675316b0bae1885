"""`s` after a live session ends: ask where to save what was received."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class SaveScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    SaveScreen { align: center middle; }
    SaveScreen > Vertical { width: 64; height: auto; border: round $primary; background: $surface;
                            padding: 0 1; }
    SaveScreen Label { color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, default_path: str, turns: int) -> None:
        super().__init__()
        self.default_path, self.turns = default_path, turns

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Save {self.turns} received turns to (Enter to save, Esc to cancel):")
            yield Input(value=self.default_path, id="save-path")

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        if path:
            self.dismiss(path)
