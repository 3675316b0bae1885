"""The neutral session model every importer produces.

One `CallRec` is one model call: the prompt exactly as the agent sent it, what came back, the tool
schemas offered, and the provider's own usage figures where the source recorded them. Downstream code
(journal, cache simulator, what-if) only ever sees this model, never a source format.

Objects are frozen so that consecutive calls can share the same `MessageRec` instances: a 90-call
session whose prompt grows by two messages per call then costs O(messages) memory, not O(calls^2),
and identity (`is`) tells the engine which messages were unchanged between calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from engine.errors import ContextPipeError

ROLES = ("system", "user", "assistant", "tool")
ANY_FORMAT = "any known"  # ImportFormatError's format when sniffing found nothing


@dataclass(frozen=True)
class ToolCallRec:
    """A tool call inside an imported assistant message."""
    id: str
    name: str
    arguments: str  # JSON text as sent (kept as text: re-serializing would change the bytes)


@dataclass(frozen=True)
class ThinkingRec:
    """One Anthropic thinking block as sent: its text and signature, or (`redacted`) a redacted_thinking
    block's opaque `data` in `text`. The API takes a block back only with these as they came."""

    text: str
    signature: str = ""
    redacted: bool = False

    def block(self) -> dict[str, str]:
        """The block as the API (and Pipeline.assistant's `thinking=`) takes it."""
        if self.redacted:
            return {"type": "redacted_thinking", "data": self.text}
        return {"type": "thinking", "thinking": self.text, "signature": self.signature}


@dataclass(frozen=True)
class MediaRec:
    """An image a message carries, counted as its provider bills it (engine.importers.image_tokens)."""
    media_type: str  # "image/png", ...
    ref: str  # "sha256:..." of its base64 data, or the URL / file id it was given by
    size: int  # its bytes (0 when the request held only a reference)
    tokens: int
    how: str  # how `tokens` was counted: the rule and the dimensions, or why it is a guess


@dataclass(frozen=True)
class MessageRec:
    """One message of an imported call, as the agent sent it."""
    role: str  # "system" | "user" | "assistant" | "tool"
    content: str  # text ("" when none)
    tool_calls: tuple[ToolCallRec, ...] = ()
    tool_call_id: str | None = None  # for role "tool"
    name: str | None = None
    thinking: str | None = None  # reasoning_content, Anthropic thinking blocks, ...
    # Anthropic's thinking blocks one by one, when any carries a signature or is redacted: the engine
    # sends them back as they came (an unsigned one it must leave out). () otherwise: `thinking` says all.
    thinking_blocks: tuple[ThinkingRec, ...] = ()
    # The images it carries (the text holds an "[image]" placeholder where each was), with their tokens
    media: tuple[MediaRec, ...] = ()


@dataclass(frozen=True)
class ToolSchemaRec:
    """A tool schema an imported call offered the model."""
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema; a dict, so this record (unlike MessageRec) is unhashable


@dataclass(frozen=True)
class UsageRec:
    """Provider-reported usage for one call, as `engine.feedback.normalize_usage` reads it.

    `input_tokens` is always the whole prompt, cached parts included (DeepSeek/OpenAI `prompt_tokens`;
    for Anthropic `input_tokens + cache_read_input_tokens + cache_creation_input_tokens`), so the
    figures are comparable across providers. `cache_write_1h_tokens` is the part of the writes billed at
    the 1-hour rate; `extra` holds cache diagnostics (cache_miss_reason, prompt_cache_key, ...).
    """

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cache_write_1h_tokens: int = 0
    extra: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The usage event's dict (what `Pipeline.record_usage` journals)."""
        d: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens or 0,
            "cache_write_tokens": self.cache_write_tokens or 0,
        }
        if self.cache_write_1h_tokens:
            d["cache_write_1h_tokens"] = self.cache_write_1h_tokens
        d.update(self.extra)
        return d

    def with_extra(self, **kw: Any) -> UsageRec:
        merged = dict(self.extra)
        merged.update({k: v for k, v in kw.items() if v is not None})
        return replace(self, extra=tuple(sorted(merged.items())))


