"""The history section is a message transcript, highlighted as one (panels/transcript_lexer.py): the role
headings and tool headers as markup, a tool's output and a fenced code block by their own lexer, the
messages' prose plain. It was lexed as Python (for a `def` in one tool result): "is", "not", "for" in
every sentence came out in keyword colours."""

from __future__ import annotations

from types import SimpleNamespace

from rich.style import Style

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import omission_marker
from inspector.app import InspectorApp
from inspector.sources.replaying import section_text
from inspector.sources.synthetic import SyntheticSource
from panels import transcript_lexer
from panels.content_viewer import ContentBody, ContentViewer
from panels.highlight import guess_language
from panels.text_document import prepare
from tests.tui.conftest import settle

PROSE = "This is not a bug: for now the value is None and it is passed in as is."
CODE = "def add_new(self, tag, VR, value):\n    return self[tag]\n"
MESSAGES = [
    Message(
        "user",
        (Text(f"Fix the issue.\n\n{PROSE}\n\n## Steps\n\n```python\nimport os\nprint(os.sep)\n```\n"),),
    ),
    Message(
        "assistant",
        (
            Text("Let me look at the file; it is not long."),
            ToolCall("call_1", "bash", '{"command": "cat pydicom/dataset.py"}'),
        ),
    ),
    Message("user", (ToolResult("call_1", CODE),)),
    Message("assistant", (Text("The value is not converted. " * 3),)),
]


def _transcript(messages: list[Message]) -> str:
    return section_text(SimpleNamespace(items=messages))  # type: ignore[arg-type]


def _styles(doc, needle: str) -> list[tuple[str, Style | str]]:  # type: ignore[no-untyped-def]
    """(text, style) of each styled piece of the first line holding `needle`."""
    i = next(i for i, line in enumerate(doc.plain) if needle in line)
    line = doc.line(i)
    return [(line.plain[s.start : s.end], s.style) for s in line.spans]


def _colours(pieces: list[tuple[str, Style | str]]) -> set[str]:
    return {
        str(style.color.name) for _, style in pieces if isinstance(style, Style) and style.color is not None
    }


def test_a_history_is_a_transcript_its_prose_plain_its_code_by_its_lexer() -> None:
    text = _transcript(MESSAGES)
    assert guess_language(text) == "transcript"  # was "python": a tool result holds a def
    doc = prepare(text, dark=True, width=200)
    assert doc.language == "transcript"
    plain = _colours(_styles(doc, "it is not long"))
    assert len(plain) == 1, "prose is one colour: no keyword coloured in it"
    assert _colours(_styles(doc, PROSE)) == plain
    assert len(_colours(_styles(doc, "def add_new"))) > 1, "the tool's output is lexed as the code it is"
    assert len(_colours(_styles(doc, "import os"))) > 1, "a fenced python block is lexed as Python"
    role = _styles(doc, "## assistant")
    assert role and all(isinstance(s, Style) and s.bold for _, s in role), "who speaks stands out"
    assert _colours(_styles(doc, "## Steps")) or _styles(doc, "## Steps")  # a heading in the prose is markup
    call = _styles(doc, "[tool call call_1 bash]")
    assert len(_colours(call)) > 1, "the call's header and its JSON arguments, each as what it is"


def test_a_part_seen_before_is_not_lexed_again_and_reads_the_same() -> None:
    transcript_lexer.forget()
    text = _transcript(MESSAGES)
    lexer = transcript_lexer.TranscriptLexer()
    first = list(lexer.get_tokens_unprocessed(text))
    kept = transcript_lexer.kept_parts()
    # the next turn: one more message; only its part is new
    longer = _transcript([*MESSAGES, Message("user", (ToolResult("call_2", '{"ok": true}'),))])
    again = list(lexer.get_tokens_unprocessed(longer))
    assert transcript_lexer.kept_parts() - kept == 1
    assert again[: len(first) - 1] == first[:-1]
    transcript_lexer.forget()
    assert list(lexer.get_tokens_unprocessed(longer)) == again, "kept tokens are a fresh lexing's"
    assert "".join(v for _, _, v in again) == longer, "every character, once, in order"


class History(SyntheticSource):
    def section_content(self, turn: int, section_id: str) -> str:
        return _transcript(MESSAGES)


async def test_the_content_view_titles_a_history_transcript() -> None:
    app = InspectorApp(History(5))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        viewer = app.query_one("#content", ContentViewer)
        doc = viewer.query_one(ContentBody).document
        assert doc is not None and doc.language == "transcript"
        assert viewer._title_line is not None
        assert "·  transcript  ·" in str(viewer._title_line.render())  # was "·  python  ·"


def test_compactions_omission_marker_is_marked_in_a_history() -> None:
    # The engine's marker with what was cut in it ("(28 earlier rounds dropped)", the demo's history at turn
    # 39) was drawn as plain prose: only the bare "[...N tokens omitted...]" was marked.
    marker = omission_marker(15996, "28 earlier rounds dropped")
    text = _transcript([Message("user", (Text(f"Explain the tiers.\n\n{marker}"),)), *MESSAGES[1:]])
    doc = prepare(text, dark=True, width=200)
    pieces = _styles(doc, marker)
    assert (marker, "bold black on yellow") in pieces, pieces
