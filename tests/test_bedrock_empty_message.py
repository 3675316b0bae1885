"""A message with nothing to send goes to Bedrock as text Converse takes, and the trace says so.

Only an import makes one (Pipeline.user/assistant refuse empty text; an importer turns check_content
off to keep what the agent sent). Converse refuses a blank text block ("The text field in the
ContentBlock object at messages.N.content.0 is blank") and a message without content; the engine sent
{"text": ""} for it, and whitespace text beside a tool call as it was."""

from __future__ import annotations

from typing import Any

from engine.pipeline import Pipeline
from engine.providers.bedrock import EMPTY_TEXT

from .test_bedrock_converse_shape import _check_against_botocore


def _imported(provider: str) -> tuple[dict[str, Any], dict[str, Any]]:
    p = Pipeline("anthropic.claude-sonnet-4-5", provider, 200_000)
    p.check_content = False  # as the importers fold what the agent sent
    p.identity("You are terse.")
    p.add_tool("bash", "Run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    p.user("List the files.")
    p.assistant("")  # an agent's empty reply: no parts at all
    p.user("")  # and the user's empty answer
    p.assistant("  ", [{"id": "toolu_1", "name": "bash", "arguments": {"cmd": "ls"}}])
    p.tool_result("toolu_1", "")  # an empty output stays: a toolResult's text may be empty
    p.assistant("Done.")
    p.user(" \n")
    req = p.next_request()
    body, trace = req.body, dict(req.trace)
    p.close()
    return body, trace


def test_empty_messages_go_to_bedrock_as_text_converse_takes() -> None:
    body, trace = _imported("bedrock")
    _check_against_botocore(body)
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    for m in msgs:
        assert m["content"], m
        for block in m["content"]:
            if "text" in block:
                assert block["text"].strip(), m  # no blank text block anywhere
    assert msgs[1]["content"] == [{"text": EMPTY_TEXT}]
    assert msgs[2]["content"] == [{"text": EMPTY_TEXT}]
    assert [list(b) for b in msgs[3]["content"]] == [["toolUse"]]  # the whitespace beside the call left out
    assert msgs[4]["content"][0]["toolResult"]["content"] == [{"text": ""}]
    assert msgs[6]["content"][0] == {"text": EMPTY_TEXT}  # the tail (marked: its cachePoint follows)
    hist = next(s for s in trace["sections"] if s["kind"] == "history")
    assert hist["note"].startswith("3 messages with no content (conversation message 1, 2, 6): sent to Bedrock")
    assert repr(EMPTY_TEXT) in hist["note"]


def test_openai_is_unchanged_and_says_nothing() -> None:
    # Chat Completions takes an empty string as a message's content (Anthropic does not: see
    # tests/test_anthropic_empty_message.py), so the OpenAI serializer sends the messages as they came.
    body, trace = _imported("openai")
    hist = next(s for s in trace["sections"] if s["kind"] == "history")
    assert hist["note"] == ""
    assert EMPTY_TEXT not in str(body)
