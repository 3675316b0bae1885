"""Text from outside (file names, models, a step's reason, an error) reaches the screen as it is: textual's
escape() escapes only what reads as a tag, so a lone "[" opened a tag across the rest of the line (a
MarkupError that ended the app), "keys [A-Z]" lost its "[A-Z]" and "call_[3" showed a stray "[/]"."""

from __future__ import annotations

from typing import cast

import pytest
from textual.content import Content

from engine.trace_schema import Trace
from panels.fmt import literal
from panels.skipped import SkippedPanel

# (Not a text ending in a backslash: before a tag it escapes the tag, and textual's markup has no escaped
# backslash. None of the texts shown ends in one: a name, a model, a step's words.)
ODD = ["keys [A-Z]", "spilled call_[3", "x[", "[b]bold", "[/]", "a\\b", "x\\[y", "[Errno 2] missing", "[[", "]"]


@pytest.mark.parametrize("text", ODD)
def test_literal_text_in_markup_is_shown_as_it_is(text: str) -> None:
    shown = Content.from_markup(f"[b]{literal(text)}[/b]  [$text-muted]z[/] [i]{literal(text)}[/i]")
    assert shown.plain == f"{text}  z {text}"


def test_a_skipped_steps_reason_with_brackets_is_shown_whole() -> None:
    panel = SkippedPanel()
    trace = {"turn": 3, "skipped": [{"step": "drop_rounds", "reason": "kept keys [A-Z] and call_[3",
                                      "tokens_saved": 120}], "actions": []}
    panel.set_reactive(SkippedPanel.trace, cast(Trace, trace))
    rows = panel.render().plain.splitlines()
    assert rows[0] == "✗ drop_rounds  kept keys [A-Z] and call_[3  (would save 120 tokens)", rows
