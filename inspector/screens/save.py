"""`s` in a live session (while it runs or after it ends): ask where to save what was received."""

from __future__ import annotations

import os

from textual.widgets import Input

from engine.wording import nouned
from inspector.screens.prompt import InputPrompt, Refused


class SaveScreen(InputPrompt[str]):
    QUESTION_ID = "save-question"

    def __init__(self, default_path: str, turns: int, still_arriving: bool = False) -> None:
        super().__init__()
        self.default_path, self.turns, self.still_arriving = default_path, turns, still_arriving

    def make_input(self) -> Input:
        return Input(value=self.default_path, id="save-path")

    def question(self) -> str:
        # While the agent runs, turns go on arriving behind the prompt and the save takes every one there
        # at Enter: a count fixed when `s` was pressed ("Save 15 received turns") was not what was saved.
        # "Save the turns received by Enter (38 so far) to (Enter to save, Esc to cancel):" read as if
        # Enter were what sent the turns, and "to (" left the destination to the box below to guess.
        what = (
            f"every turn received until you press Enter ({self.turns} so far)"
            if self.still_arriving
            else f"{self.turns} received {nouned(self.turns, 'turn')}"
        )
        return f"Save {what} to this file (Enter saves, Esc cancels):"

    def set_turns(self, turns: int, still_arriving: bool) -> None:
        """Turns go on arriving while the prompt is open (attached to a live agent): the count follows
        them, as the save will (it saves what was received when Enter is pressed); it stayed at the count
        the prompt opened with. Once the agent is gone the count is final and said so."""
        if (turns, still_arriving) != (self.turns, self.still_arriving):
            self.turns, self.still_arriving = turns, still_arriving
            self.ask_again()

    def answer(self, text: str) -> str:
        # What would make the save fail is said here, with the path still in the box to correct.
        path = os.path.expanduser(text.strip())
        problem = save_problem(path)
        if problem is not None:
            raise Refused(problem)
        return path


def save_problem(path: str) -> str | None:
    """Why the received turns cannot be saved to `path`, and what to do, or None."""
    if not path:
        return "type the path of a new file to save to"
    if os.path.isdir(path):
        return f"{path} is a directory: add a file name (e.g. {os.path.join(path, 'session.cpsession')})"
    if os.path.lexists(path):
        return f"{path} already exists: a recording is never overwritten; type a new file name"
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        return f"there is no directory {parent}: create it first, or save somewhere else"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot write in {parent}: save to a directory you can write to"
    return None
