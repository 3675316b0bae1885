"""OpenAI-compatible chat completions: automatic prefix caching, no markers.

Also used for DeepSeek and other OpenAI-compatible endpoints, and (with the generic prefix policy)
for any provider that caches prefixes without explicit breakpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Any

from engine.artifacts import Media, Message, Text, ToolCall, ToolResult, ToolSchema
from engine.hashing import canonical_json, json_string
from engine.providers.base import Serializer, comma_joined
from engine.providers.policy import OPENAI, PREFIX, ProviderCachePolicy


def system_block(text: str, marked: bool) -> dict[str, Any]:
    return {"role": "system", "content": text}


def tool_block(t: ToolSchema, marked: bool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": t.name, "description": t.description, "parameters": t.parameters()},
    }


def _text(parts: Sequence[object]) -> str:
    out = []
    for p in parts:
        if isinstance(p, Text):
            out.append(p.text)
        elif isinstance(p, Media):
            out.append(f"[attachment {p.media_type} {p.ref} ({p.size} bytes)]")
    return "\n".join(out)


def tool_messages(m: Message) -> bytes | None:
    """The canonical bytes message_blocks' dicts give for a user message of tool results, written
    directly: each result's content escaped through json_string's memo, where its ToolResult's content
    hash left it (a tool's output is most of a turn's new bytes; escaping it twice cost ~10 us per
    4.5 KB; call ids, short, by encode_basestring directly: the same literal without a call through the
    memo). None when a part is not a ToolResult with string fields (message_blocks then builds dicts)."""
    out = []
    for r in m.parts:
        if not (isinstance(r, ToolResult) and type(r.content) is str and type(r.call_id) is str):
            return None
        # Keys in canonical (sorted) order: content, role, tool_call_id.
        out.append('{"content":' + json_string(r.content) + ',"role":"tool","tool_call_id":' + encode_basestring(r.call_id) + "}")
    return ",".join(out).encode("utf-8") if out else None


def assistant_message(m: Message) -> bytes | None:
    """The canonical bytes message_blocks' dict gives for an assistant message, written directly (the
    sorted-key encoder cost ~7 us of a ~9 us fragment, every turn): the arguments escaped through
    json_string's memo, where the ToolCall's content hash left them. None when a call's fields are not
    all strings (message_blocks then builds the dict)."""
    calls = []
    for c in m.parts:
        if isinstance(c, ToolCall):
            if not (type(c.id) is str and type(c.name) is str and type(c.arguments) is str):
                return None
            # Keys in canonical (sorted) order: function (arguments, name), id, type.
            calls.append(
                '{"function":{"arguments":' + json_string(c.arguments) + ',"name":' + encode_basestring(c.name)
                + '},"id":' + encode_basestring(c.id) + ',"type":"function"}'
            )  # fmt: skip
    text = _text(m.parts)
    # null only beside tool calls: OpenAI refuses an assistant message with neither ("Invalid value
    # for 'content': expected a string, got null"), e.g. one that held only thinking.
    out = '{"content":' + (json_string(text) if text or not calls else "null") + ',"role":"assistant"'
    if calls:
        out += ',"tool_calls":[' + ",".join(calls) + "]"
    return (out + "}").encode("utf-8")


def message_blocks(m: Message, marked: bool) -> list[dict[str, Any]] | bytes:
    if m.role == "assistant":
        frag = assistant_message(m)
        if frag is not None:
            return frag
    else:
        frag = tool_messages(m)
        if frag is not None:
            return frag
    if m.role == "assistant":
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.parts
            if isinstance(c, ToolCall)
        ]
        msg: dict[str, Any] = {"role": "assistant", "content": _text(list(m.parts)) or (None if calls else "")}
        if calls:
            msg["tool_calls"] = calls
        return [msg]
    # A user message carrying tool results becomes one `tool` message per result, then any text.
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": r.call_id, "content": r.content}
        for r in m.parts
        if isinstance(r, ToolResult)
    ]
    rest = [p for p in m.parts if not isinstance(p, ToolResult)]
    if rest or not out:
        out.append({"role": "user", "content": _text(rest)})
    return out


def envelope(
    model: str, max_tokens: int, system: list[bytes], tools: list[bytes], msgs: list[bytes]
) -> bytes:
    # One list joined once (see comma_joined): the messages are most of the body.
    out = comma_joined(b'{"max_completion_tokens":%d,"messages":[' % max_tokens, system + msgs, b"]")
    out.append(_model_field(model))
    if tools:
        out += comma_joined(b',"tools":[', tools, b"]")
    out.append(b"}")
    return b"".join(out)


@lru_cache(maxsize=16)
def _model_field(model: str) -> bytes:
    """The body's `"model"` member (the encoder's two Python calls once per model, not every request)."""
    return b',"model":' + canonical_json(model)


def serializer(policy: ProviderCachePolicy = OPENAI) -> Serializer:
    return Serializer(policy, system_block, tool_block, message_blocks, envelope)


def prefix_serializer() -> Serializer:
    return serializer(PREFIX)
