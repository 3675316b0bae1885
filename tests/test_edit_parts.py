"""Pipeline.edit_part, edit_result and edit_call: an agent's edit of one part of an earlier message (a tool
result it truncated, a call whose arguments it rewrote, a user message's text), one `edit` event.

A session of ten steady tool-calling turns truncates turn 1's result and rewrites turn 2's call before
turn 5: every request from there on is byte-identical to that of a session where they were so from the
start, and before it to the session never edited; the recording replays to the same hashes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import ConfigError, ContentError
from engine.pipeline import Pipeline
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer

CUT = "line 1\n[... truncated by the agent ...]"
ARGS = '{"command": "pytest -x tests/test_io.py"}'


def _session(how: str, record: Path | None = None) -> list[str]:
    """`how`: "edit" (turn 1's result and turn 2's call edited before turn 5's request), "start" (they
    were so in the first place), "never". Each turn's request body (JSON)."""
    p = Pipeline("claude-sonnet-4", "anthropic", 200_000, record=record)
    p.identity("You are a careful coding agent. " * 120)
    p.add_tool("bash", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}}})
    p.user("Fix the failing test.")
    bodies = []
    for t in range(10):
        if how == "edit" and t == 5:
            assert p.edit_result("call_1", CUT) and p.edit_call("call_2", ARGS)
            assert not p.edit_result("call_1", CUT), "the content is that already: nothing journaled"
        bodies.append(json.dumps(p.next_request().body, sort_keys=True))
        args = ARGS if how == "start" and t == 2 else '{"command": "pytest -x"}'
        (call,) = p.assistant(f"Step {t}.", [{"id": f"call_{t}", "name": "bash", "arguments": args}])
        p.tool_result(call.id, CUT if how == "start" and t == 1 else f"line {t}\n" * 80)
    p.close()
    return bodies


def _marked(body: str) -> tuple[list[int], str]:
    """The messages a request marks with a cache breakpoint, and the request without the marks."""
    msgs = json.loads(body)["messages"]
    marked = [i for i, m in enumerate(msgs) if isinstance(m["content"], list) and any("cache_control" in c for c in m["content"])]
    for m in msgs:
        for c in m["content"] if isinstance(m["content"], list) else ():
            c.pop("cache_control", None)
    return marked, json.dumps(msgs, sort_keys=True)


def test_requests_after_part_edits_are_those_never_edited() -> None:
    edited, start, never = _session("edit"), _session("start"), _session("never")
    assert edited[:5] == never[:5] and edited[2:5] != start[2:5]
    # From the edits on, what the session edited from the start sends, and one cache breakpoint more:
    # after the newest message the agent edited (turn 2's reply, message 5; markers.edit_marker).
    for t in range(5, 10):
        (marks, sent), (want, plain) = _marked(edited[t]), _marked(start[t])
        assert sent == plain and marks == sorted({5, *want}) and 5 not in want, (t, marks, want)
    assert all("[... truncated by the agent ...]" in b and "line 1\\nline 1" not in b for b in edited[5:])


def test_recorded_part_edits_are_events_and_replay(tmp_path: Path) -> None:
    rec = tmp_path / "edit.cpsession"
    _session("edit", record=rec)
    with RecordingReader.open(rec) as r:
        events = [unpack_event(e) for e in r.events()]
    edits = [e for e in events if e["k"] == "edit"]
    # (the task, then each turn's reply and its result's message: turn 1's result is message 4, part 0;
    # turn 2's reply message 5, its call part 1, after its text)
    assert [(e["turn"], e["at"], e["part"]) for e in edits] == [(5, 4, 0), (5, 5, 1)]
    report = Replayer(events).verify()
    assert report.ok and report.turns == 10, report.mismatches[:1]


def test_a_part_edit_by_index_and_bad_edits_refused_with_what_to_do() -> None:
    p = Pipeline("claude-sonnet-4", "anthropic", 20_000)
    p.user("hello")
    (c,) = p.assistant("Looking.", [{"id": "c1", "name": "bash", "arguments": "{}"}])
    p.tool_result(c.id, "out")
    with pytest.raises(ConfigError, match=r"edit_result\('c1', \.\.\.\): no tool result with that id in the history \(a result enters it with the request"):
        p.edit_result("c1", "")
    p.next_request()
    assert p.edit_part(0, 0, "hello there") and p.history[0].parts[0].text == "hello there"  # type: ignore[union-attr]
    assert p.edit_result("c1", "")  # (a result may be cleared: its content empty)
    with pytest.raises(ConfigError, match=r"edit_part\(1, 5\): message 1 has 2 parts: give an index into pipe.history\[1\].parts, 0 to 1"):
        p.edit_part(1, 5, "x")
    with pytest.raises(ContentError, match=r"edit_call\('c1', ''\): a tool call's arguments cannot be empty: give its whole new text \('\{\}' for no arguments\)"):
        p.edit_call("c1", "")
    with pytest.raises(ContentError, match=r"edit_part\(0, 0, ''\): a text cannot be empty"):
        p.edit_part(0, 0, "")
    with pytest.raises(ConfigError, match=r"edit_call\('nope', \.\.\.\): no tool call with that id"):
        p.edit_call("nope", "{}")
    with pytest.raises(ConfigError, match=r"edit_part\(9\): no such message \(the history holds 3: give an index into pipe.history, 0 to 2\)"):
        p.edit_part(9, 0, "x")


def test_the_newest_message_edited_before_a_retry_replays(tmp_path: Path) -> None:
    """A call that failed, its user message reworded where it stood and sent again (nothing appended):
    the request sends the new text, and a replay rebuilds it (it rebuilt the request before the edit: the
    history's length was the same, and the last whole history built was taken for it)."""
    rec = tmp_path / "retry.cpsession"
    p = Pipeline("gpt-4o", "openai", 20_000, record=rec)
    p.identity("Be brief.")
    p.user("Summarise the build log, all 4,000 lines of it.")
    p.next_request()
    p.record_error("prompt_too_long", "prompt is too long")
    assert p.edit_part(0, 0, "Summarise the build log's last 200 lines.")
    body = json.dumps(p.next_request().body)
    assert "last 200 lines" in body and "4,000" not in body
    p.close()
    with RecordingReader.open(rec) as r:
        events = [unpack_event(e) for e in r.events()]
    report = Replayer(events).verify()
    assert report.ok and report.turns == 2, report.mismatches[:1]
