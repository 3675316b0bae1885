"""Anthropic Messages API: cache_control breakpoints (at most 4), prefix order tools -> system -> messages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any, TypeVar

from engine.artifacts import Media, Message, Text, Thinking, ToolCall, ToolResult, ToolSchema
from engine.hashing import canonical_json, escaped, json_string
from engine.providers.base import Serializer, comma_joined
from engine.providers.policy import ANTHROPIC

EPHEMERAL = {"type": "ephemeral"}
_P = TypeVar("_P")
# What a message with nothing to send carries instead (only an import can make one: Pipeline.user and
# assistant refuse it). The Messages API refuses an empty text block ("text content blocks must be
# non-empty"), one of whitespace only ("text content blocks must contain non-whitespace text") and a
# message without content ("all messages must have non-empty content except for the optional final
# assistant message"); Bedrock's Converse refuses the same ("The text field in the ContentBlock object at
# messages.N.content.0 is blank", "The content field in the Message object at messages.N is empty").
# Dropping the message would break the roles' alternation. The pipeline says so in the trace (the history
# section's note).
EMPTY_TEXT = "[empty message]"


# What an error result with no output carries instead: the Messages API refuses it ("tool_result: content
# cannot be empty if `is_error` is true"), as a tool that failed without a word gives it (an import's, or
# an agent's tool_result(id, "", is_error=True)). Bedrock gets the same (Claude behind Converse). Said in
# the history section's note (Pipeline._empty_note).
ERROR_NO_OUTPUT = "[error, no output]"


def silent_error(parts: Sequence[object]) -> bool:
    """True when the parts hold an error result with no output (sent as ERROR_NO_OUTPUT)."""
    for p in parts:
        if type(p) is ToolResult and p.is_error and not p.content:
            return True
    return False


def _blank(p: object) -> bool:
    """A text part both APIs refuse: empty or only whitespace."""
    return type(p) is Text and (not p.text or p.text.isspace())


def sends_nothing(parts: Sequence[object]) -> bool:
    """True when a message with these parts has no block the API takes: no parts, or only blank texts
    (and thinking without a signature, which signed_parts leaves out beside them)."""
    for p in parts:
        if type(p) is Text:
            if p.text and not p.text.isspace():
                return False
        elif not (type(p) is Thinking and not p.signature and not p.redacted):
            return False
    # Unsigned thinking alone is kept (signed_parts): something is sent then.
    return not parts or any(type(p) is Text for p in parts)


def sent_parts(parts: Sequence[_P]) -> Sequence[_P]:
    """The parts a message sends: signed_parts less blank texts (refused beside other blocks too;
    whitespace says nothing to the model). The same list when nothing is left out, so a valid message's
    bytes are what they were."""
    kept = signed_parts(parts)
    for p in kept:
        if _blank(p):
            return [q for q in kept if not _blank(q)]
    return kept


# What a system text with nothing in it carries instead (a section's text of whitespace only, such as
# identity("   "), or a binder's): both APIs refuse a blank text block in the system prompt as they do in a
# message. A stand-in rather than leaving the block out keeps the cache marker the plan put on it. The
# pipeline says so in that section's note (Pipeline._blank_system_note). An empty text never gets here: a
# section with no text is left out of the request.
EMPTY_SYSTEM_TEXT = "[empty system text]"


def system_text(text: str) -> str:
    """The text a system block sends: the text itself, or EMPTY_SYSTEM_TEXT for a blank one."""
    return EMPTY_SYSTEM_TEXT if not text or text.isspace() else text


def system_block(text: str, marked: bool) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "text", "text": system_text(text)}
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
        content = p.content if p.content or not p.is_error else ERROR_NO_OUTPUT
        b: dict[str, Any] = {"type": "tool_result", "tool_use_id": p.call_id, "content": content}
        if p.is_error:
            b["is_error"] = True
        return b
    if isinstance(p, Thinking):
        if p.redacted:
            return {"type": "redacted_thinking", "data": p.text}
        return {"type": "thinking", "thinking": p.text, "signature": p.signature}
    if isinstance(p, Media):
        return {"type": "text", "text": f"[attachment {p.media_type} {p.ref} ({p.size} bytes)]"}
    raise TypeError(type(p).__name__)


_MARK = '"cache_control":{"type":"ephemeral"},'  # first key of a marked block (sorted before the rest)
_EMPTY_JSON = '"text":' + json_string(EMPTY_TEXT) + ',"type":"text"'
_NO_OUTPUT_JSON = json_string(ERROR_NO_OUTPUT)


# json.loads' own scanner (its default decoder's settings): what json.loads runs after skipping leading
# whitespace and before checking for trailing data (two regex matches and three Python calls).
_SCAN = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]  # (set by its __init__)


def _object_of(text: str) -> Any:
    """json.loads(text), or None where it raises: an agent's arguments (`{"command": ...}`) scanned at
    once when they start with the brace and end with the value; anything else (whitespace around,
    trailing data, not JSON) goes through json.loads itself."""
    if text[0] == "{":
        try:
            v, end = _SCAN(text, 0)
        except (StopIteration, ValueError):
            v, end = None, -1
        if end == len(text):
            return v
    try:
        return json.loads(text)
    except ValueError:
        return None


# json's own C string scanner: (the decoded string, the index after its closing quote) for the literal
# whose opening quote is just before the index given; raises ValueError where it is not one (strict:
# a raw control character inside is refused, as json.loads refuses it).
_SCANSTRING = json.decoder.scanstring  # type: ignore[attr-defined]  # (c_scanstring, else its Python twin)


def _one_member(text: str) -> str | None:
    """input_json's answer for arguments written `{"key": "value"}` or `{"key":"value"}` (an agent's
    usual `{"command": ...}`), without parsing them into an object and escaping the value again: the
    two literals as written are the canonical ones when the key holds no escape and the value holds
    none but \\" \\\\ \\n \\r \\t \\b \\f (no \\u, no \\/): each of those is the escape
    encode_basestring writes for the character it stands for, a literal holds no raw `"`, backslash or
    control character, and every other character is written as is by both. None for anything else
    (input_json's general way then; a stray `\\u` text in the value, an escaped backslash before a
    `u`, also goes that way). The same string as that way: tests/test_input_json_literal.py."""
    if not text.startswith('{"') or text[-1] != "}":
        return None
    try:
        _key, at = _SCANSTRING(text, 2)
        raw_key = text[1:at]
        if "\\" in raw_key:
            return None
        if text.startswith(': "', at):
            start = at + 2
        elif text.startswith(':"', at):
            start = at + 1
        else:
            return None
        _value, end = _SCANSTRING(text, start + 1)
    except ValueError:
        return None
    if end != len(text) - 1:
        return None
    raw = text[start:end]
    if "\\u" in raw or "\\/" in raw:
        return None
    return "{" + raw_key + ":" + raw + "}"


def input_json(p: ToolCall) -> str:
    """The canonical JSON of a tool call's input object (p.arguments_obj()), as Anthropic's tool_use
    `input` and Bedrock's toolUse `input` send it. Arguments that are an object of string values (an
    agent's usual `{"command": "..."}`) are written directly: parsed by json's own decoder and each
    member escaped, where arguments_obj's decoder (hooks for numbers and constants, made per call) and
    the sorted-key encoder cost ~15 us a call, every turn's new tool call. Anything else (numbers,
    nesting, not JSON, not an object) goes arguments_obj's way; a string value holds no number or
    constant, so both parses give the same object."""
    text = p.arguments
    if text:
        one = _one_member(text)
        if one is not None:
            return one
        v = _object_of(text)
        if type(v) is dict:
            out = []
            for k in sorted(v):
                x = v[k]
                if type(x) is not str:
                    break
                out.append(encode_basestring(k) + ":" + escaped(x))
            else:
                return "{" + ",".join(out) + "}"
    return canonical_json(p.arguments_obj()).decode("utf-8")


def _part_json(p: object) -> str | None:
    """The canonical JSON _part's dict gives for a text, tool result, tool call or thinking part, inside
    its braces (a marker goes first, so the caller puts it in front), written directly: the sorted-key
    encoder cost several microseconds per part, and a tool's output is escaped through json_string's
    memo, where its ToolResult's content hash left it. None for anything else (the dict path then)."""
    if type(p) is Text and type(p.text) is str:
        return '"text":' + json_string(p.text) + ',"type":"text"'
    if type(p) is ToolResult and type(p.content) is str and type(p.call_id) is str:
        err = '"is_error":true,' if p.is_error else ""
        content = json_string(p.content) if p.content or not p.is_error else _NO_OUTPUT_JSON
        return (
            '"content":' + content + "," + err
            + '"tool_use_id":' + encode_basestring(p.call_id) + ',"type":"tool_result"'
        )  # fmt: skip
    if type(p) is ToolCall and type(p.id) is str and type(p.name) is str and type(p.arguments) is str:
        args = input_json(p)
        return (
            '"id":' + encode_basestring(p.id) + ',"input":' + args
            + ',"name":' + encode_basestring(p.name) + ',"type":"tool_use"'
        )  # fmt: skip
    if type(p) is Thinking and type(p.text) is str and type(p.signature) is str:
        if p.redacted:
            return '"data":' + json_string(p.text) + ',"type":"redacted_thinking"'
        return (
            '"signature":' + json_string(p.signature)
            + ',"thinking":' + json_string(p.text) + ',"type":"thinking"'
        )  # fmt: skip
    return None


