"""`/`: a small modal asking for the text to search the session's sent content for; dismisses with it
(stripped of nothing: a leading space can matter) or None."""

from __future__ import annotations

from textual.widgets import Input

from inspector.screens.prompt import InputPrompt, Refused


class SearchScreen(InputPrompt[str]):
    QUESTION_ID = "search-question"

    def __init__(self, last: str = "") -> None:
        super().__init__()
        self.last = last

    def question(self) -> str:
        return (
            "Search what each turn sent (any case): Enter jumps to the next turn it enters or "
            "leaves the prompt, Esc cancels"
        )

    def make_input(self) -> Input:
        return Input(value=self.last, placeholder="text", id="search-input")

    def answer(self, text: str) -> str:
        if not text.strip():
            raise Refused("type the text to search for")
        return text
