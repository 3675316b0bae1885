"""Bedrock Converse: cachePoint blocks (at most 4) after the marked system block, tool or message."""

from __future__ import annotations

from typing import Any

from engine.artifacts import Media, Message, Text, Thinking, ToolCall, ToolResult, ToolSchema
from engine.hashing import canonical_json
from engine.providers.base import Serializer, comma_joined
from engine.providers.policy import BEDROCK

CACHE_POINT = {"cachePoint": {"type": "default"}}


def system_block(text: str, marked: bool) -> list[dict[str, Any]]:  # type: ignore[override]
    return [{"text": text}, CACHE_POINT] if marked else [{"text": text}]


def tool_block(t: ToolSchema, marked: bool) -> list[dict[str, Any]]:  # type: ignore[override]
    spec = {
        "toolSpec": {"name": t.name, "description": t.description, "inputSchema": {"json": t.parameters()}}
    }
    return [spec, CACHE_POINT] if marked else [spec]


def _part(p: object) -> dict[str, Any]:
    if isinstance(p, Text):
        return {"text": p.text}
    if isinstance(p, ToolCall):
        return {"toolUse": {"toolUseId": p.id, "name": p.name, "input": p.arguments_obj()}}
    if isinstance(p, ToolResult):
        r: dict[str, Any] = {"toolUseId": p.call_id, "content": [{"text": p.content}]}
        if p.is_error:
            r["status"] = "error"
        return {"toolResult": r}
    if isinstance(p, Thinking):
        return {"reasoningContent": {"reasoningText": {"text": p.text, "signature": p.signature}}}
    if isinstance(p, Media):
        return {"text": f"[attachment {p.media_type} {p.ref} ({p.size} bytes)]"}
    raise TypeError(type(p).__name__)


def message_blocks(m: Message, marked: bool) -> list[dict[str, Any]]:
    content = [_part(p) for p in m.parts] or [{"text": ""}]
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


def serializer() -> Serializer:
    return Serializer(BEDROCK, system_block, tool_block, message_blocks, envelope)  # type: ignore[arg-type]
