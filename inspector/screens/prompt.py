"""The inspector's one-line input prompts (`g` go to turn, `/` search, `s` save): one modal base.

Each is a box in the middle of the screen holding a question (a Label) over an Input, with its own
footer: the main screen's showed through beneath it, offering keys that do other things here (the
arrows move the text cursor, g and q are typed). Esc dismisses with None; Enter hands the text to
`answer`, which returns the value to dismiss with or raises `Refused` with what to say: the prompt then
stays open with the text to correct (once dismissed, a problem was an error after the fact and the
person had to open the prompt and type it again)."""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from inspector.keys_footer import KeysFooter

T = TypeVar("T")


class Refused(Exception):
    """The typed text cannot be taken: the message says why (plain text, shown as a warning)."""


class InputPrompt(ModalScreen[T | None], Generic[T]):
    DEFAULT_CSS = """
    InputPrompt { align: center middle; }
    InputPrompt > Vertical { width: 64; max-width: 100%; height: auto; border: round $primary; background: $surface;
                             padding: 0 1; }
    InputPrompt Label { color: $text-muted; width: 100%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]
    QUESTION_ID: ClassVar[str] = "prompt-question"  # the question Label's id (tests and updates find it)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question(), id=self.QUESTION_ID)
            yield self.make_input()
        yield KeysFooter(compact=True)

    def question(self) -> str:
        raise NotImplementedError

    def make_input(self) -> Input:
        raise NotImplementedError

    def answer(self, text: str) -> T:
        """The value the typed `text` dismisses the prompt with; raises Refused when it cannot be taken."""
        raise NotImplementedError

    def ask_again(self) -> None:
        """The question changed (turns arriving behind a live prompt): redraw it."""
        if self.is_mounted:
            self.query_one(f"#{self.QUESTION_ID}", Label).update(self.question())

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        try:
            value = self.answer(event.value)
        except Refused as refused:
            self.notify(str(refused), severity="warning", markup=False)  # (it may quote the person's text)
            return
        self.dismiss(value)
