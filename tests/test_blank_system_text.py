"""A system text of whitespace only goes to Anthropic and Bedrock as text their APIs take, and the trace
says so on that section.

Both refuse blank text in the system prompt as they do in a message (see anthropic.EMPTY_TEXT for the
messages). identity("   "), or a binder that returns whitespace, was sent as it came; an empty text was
never sent (a section with no text is left out). OpenAI-compatible APIs take it, so it goes there as it is.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.pipeline import Pipeline
from engine.providers.anthropic import EMPTY_SYSTEM_TEXT
from engine.recording.replay import Replayer


def _request(provider: str, identity: str, bound: str = "Remember: tests live in tests/.") -> tuple[Any, dict[str, Any]]:
    p = Pipeline("claude-sonnet-4-5", provider, 200_000, serve=False, clock=lambda: 1_700_000_000.0)
    p.identity(identity)
    p.add_source("notes", "memory", binder=lambda budget: bound, estimate=100)
    p.user("List the files.")
    req = p.next_request()
    body, trace = req.body, dict(req.trace)
    assert Replayer(p.journal.events).verify().ok  # the stand-in is rebuilt the same on replay
    p.close()
    return body, trace


def _system_texts(provider: str, body: dict[str, Any]) -> list[str]:
    if provider == "anthropic":
        return [b["text"] for b in body["system"]]
    return [b["text"] for b in body["system"] if "text" in b]


@pytest.mark.parametrize(("provider", "name"), [("anthropic", "Anthropic"), ("bedrock", "Bedrock")])
def test_whitespace_system_text_is_sent_as_a_stand_in_and_noted(provider: str, name: str) -> None:
    # Fails before the fix: the system blocks were "   " and " \n\t " and both notes were empty.
    body, trace = _request(provider, "   ", bound=" \n\t ")
    assert _system_texts(provider, body) == [EMPTY_SYSTEM_TEXT, EMPTY_SYSTEM_TEXT]
    notes = {s["id"]: s["note"] for s in trace["sections"]}
    for sid in ("identity", "notes"):
        assert f"sent to {name} as {EMPTY_SYSTEM_TEXT!r}" in notes[sid]
        assert "whitespace only" in notes[sid]
    assert notes["history"] == ""


@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_only_the_blank_section_changes(provider: str) -> None:
    body, trace = _request(provider, "You are terse.", bound="  ")
    assert _system_texts(provider, body) == ["You are terse.", EMPTY_SYSTEM_TEXT]
    notes = {s["id"]: s["note"] for s in trace["sections"]}
    assert notes["identity"] == "" and "whitespace only" in notes["notes"]


def test_openai_gets_whitespace_as_it_came() -> None:
    body, trace = _request("openai", "   ")
    assert body["messages"][0] == {"role": "system", "content": "   "}
    assert all(not s["note"] for s in trace["sections"])
