"""A message with nothing to send goes to Anthropic as text the Messages API takes, and the trace says so.

Only an import makes one (Pipeline.user/assistant refuse empty text; an importer turns check_content off
to keep what the agent sent). The Messages API refuses an empty text block ("text content blocks must be
non-empty"), a whitespace one ("text content blocks must contain non-whitespace text") and a message
without content ("all messages must have non-empty content except for the optional final assistant
message"). The engine sent {"type": "text", "text": ""} for a message with no parts, and blank text as it
came; Bedrock already got tests/test_bedrock_empty_message.py's treatment, and Anthropic now gets the same."""

from __future__ import annotations

import json
from typing import Any

from engine.artifacts import Message, Text, Thinking, ToolCall, ToolResult
from engine.hashing import canonical_json
from engine.pipeline import Pipeline
from engine.providers import anthropic
from engine.providers.bedrock import EMPTY_TEXT  # the same text goes to both (anthropic.EMPTY_TEXT)


def _imported(provider: str = "anthropic") -> tuple[dict[str, Any], dict[str, Any], bytes]:
    p = Pipeline("claude-sonnet-4-5", provider, 200_000)
    p.check_content = False  # as the importers fold what the agent sent
    p.identity("You are terse.")
    p.add_tool("bash", "Run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    p.user("List the files.")
    p.assistant("")  # an agent's empty reply: no parts at all
    p.user("")  # and the user's empty answer
    p.assistant("  ", [{"id": "toolu_1", "name": "bash", "arguments": {"cmd": "ls"}}])
    p.tool_result("toolu_1", "")  # an empty output stays: a tool_result's content may be empty
    p.assistant("Done.")
    p.user(" \n")
    req = p.next_request()
    body, trace, raw = req.body, dict(req.trace), req.bytes
    p.close()
    return body, trace, raw


def _texts(block: Any) -> list[str]:
    return [block["text"]] if isinstance(block, dict) and block.get("type") == "text" else []


def test_empty_messages_go_to_anthropic_as_text_the_api_takes() -> None:
    # Fails on main before this change: the empty reply went as [{"type": "text", "text": ""}] and the
    # whitespace beside the call, and the last user text, as they came; the note was empty.
    body, trace, _ = _imported()
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    for m in msgs:
        assert m["content"], m  # every message has content
        for block in m["content"]:
            for t in _texts(block):
                assert t.strip(), m  # no empty or whitespace text block anywhere
    assert msgs[1]["content"] == [{"type": "text", "text": EMPTY_TEXT}]
    assert msgs[2]["content"] == [{"type": "text", "text": EMPTY_TEXT}]
    assert [b["type"] for b in msgs[3]["content"]] == ["tool_use"]  # the whitespace beside the call left out
    assert msgs[4]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1", "content": ""}
    assert msgs[6]["content"] == [{"type": "text", "text": EMPTY_TEXT}]
    hist = next(s for s in trace["sections"] if s["kind"] == "history")
    assert hist["note"] == (
        "3 messages with no content (conversation message 1, 2, 6): sent to Anthropic as "
        f"{EMPTY_TEXT!r}, since the Messages API refuses a blank text and a message without content"
    )


def test_the_direct_fragment_and_the_dicts_agree_on_blank_parts() -> None:
    # The direct writer (message_json) and the dict path (media, odd field types) must send the same.
    for parts in [(), (Text(""),), (Text(" \t"),), (Text(""), ToolCall("c1", "bash", "{}")), (Text(" "), Text("hi"))]:
        for marked in (False, True):
            m = Message("assistant", parts)
            dicts = b",".join(canonical_json(x) for x in anthropic.message_dicts(m, marked))
            assert anthropic.message_json(m, marked) == dicts
            blocks = json.loads(dicts)["content"]
            assert blocks
            for block in blocks:
                for t in _texts(block):
                    assert t.strip()
            if marked:  # a placeholder carries the breakpoint as any text block would
                assert "cache_control" in blocks[-1]


def test_valid_messages_are_sent_byte_for_byte_as_before() -> None:
    # Nothing blank: the same list goes through (request bytes unchanged for every input already valid).
    msgs = [
        Message("user", (Text("Fix it."),)),
        Message("assistant", (Thinking("hm", "sig"), Text("Looking."), ToolCall("c1", "bash", '{"cmd": "ls"}'))),
        Message("user", (ToolResult("c1", "a.py"), Text("and then?"))),
        Message("assistant", (Thinking("alone, unsigned", ""),)),  # kept: all the message has
    ]
    expected = [
        b'{"content":[{"text":"Fix it.","type":"text"}],"role":"user"}',
        b'{"content":[{"signature":"sig","thinking":"hm","type":"thinking"},{"text":"Looking.","type":"text"},'
        b'{"id":"c1","input":{"cmd":"ls"},"name":"bash","type":"tool_use"}],"role":"assistant"}',
        b'{"content":[{"content":"a.py","tool_use_id":"c1","type":"tool_result"},'
        b'{"cache_control":{"type":"ephemeral"},"text":"and then?","type":"text"}],"role":"user"}',
        b'{"content":[{"signature":"","thinking":"alone, unsigned","type":"thinking"}],"role":"assistant"}',
    ]
    got = [anthropic.message_json(m, marked=(i == 2)) for i, m in enumerate(msgs)]
    assert got == expected


def test_an_error_result_with_no_output_goes_with_text_and_is_said() -> None:
    # Fails on main before this change: {"content": "", "is_error": true}, which the Messages API refuses
    # ("tool_result: content cannot be empty if `is_error` is true"); the note said nothing.
    ERROR_NO_OUTPUT = "[error, no output]"  # noqa: N806 (engine.providers.anthropic.ERROR_NO_OUTPUT)

    for provider in ("anthropic", "bedrock", "openai"):
        p = Pipeline("claude-sonnet-4-5", provider, 200_000)
        p.user("Run it.")
        p.assistant("", [{"id": "toolu_1", "name": "bash", "arguments": {"cmd": "false"}}])
        p.tool_result("toolu_1", "", is_error=True)  # a command that failed without a word
        p.assistant("", [{"id": "toolu_2", "name": "bash", "arguments": {"cmd": "true"}}])
        p.tool_result("toolu_2", "")  # no output, no error: as it came
        req = p.next_request()
        body, hist = req.body, next(s for s in req.trace["sections"] if s["kind"] == "history")
        p.close()
        if provider == "anthropic":
            results = [b for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result"]
            assert [(r["content"], r.get("is_error", False)) for r in results] == [
                (ERROR_NO_OUTPUT, True), ("", False)
            ]
        elif provider == "bedrock":
            results = [b["toolResult"] for m in body["messages"] for b in m["content"] if "toolResult" in b]
            assert [(r["content"], r.get("status")) for r in results] == [
                ([{"text": ERROR_NO_OUTPUT}], "error"), ([{"text": ""}], None)
            ]
        else:  # Chat Completions takes an empty tool message
            assert [m["content"] for m in body["messages"] if m["role"] == "tool"] == ["", ""]
            assert hist["note"] == ""
            continue
        name, api = ("Anthropic", "the Messages API") if provider == "anthropic" else ("Bedrock", "Converse")
        assert hist["note"] == (
            f"1 error result with no output (conversation message 2): sent to {name} as "
            f"{ERROR_NO_OUTPUT!r}, since {api} refuses an error result without content"
        )