def message_json(m: Message, marked: bool) -> bytes | None:
    """The canonical bytes message_blocks' dicts give for a message, written directly; None when a part
    is of another kind or holds a field of another type (media: the dicts then). tests/test_provider_fragments.py
    holds them equal to the encoder's bytes."""
    role = m.role
    if type(role) is not str:
        return None
    parts: Sequence[object] = m.parts
    if role == "user":
        # A message of tool results only (an agent's usual one, every turn) is in its order and sends every
        # part: sorting (a key call a part) and sent_parts (two scans) would give the same parts back.
        for p in parts:
            if type(p) is not ToolResult:
                parts = sent_parts(sorted(parts, key=lambda p: 0 if isinstance(p, ToolResult) else 1))
                break
    else:
        parts = sent_parts(parts)
    blocks = []
    for p in parts:
        got = _part_json(p)
        if got is None:
            return None
        blocks.append(got)
    if not blocks:
        blocks.append(_EMPTY_JSON)
        parts = ()
    if marked:
        i = _marked_index(parts, len(blocks))
        if i >= 0:
            blocks[i] = _MARK + blocks[i]
    tail = _ROLE_TAILS.get(role)
    if tail is None:
        tail = '}],"role":' + encode_basestring(role) + "}"
    # One join: concatenating around the body copied the whole message once a piece.
    return "".join(('{"content":[{', "},{".join(blocks), tail)).encode("utf-8")


