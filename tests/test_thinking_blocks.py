"""Pipeline.assistant(thinking=) with the SDK's thinking and redacted_thinking blocks, a message holding
only unsigned thinking, and tool names the providers refuse. The capture and import paths are in
tests/capture/test_thinking_signatures.py."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import RedactedThinkingBlock, ThinkingBlock, ToolUseBlock

from engine.errors import ConfigError, ContentError
from engine.pipeline import Pipeline
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer

SIG = "EqQBCkYIBxgCKkC0a0signature=="
DATA = "EmwKAhgBEgy3va3pzix0redacted0data=="
BLOCKS = [
    ThinkingBlock(type="thinking", thinking="First, list the files.", signature=SIG),
    RedactedThinkingBlock(type="redacted_thinking", data=DATA),
]
PARAMS: dict[str, Any] = {"type": "object", "properties": {}}


def _pipe(provider: str, rec: Path | None = None) -> Pipeline:
    p = Pipeline("claude-sonnet-4-5", provider, 200_000, record=rec)
    p.add_tool("bash", "Run a command", PARAMS)
    p.user("List the files.")
    return p


def _assistant_content(p: Pipeline) -> list[dict[str, Any]]:
    msgs = p.next_request().body["messages"]
    return [m for m in msgs if m["role"] == "assistant"][0]["content"]  # type: ignore[no-any-return]


def test_sdk_blocks_go_back_with_signature_and_data(tmp_path: Path) -> None:
    rec = tmp_path / "a.cpsession"
    p = _pipe("anthropic", rec)
    call = ToolUseBlock(type="tool_use", id="toolu_1", name="bash", input={"cmd": "ls"})
    p.assistant("", [call], thinking=BLOCKS)
    p.tool_result("toolu_1", "a.py")
    assert _assistant_content(p) == [
        {"type": "thinking", "thinking": "First, list the files.", "signature": SIG},
        {"type": "redacted_thinking", "data": DATA},
        {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}},
    ]
    p.close()
    events = [unpack_event(e) for e in RecordingReader.open(rec).events()]
    assert Replayer(events).verify().ok  # the journal folds back to the same request


def test_bedrock_sends_reasoning_and_redacted_content() -> None:
    p = _pipe("bedrock")
    p.assistant("Here they are.", thinking=[b.model_dump() for b in BLOCKS])  # dicts as well as objects
    p.user("Thanks.")
    content = _assistant_content(p)
    assert content[:2] == [
        {"reasoningContent": {"reasoningText": {"text": "First, list the files.", "signature": SIG}}},
        # Converse's Blob: the bytes of Claude's data string, base64 in the body (test_bedrock_converse_shape.py)
        {"reasoningContent": {"redactedContent": base64.b64encode(DATA.encode()).decode()}},
    ]


def test_redacted_block_without_data_is_refused() -> None:
    p = _pipe("anthropic")
    with pytest.raises(ContentError, match="redacted_thinking block without its `data`"):
        p.assistant("ok", thinking={"type": "redacted_thinking"})
    assert p.history.newest() is None or p.history.newest().role != "assistant"  # nothing journaled


def test_only_unsigned_thinking_is_refused_for_anthropic() -> None:
    """The API refuses thinking sent back without its signature, and the serializer cannot leave it out
    of a message that holds nothing else: the call is refused, saying how to pass the signature."""
    for provider in ("anthropic", "bedrock"):
        p = _pipe(provider)
        with pytest.raises(ContentError, match="without its signature.*as the SDK returns it"):
            p.assistant(thinking="I should list the files.")
        with pytest.raises(ContentError, match="without its signature"):
            p.assistant(thinking=ThinkingBlock(type="thinking", thinking="t", signature=""))
        p.assistant(thinking=BLOCKS[0])  # signed: accepted
        p.user("go on")
        p.assistant(thinking=[BLOCKS[1]])  # redacted: its data is what the API checks
    # Beside text or calls the unsigned thinking is simply left out; OpenAI has no signatures at all.
    p = _pipe("anthropic")
    p.assistant("Here.", thinking="I should list the files.")
    p.user("go on")
    assert _assistant_content(p) == [{"type": "text", "text": "Here."}]
    p = _pipe("openai")
    p.assistant(thinking="I should list the files.")


def test_imports_keep_unsigned_thinking_as_sent() -> None:
    p = _pipe("anthropic")
    p.check_content = False  # as engine.importers.ingest's feeder sets it
    p.assistant(thinking="I should list the files.")
    p.user("go on")
    assert _assistant_content(p)[0]["thinking"] == "I should list the files."


@pytest.mark.parametrize("name", ["read file", "fs.read", "x" * 65, "bash\n", "ünïcode", "a/b"])
def test_bad_tool_names_are_refused(name: str) -> None:
    p = Pipeline("claude-sonnet-4-5", "anthropic", 200_000)
    with pytest.raises(ConfigError, match=r"\^\[a-zA-Z0-9_-\]\{1,64\}\$"):
        p.add_tool(name, "d", PARAMS)
    assert p.tools == [] or not list(p.tools)  # nothing journaled


def test_good_tool_names_and_imported_ones() -> None:
    p = Pipeline("gpt-4o", "openai", 128_000)
    for name in ("bash", "mcp__fs__read-file", "x" * 64, "A1_-"):
        p.add_tool(name, "d", PARAMS)
    # Another agent's tools are rebuilt as it sent them (an importer or the tap turns the check off),
    # and a fork of that session carries them over.
    imp = Pipeline("gpt-4o", "openai", 128_000)
    imp.check_content = False
    imp.add_tool("fs.read", "d", PARAMS)
    child = imp.fork("sub-task")
    assert [t.name for t in child.tools] == ["fs.read"]
    assert child.check_content  # the child's own calls are checked
    with pytest.raises(ConfigError):
        child.add_tool("web.search", "d", PARAMS)
