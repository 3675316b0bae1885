"""Bedrock Converse: cachePoint blocks (at most 4) after the marked system block, tool or message."""

from __future__ import annotations

import base64
import binascii
from json.encoder import encode_basestring
from typing import Any

from engine.artifacts import Media, Message, Text, Thinking, ToolCall, ToolResult, ToolSchema
from engine.hashing import canonical_json, json_string
from engine.providers.anthropic import EMPTY_TEXT, ERROR_NO_OUTPUT, input_json, sent_parts, system_text
from engine.providers.base import Serializer, comma_joined
from engine.providers.policy import BEDROCK

CACHE_POINT = {"cachePoint": {"type": "default"}}
# Claude on Bedrock checks thinking signatures too, and Converse refuses blank text and a message without
# content as the Messages API does: a message's parts go the same way to both (anthropic.sent_parts, and
# EMPTY_TEXT for a message with nothing to send).


def system_block(text: str, marked: bool) -> list[dict[str, Any]]:  # type: ignore[override]
    # Converse refuses blank text in the system prompt as in a message: the Messages API's stand-in
    # (anthropic.system_text).
    block = {"text": system_text(text)}
    return [block, CACHE_POINT] if marked else [block]


def tool_block(t: ToolSchema, marked: bool) -> list[dict[str, Any]]:  # type: ignore[override]
    spec = {
        "toolSpec": {"name": t.name, "description": t.description, "inputSchema": {"json": t.parameters()}}
    }
    return [spec, CACHE_POINT] if marked else [spec]


def redacted_content(data: str) -> str:
    """Converse's `redactedContent` for a redacted_thinking block's `data`: a Blob in botocore's
    bedrock-runtime model, so base64 in the JSON body, of the bytes of Claude's own `data` string (what
    the Anthropic API and SDK, and so Pipeline.assistant, hold). Sent as it came, Converse read Claude's
    base64 text as the blob itself and got the wrong bytes. A value that is already that wrapping (a
    Converse reply's field copied through, as litellm did before it decoded them) is sent as it is: it
    decodes to base64 text, where Claude's own value decodes to binary."""
    try:
        inner = base64.b64decode(data, validate=True).decode("ascii")
        base64.b64decode(inner, validate=True)
    except (binascii.Error, ValueError):
        return base64.b64encode(data.encode("utf-8")).decode("ascii")
    return data


def _part(p: object) -> dict[str, Any]:
    if isinstance(p, Text):
        return {"text": p.text}
    if isinstance(p, ToolCall):
        return {"toolUse": {"toolUseId": p.id, "name": p.name, "input": p.arguments_obj()}}
    if isinstance(p, ToolResult):
        content = p.content if p.content or not p.is_error else ERROR_NO_OUTPUT
        r: dict[str, Any] = {"toolUseId": p.call_id, "content": [{"text": content}]}
        if p.is_error:
            r["status"] = "error"
        return {"toolResult": r}
    if isinstance(p, Thinking):
        if p.redacted:
            return {"reasoningContent": {"redactedContent": redacted_content(p.text)}}
        return {"reasoningContent": {"reasoningText": {"text": p.text, "signature": p.signature}}}
    if isinstance(p, Media):
        return {"text": f"[attachment {p.media_type} {p.ref} ({p.size} bytes)]"}
    raise TypeError(type(p).__name__)


_POINT = (
    ',{"cachePoint":{"type":"default"}}'  # CACHE_POINT's canonical JSON, after a marked message's content
)
_EMPTY_JSON = '{"text":' + json_string(EMPTY_TEXT) + "}"
_NO_OUTPUT_JSON = json_string(ERROR_NO_OUTPUT)