@dataclass(frozen=True)
class CallRec:
    """One model call = one turn."""

    messages: tuple[MessageRec, ...]  # the prompt exactly as the agent sent it
    response: MessageRec | None  # what the model returned (None if the call failed)
    tools: tuple[ToolSchemaRec, ...]
    usage: UsageRec | None  # real provider usage when the source has it
    timestamp: float | None
    model: str | None
    error: str | None = None
    # The serving build the provider named (OpenAI/DeepSeek `system_fingerprint`): cache behaviour differs by
    # build, so the cache simulator wants it.
    fingerprint: str | None = None
    # The request's own cache breakpoints (Anthropic `cache_control`), as ("tool" | "message", index into
    # `tools` | `messages`, ttl "5m" | "1h"); a content block's breakpoint is its message's. None: the
    # source does not say (formats without breakpoints, or that do not keep them); () : the request
    # asked for no caching at all.
    cache_marks: tuple[tuple[str, int, str], ...] | None = None


@dataclass
class ImportedSession:
    """A trajectory read by an importer, as calls the engine can replay into a recording."""
    format: str
    source: str
    model: str
    provider: str
    calls: list[CallRec]
    meta: dict[str, Any] = field(default_factory=dict)


class ImportFormatError(ContextPipeError, ValueError):
    """A file is not (or not entirely) in the format expected.

    The message names the format, the file, and the first thing that did not fit, as a JSON path
    (`messages[3].role`) or a line/column, so a user can open the file at that spot.
    """

    def __init__(self, fmt: str, path: str, where: str, detail: str) -> None:
        self.format = fmt
        self.path = path
        self.where = where
        self.detail = detail
        loc = f"{where} " if where else ""
        if fmt == ANY_FORMAT:
            what = "not a trajectory in any known format"
        else:
            what = f"not {'an' if fmt[:1] in 'aeiou' else 'a'} {fmt} trajectory"
        super().__init__(f"{path}: {what}: {loc}{detail}")


class NoSuchConversation(ImportFormatError):
    """A log's conversation asked for by a number it does not have (`conversation=N` past its count):
    the caller's mistake more than the file's. `conversations`: the log's, one line each."""

    def __init__(self, fmt: str, path: str, where: str, detail: str, conversations: list[str]) -> None:
        super().__init__(fmt, path, where, detail)
        self.conversations = conversations
        # Not "not a ... trajectory": the file is one; the number is not one of its conversations.
        self.args = (f"{path}: {detail}",)

    def __str__(self) -> str:
        return str(self.args[0])


class Interner:
    """Returns one shared `MessageRec` per distinct value.

    Sources that restate the whole prompt per call (proxy logs, SWE-agent's per-step `messages`) would
    otherwise produce a fresh copy of every old message each turn.
    """

    def __init__(self) -> None:
        self._seen: dict[MessageRec, MessageRec] = {}

    def __call__(self, msg: MessageRec) -> MessageRec:
        return self._seen.setdefault(msg, msg)


def validate_pairing(call: CallRec) -> list[str]:
    """List the tool calls in `call.messages` without a result, and results without a call.

    Only the prompt is checked: the response's own tool calls are answered by the *next* call.
    Importers record pairing as the source has it; this is how the engine finds out what is broken.
    """
    problems: list[str] = []
    open_calls: dict[str, int] = {}  # call id -> index of the assistant message that made it
    answered: set[str] = set()
    for i, msg in enumerate(call.messages):
        if msg.role == "assistant":
            for tc in msg.tool_calls:
                if tc.id in open_calls or tc.id in answered:
                    problems.append(f"messages[{i}]: tool call id {tc.id!r} is used twice")
                open_calls[tc.id] = i
        elif msg.role == "tool":
            tid = msg.tool_call_id
            if tid is None:
                problems.append(f"messages[{i}]: tool result without tool_call_id")
            elif tid in open_calls:
                del open_calls[tid]
                answered.add(tid)
            elif tid in answered:
                problems.append(f"messages[{i}]: second result for tool call {tid!r}")
            else:
                problems.append(f"messages[{i}]: tool result for unknown tool call {tid!r}")
    for tid, i in sorted(open_calls.items(), key=lambda kv: kv[1]):
        problems.append(f"messages[{i}]: tool call {tid!r} has no result")
    return problems
