"""Anthropic Messages API: cache_control breakpoints (at most 4), prefix order tools -> system -> messages."""

from __future__ import annotations

from typing import Any

from engine.artifacts import Media, Message, Text, Thinking, ToolCall, ToolResult, ToolSchema
from engine.providers.base import Serializer, comma_joined
from engine.providers.policy import ANTHROPIC

EPHEMERAL = {"type": "ephemeral"}


def system_block(text: str, marked: bool) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "text", "text": text}
    if marked:
        b["cache_control"] = EPHEMERAL
    return b


def tool_block(t: ToolSchema, marked: bool) -> dict[str, Any]:
    b: dict[str, Any] = {"name": t.name, "description": t.description, "input_schema": t.parameters()}
    if marked:
        b["cache_control"] = EPHEMERAL
    return b


def _part(p: object) -> dict[str, Any]:
    if isinstance(p, Text):
        return {"type": "text", "text": p.text}
    if isinstance(p, ToolCall):
        return {"type": "tool_use", "id": p.id, "name": p.name, "input": p.arguments_obj()}
    if isinstance(p, ToolResult):
        b: dict[str, Any] = {"type": "tool_result", "tool_use_id": p.call_id, "content": p.content}
        if p.is_error:
            b["is_error"] = True
        return b
    if isinstance(p, Thinking):
        return {"type": "thinking", "thinking": p.text, "signature": p.signature}
    if isinstance(p, Media):
        return {"type": "text", "text": f"[attachment {p.media_type} {p.ref} ({p.size} bytes)]"}
    raise TypeError(type(p).__name__)


def message_blocks(m: Message, marked: bool) -> list[dict[str, Any]]:
    # Tool results must come first in a user message (the API rejects text before them).
    parts = (
        sorted(m.parts, key=lambda p: 0 if isinstance(p, ToolResult) else 1) if m.role == "user" else m.parts
    )
    content = [_part(p) for p in parts] or [{"type": "text", "text": ""}]
    if marked:
        content[-1] = {**content[-1], "cache_control": EPHEMERAL}
    return [{"role": m.role, "content": content}]


def envelope(
    model: str, max_tokens: int, system: list[bytes], tools: list[bytes], msgs: list[bytes]
) -> bytes:
    # One list joined once (see comma_joined).
    out = comma_joined(b'{"max_tokens":%d,"messages":[' % max_tokens, msgs, b"]")
    out.append(b',"model":' + _js(model))
    if system:
        out += comma_joined(b',"system":[', system, b"]")
    if tools:
        out += comma_joined(b',"tools":[', tools, b"]")
    out.append(b"}")
    return b"".join(out)


def _js(s: str) -> bytes:
    from engine.hashing import canonical_json

    return canonical_json(s)


def serializer() -> Serializer:
    return Serializer(ANTHROPIC, system_block, tool_block, message_blocks, envelope)
