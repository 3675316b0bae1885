"""The task's omission note, as drop_range puts it and simulate's lanes (closed_cut, wave1_lane) make
it through the same history_ops helpers: one note, after the task's own parts, an earlier note replaced."""

from __future__ import annotations

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure, Section, omission_marker
from engine.optimize.history_ops import drop_range, dropped_note, note_tokens, without_notes
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind


def _history(task: Message) -> Section:
    items = (
        task,
        Message("assistant", (ToolCall("c1", "bash", "ls -la"),)),
        Message("user", (ToolResult("c1", "a file\n" * 40),)),
        Message("assistant", (ToolCall("c2", "bash", "cat README"),)),
        Message("user", (ToolResult("c2", "the readme\n" * 30),)),
    )
    return Section("history", "History", SectionKind.HISTORY, CacheScope.SESSION, Priority.NORMAL, items)


def test_the_note_replaces_an_earlier_one_and_its_tokens_are_counted() -> None:
    m = Measure(TokenCounter(CharTokenizer()))
    earlier = Text(omission_marker(120, "2 earlier rounds dropped"))
    task = Message("user", (Text("fix the bug"), earlier))
    assert without_notes(task) == (Text("fix the bug"),)
    assert note_tokens(task, m) == m.part(earlier) > 0
    assert note_tokens(Message("user", (Text("fix the bug"),)), m) == 0

    hist = _history(task)
    saved = m.item(hist.items[1]) + m.item(hist.items[2])
    (kept,), net = drop_range((hist,), 0, 1, 3, 1, saved, m)
    made = dropped_note(without_notes(task), 1, saved)
    # drop_range's kept task is the helper's: the task's text, then the one new note
    assert kept.items[0] == made
    assert made.parts == (Text("fix the bug"), Text(omission_marker(saved, "1 earlier rounds dropped")))
    # what it saved is net of the note it put and of the one it replaced
    assert net == saved - (m.item(made) - m.item(task)) - note_tokens(task, m)
    assert kept.items[1:] == hist.items[3:]
