"""`g`: a small modal asking for a turn number; dismisses with the turn or None."""

from __future__ import annotations

from textual.widgets import Input

from inspector.screens.prompt import InputPrompt, Refused


class GoToTurnScreen(InputPrompt[int]):
    DEFAULT_CSS = """
    GoToTurnScreen > Vertical { width: 44; }
    """
    QUESTION_ID = "goto-question"

    def __init__(self, first: int, last: int) -> None:
        super().__init__()
        self.first, self.last = first, last

    def question(self) -> str:
        return f"Go to turn ({self.first}–{self.last}), Enter to jump, Esc to cancel"

    def make_input(self) -> Input:
        return Input(placeholder=str(self.last), type="integer", id="turn-input")

    def set_last(self, last: int) -> None:
        """Attached to a live agent, turns go on arriving while the prompt is open: the range follows
        them. It stayed at the one the prompt opened with, and a turn that had arrived since was refused
        as "outside" it."""
        if last != self.last:
            self.last = last
            self.ask_again()
            if self.is_mounted:
                self.query_one("#turn-input", Input).placeholder = str(last)

    def answer(self, text: str) -> int:
        try:
            turn = int(text)
        except ValueError:
            raise Refused("type a turn number") from None
        if not self.first <= turn <= self.last:
            raise Refused(f"turn {turn} is outside {self.first}–{self.last}")
        return turn
