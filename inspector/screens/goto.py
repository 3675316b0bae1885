"""`g`: a small modal asking for a turn number; dismisses with the turn or None."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from inspector.keys_footer import KeysFooter


class GoToTurnScreen(ModalScreen[int | None]):
    DEFAULT_CSS = """
    GoToTurnScreen { align: center middle; }
    GoToTurnScreen > Vertical { width: 44; max-width: 100%; height: auto; border: round $primary; background: $surface;
                                padding: 0 1; }
    GoToTurnScreen Label { color: $text-muted; width: 100%; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, first: int, last: int) -> None:
        super().__init__()
        self.first, self.last = first, last

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._question(), id="goto-question")
            yield Input(placeholder=str(self.last), type="integer", id="turn-input")
        # Its own footer: the main screen's showed through beneath it, offering keys that do other things
        # here (the arrows move the text cursor, g and q are typed).
        yield KeysFooter(compact=True)

    def _question(self) -> str:
        return f"Go to turn ({self.first}–{self.last}), Enter to jump, Esc to cancel"

    def set_last(self, last: int) -> None:
        """Attached to a live agent, turns go on arriving while the prompt is open: the range follows
        them. It stayed at the one the prompt opened with, and a turn that had arrived since was refused
        as "outside" it."""
        if last != self.last:
            self.last = last
            if self.is_mounted:
                self.query_one("#goto-question", Label).update(self._question())
                self.query_one("#turn-input", Input).placeholder = str(last)

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        try:
            turn = int(event.value)
        except ValueError:
            self.notify("type a turn number", severity="warning")
            return
        if not self.first <= turn <= self.last:
            self.notify(f"turn {turn} is outside {self.first}–{self.last}", severity="warning")
            return
        self.dismiss(turn)
