"""mini-swe-agent's report of a command (`<returncode>N</returncode>` then `<output>...</output>`) is lexed
as a tool's output is (panels/transcript_lexer.py): its tags quiet, a non-zero return code as an error,
what the command printed by what it holds. A run without tool calls (older mini-swe-agent: the command
in a ```bash fence, the report as the next user message) showed it as plain prose; a tool-calling run's
report was lexed whole, so the tags hid a traceback or a JSON document from the output's lexer."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.style import Style

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.importers import load
from engine.importers.ingest import ingest
from inspector.sources.file import FileSource
from inspector.sources.replaying import section_text
from panels.text_document import prepare
from tests.conftest import TRAJECTORIES

TRACEBACK = (
    'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n    ds.LongTrianglePointIndexList = v\n'
    "TypeError: a bytes-like object is required, not 'MultiValue'\n"
)
FAILED = f"<returncode>1</returncode>\n<output>\n{TRACEBACK}</output>"
LISTED = '<returncode>0</returncode>\n<output>\n{"is": "not a keyword", "count": 2}\n</output>'


def _transcript(messages: list[Message]) -> str:
    return section_text(SimpleNamespace(items=messages))  # type: ignore[arg-type]


def _pieces(doc, needle: str) -> list[tuple[str, Style | str]]:  # type: ignore[no-untyped-def]
    i = next(i for i, line in enumerate(doc.plain) if needle in line)
    line = doc.line(i)
    return [(line.plain[s.start : s.end], s.style) for s in line.spans]


def _colour(pieces: list[tuple[str, Style | str]], text: str) -> str | None:
    """The colour the piece `text` of a line is drawn in (None: the base colour, no span)."""
    for piece, style in pieces:
        if piece == text and isinstance(style, Style):
            return str(style.color.name) if style.color is not None else None
    return None


def _colours(pieces: list[tuple[str, Style | str]]) -> set[str]:
    return {str(s.color.name) for _, s in pieces if isinstance(s, Style) and s.color is not None}


def _old_run(thought: str, command: str, report: str) -> list[Message]:
    return [
        Message("user", (Text("Fix the bug."),)),
        Message("assistant", (Text(f"THOUGHT: {thought}\n\n```bash\n{command}\n```"),)),
        Message("user", (Text(report),)),
    ]


def test_an_old_runs_report_is_lexed_as_a_tools_output() -> None:
    text = _transcript(_old_run("Run the reproduction; it is not long.", "python t.py", FAILED))
    doc = prepare(text, dark=True, width=200)
    assert doc.language == "transcript"
    assert len(_colours(_pieces(doc, 'File "t.py", line 3'))) > 1, "the traceback by the traceback lexer"
    code = _pieces(doc, "<returncode>1</returncode>")
    assert _colour(code, "<returncode>1</returncode>") is not None, "a failed command's code stands out"
    assert _colour(_pieces(doc, "<output>"), "<output>") is not None, "the tags are marked, not prose"
    prose = _pieces(doc, "it is not long")
    assert len(_colours(prose)) <= 1, "the assistant's prose stays plain"


def test_a_zero_and_a_non_zero_return_code_read_differently() -> None:
    doc = prepare(_transcript([*_old_run("a", "ls", LISTED), *_old_run("b", "python t.py", FAILED)[1:]]),
                  dark=True, width=200)
    ok = _colour(_pieces(doc, "<returncode>0</returncode>"), "<returncode>0</returncode>")
    failed = _colour(_pieces(doc, "<returncode>1</returncode>"), "<returncode>1</returncode>")
    assert ok is not None and failed is not None and ok != failed
    assert len(_colours(_pieces(doc, '"not a keyword"'))) > 1, "a JSON document printed, lexed as JSON"


def test_a_tool_calling_runs_report_reaches_the_outputs_lexer() -> None:
    # The report as a tool result: it starts with the tags, so the output's lexer never saw a traceback.
    messages = [
        Message("assistant", (Text("Run it."), ToolCall("call_1", "bash", '{"command": "python t.py"}'))),
        Message("user", (ToolResult("call_1", FAILED),)),
    ]
    doc = prepare(_transcript(messages), dark=True, width=200)
    assert len(_colours(_pieces(doc, 'File "t.py", line 3'))) > 1


def _old_format(data: dict) -> dict:
    """A tool-calling mini-swe-agent trajectory written as a run without tool calls: each command in a
    ```bash fence of the assistant's text, each report a user message."""
    out = []
    for m in data["messages"]:
        m = dict(m)
        if m.get("tool_calls"):
            command = json.loads(m.pop("tool_calls")[0]["function"]["arguments"])["command"]
            m["content"] = f"THOUGHT: {m.get('content') or ''}\n\n```bash\n{command}\n```"
        if m["role"] == "tool":
            m = {"role": "user", "content": m["content"]}
        out.append(m)
    return {**data, "messages": out, "trajectory_format": "mini-swe-agent-1"}


def test_a_real_old_format_recording_shows_its_reports_highlighted(tmp_path: Path) -> None:
    src = TRAJECTORIES / "mini-swe-agent-pr816" / "deepseek_chat_dev__pydicom__pydicom-1413.traj.json"
    if not src.is_file():
        pytest.skip(f"real trajectories not found at {TRAJECTORIES}")
    old = tmp_path / "old.traj.json"
    old.write_text(json.dumps(_old_format(json.loads(src.read_text()))))
    rec = tmp_path / "old.cpsession"
    pipe, _ = ingest(load(old), rec)
    pipe.close()
    source = FileSource(rec)
    last = source.load_initial()[-1]["turn"]
    text = source.section_content(last, "history")
    assert "\n## user\n\n<returncode>0</returncode>\n<output>\n" in text, "no tool calls: reports are user text"
    doc = prepare(text, dark=True, width=200)
    tags = [i for i, line in enumerate(doc.plain) if line == "<output>"]
    assert len(tags) > 20
    for i in tags:
        assert doc.line(i).spans, f"line {i}: the tag drawn as prose"
    # pydicom's own code printed by `cat`/`sed`: Python lexed, as in a tool result.
    defs = [i for i, line in enumerate(doc.plain) if line.lstrip().startswith("def ")]
    assert defs
    for i in defs[:5]:
        line = doc.line(i)
        assert len(_colours([(line.plain[s.start : s.end], s.style) for s in line.spans])) > 1, doc.plain[i]