def _part_json(p: object) -> str | None:
    """The canonical JSON of _part's dict for a text, tool result, tool call or thinking part, written
    directly (the sorted-key encoder cost several microseconds per part; a tool's output is escaped
    through json_string's memo, where its ToolResult's content hash left it). None for anything else."""
    if type(p) is Text and type(p.text) is str:
        return '{"text":' + json_string(p.text) + "}"
    if type(p) is ToolResult and type(p.content) is str and type(p.call_id) is str:
        status = ',"status":"error"' if p.is_error else ""
        content = json_string(p.content) if p.content or not p.is_error else _NO_OUTPUT_JSON
        return (
            '{"toolResult":{"content":[{"text":' + content + "}]" + status
            + ',"toolUseId":' + encode_basestring(p.call_id) + "}}"
        )  # fmt: skip
    if type(p) is ToolCall and type(p.id) is str and type(p.name) is str and type(p.arguments) is str:
        args = input_json(p)
        return (
            '{"toolUse":{"input":' + args + ',"name":' + encode_basestring(p.name)
            + ',"toolUseId":' + encode_basestring(p.id) + "}}"
        )  # fmt: skip
    if type(p) is Thinking and type(p.text) is str and type(p.signature) is str:
        if p.redacted:
            return '{"reasoningContent":{"redactedContent":"' + redacted_content(p.text) + '"}}'
        return (
            '{"reasoningContent":{"reasoningText":{"signature":' + json_string(p.signature)
            + ',"text":' + json_string(p.text) + "}}}"
        )  # fmt: skip
    return None


def message_json(m: Message, marked: bool) -> bytes | None:
    """The canonical bytes message_dicts gives for a message, written directly; None when a part is of
    another kind or holds a field of another type (media: the dicts then). tests/test_provider_fragments.py
    holds them equal to the encoder's bytes."""
    if type(m.role) is not str:
        return None
    blocks = []
    for p in sent_parts(m.parts):
        got = _part_json(p)
        if got is None:
            return None
        blocks.append(got)
    body = ",".join(blocks) if blocks else _EMPTY_JSON
    return (
        '{"content":[' + body + (_POINT if marked else "") + '],"role":' + encode_basestring(m.role) + "}"
    ).encode("utf-8")


def message_blocks(m: Message, marked: bool) -> list[dict[str, Any]] | bytes:
    frag = message_json(m, marked)
    return frag if frag is not None else message_dicts(m, marked)


def message_dicts(m: Message, marked: bool) -> list[dict[str, Any]]:
    """The message as the API's dicts (the serializer writes them as canonical JSON)."""
    content = [_part(p) for p in sent_parts(m.parts)] or [{"text": EMPTY_TEXT}]
    if marked:
        content.append(CACHE_POINT)
    return [{"role": m.role, "content": content}]


def envelope(
    model: str, max_tokens: int, system: list[bytes], tools: list[bytes], msgs: list[bytes]
) -> bytes:
    # One list joined once (see comma_joined).
    out = comma_joined(b'{"inferenceConfig":{"maxTokens":%d},"messages":[' % max_tokens, msgs, b"]")
    out.append(b',"modelId":' + canonical_json(model))
    if system:
        out += comma_joined(b',"system":[', system, b"]")
    if tools:
        out += comma_joined(b',"toolConfig":{"tools":[', tools, b"]}")
    out.append(b"}")
    return b"".join(out)


_POINT_BYTES = _POINT.encode()
_ROLE_AT = b'],"role":'


def unmarked(frag: bytes) -> bytes | None:
    """A marked message fragment's unmarked bytes: the cachePoint block after its content taken out
    (it ends the content list, right before the role, the message's last key); None when the fragment
    is not of that form (the message is written again)."""
    at = frag.rfind(_ROLE_AT)
    if at < 0 or not frag.endswith(b"}") or not frag.startswith(_POINT_BYTES, at - len(_POINT_BYTES)):
        return None
    return frag[: at - len(_POINT_BYTES)] + frag[at:]


def serializer() -> Serializer:
    return Serializer(BEDROCK, system_block, tool_block, message_blocks, envelope, unmarked)  # type: ignore[arg-type]