_ROLE_TAILS = {role: '}],"role":' + encode_basestring(role) + "}" for role in ("user", "assistant")}


def message_blocks(m: Message, marked: bool) -> list[dict[str, Any]] | bytes:
    frag = message_json(m, marked)
    return frag if frag is not None else message_dicts(m, marked)


def message_dicts(m: Message, marked: bool) -> list[dict[str, Any]]:
    """The message as the API's dicts (the serializer writes them as canonical JSON)."""
    # Tool results must come first in a user message (the API rejects text before them).
    parts = sent_parts(
        sorted(m.parts, key=lambda p: 0 if isinstance(p, ToolResult) else 1) if m.role == "user" else m.parts
    )
    content = [_part(p) for p in parts] or [{"type": "text", "text": EMPTY_TEXT}]
    if marked:
        i = _marked_index(parts if len(parts) == len(content) else (), len(content))
        if i >= 0:
            content[i] = {**content[i], "cache_control": EPHEMERAL}
    return [{"role": m.role, "content": content}]


def signed_parts(parts: Sequence[_P]) -> Sequence[_P]:
    """The parts a message sends: a thinking block without its signature is left out. The API checks
    each thinking block's signature against its text and refuses the request when it is missing or
    wrong ("Invalid `signature` in `thinking` block"); one the engine has no signature for (given as
    text, or another model's reasoning) can only be left out, which a request without thinking enabled
    accepts. Kept when it is all the message has (nothing else to send in its place). A redacted block
    carries no signature: its encrypted `data` is what the API checks, so it always goes back."""
    for p in parts:
        if isinstance(p, Thinking) and not p.signature and not p.redacted:
            kept = [q for q in parts if not (isinstance(q, Thinking) and not q.signature and not q.redacted)]
            return kept if kept else parts
    return parts


def _marked_index(parts: Sequence[object], n: int) -> int:
    """The block of a marked message that carries its cache_control: the last one, unless it is a
    thinking block, which the API refuses to mark (the SDK's ThinkingBlockParam has no cache_control;
    the prefix up to a later marked block still caches it). Then the last block before it that is not
    thinking; -1 when every block is thinking (the message carries no breakpoint)."""
    if not parts or type(parts[-1]) is not Thinking:
        return n - 1
    for i in range(len(parts) - 1, -1, -1):
        if type(parts[i]) is not Thinking:
            return i
    return -1


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
    return canonical_json(s)


_MARK_BYTES = _MARK.encode()


def unmarked(frag: bytes) -> bytes | None:
    """A marked message fragment's unmarked bytes: the marked block's cache_control key taken out (its
    first key, sorted before the rest, so the block's `{` is right before it), when the fragment holds
    that text exactly once; else None (the message is written again). Exactly once means it is the
    marker: inside a string a quote is escaped, so the text can only be a key, and a tool call's
    input holding such a key makes two."""
    at = frag.find(_MARK_BYTES)
    if at <= 0 or frag[at - 1] != 0x7B or frag.find(_MARK_BYTES, at + 1) >= 0:  # (0x7B: "{")
        return None
    return frag[:at] + frag[at + len(_MARK_BYTES) :]


def serializer() -> Serializer:
    return Serializer(ANTHROPIC, system_block, tool_block, message_blocks, envelope, unmarked)
