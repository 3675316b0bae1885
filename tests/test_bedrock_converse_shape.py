"""The engine's Bedrock Converse bodies against botocore's own model of the Converse input (botocore is
installed: its bedrock-runtime service JSON and serializer are the reference, not a copy of it).

A body is checked by decoding it as boto3's caller would pass it (each Blob as its bytes), validating
that against the Converse input shape, serializing it with botocore's rest-json serializer, and
comparing the result with the engine's body: equal JSON means the engine wrote what botocore would."""

from __future__ import annotations

import base64
import json
from typing import Any

import botocore.session
import pytest
from botocore.serialize import create_serializer
from botocore.validate import ParamValidator

from engine.pipeline import Pipeline
from engine.providers.bedrock import redacted_content

SIG = "EqQBCkYIBxgCKkC0a0signature=="
DATA = "EmwKAhgBEgy3va3pzix/LafPsn4aQHJlZGFjdGVk"  # Claude's own redacted_thinking data (base64 of a protobuf)


def _model() -> Any:
    return botocore.session.get_session().get_service_model("bedrock-runtime").operation_model("Converse")


def _blobs_to_bytes(value: Any, shape: Any) -> Any:
    """The body's value as a boto3 caller passes it: base64 Blob text decoded to bytes."""
    if shape.type_name == "blob":
        return base64.b64decode(value, validate=True)
    if shape.type_name == "structure" and isinstance(value, dict):
        return {k: _blobs_to_bytes(v, shape.members[k]) if k in shape.members else v for k, v in value.items()}
    if shape.type_name == "list" and isinstance(value, list):
        return [_blobs_to_bytes(v, shape.member) for v in value]
    return value


def _check_against_botocore(body: dict[str, Any]) -> None:
    op = _model()
    params = _blobs_to_bytes(body, op.input_shape)
    report = ParamValidator().validate(params, op.input_shape)
    assert not report.has_errors(), report.generate_report()
    wire = create_serializer("rest-json").serialize_to_request(params, op)
    theirs = json.loads(wire["body"])
    ours = {k: v for k, v in body.items() if k != "modelId"}  # modelId goes in botocore's URL
    assert theirs == ours


def _session_body() -> dict[str, Any]:
    p = Pipeline("anthropic.claude-sonnet-4-5", "bedrock", 200_000)
    p.identity("You are terse.")
    p.add_tool("bash", "Run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    p.user("List the files.")
    p.assistant(
        "",
        [{"id": "toolu_1", "name": "bash", "arguments": {"cmd": "ls"}}],
        thinking=[
            {"type": "thinking", "thinking": "First, list them.", "signature": SIG},
            {"type": "redacted_thinking", "data": DATA},
        ],
    )
    p.tool_result("toolu_1", "")  # a command with no output
    return p.next_request().body  # type: ignore[no-any-return]


def test_redacted_thinking_and_empty_tool_result_match_botocore() -> None:
    body = _session_body()
    _check_against_botocore(body)
    asst = [m for m in body["messages"] if m["role"] == "assistant"][0]["content"]
    # Converse's Blob is the bytes of Claude's own data string: the body carries their base64.
    red = asst[1]["reasoningContent"]["redactedContent"]
    assert base64.b64decode(red).decode() == DATA
    # An empty tool output is a toolResult with an empty text block: the shape allows it (String, no
    # minimum); only a message-level blank text is refused by the service, which this is not.
    result = [m for m in body["messages"] if m["role"] == "user"][-1]["content"][0]["toolResult"]
    assert result["content"] == [{"text": ""}]


@pytest.mark.parametrize("data", [DATA, "EuYBCkQIBhgCIkAx/+8AAQ=="])
def test_redacted_content_wraps_claude_data_once(data: str) -> None:
    once = redacted_content(data)
    assert base64.b64decode(once).decode() == data
    assert redacted_content(once) == once  # a Converse reply's value copied through is not wrapped twice
