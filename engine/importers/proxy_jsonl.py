"""JSONL written by request-logging proxies: one model call per line.

Each line: `{"request": <raw request body>, "response": <raw response body or null>, "timestamp": ...,
"provider": optional, "error": optional}`. The request is an Anthropic Messages body, an OpenAI
chat-completions body or an OpenAI Responses body (`input` instead of `messages`). The response is the
parsed body, or the body as text: JSON, or a streamed (SSE) response, which is reassembled into the
body the API returns unstreamed (a stream that did not finish is recorded as the call's error).
`provider` decides when present, otherwise the shape does (Anthropic: top-level
`system`, content blocks `tool_use`/`tool_result`, `input_schema` tools, response `type: "message"`;
OpenAI: `messages` with role system/tool, response `choices`). Lines may mix providers.

A log often holds several conversations (the agent run twice through one logging proxy, a title call
beside the agent's own): they are told apart as the proxy files them (the opening, then the messages each
already holds: `engine.capture.lineage`); the import is the conversation with the most calls
(`parse_lines(conversation=N)` picks another, `every_call` reads the log as one set of calls) and the
notes list the others.

How each wire's bodies become neutral records is engine.importers.wire_bodies'; how a log's calls
are told apart by conversation and made a session, engine.importers.log_sessions'.

Usage: Anthropic `input_tokens` excludes cached parts, so input = input + cache_read + cache_creation;
OpenAI `prompt_tokens` already includes `prompt_tokens_details.cached_tokens`; DeepSeek's
`prompt_cache_hit_tokens` wins when present.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from engine.capture.proxy.routes import session_key
from engine.importers._common import (
    Ctx,
    _kind,
    guess_provider,
    json_lines,
    parse_json,
    read_text,
    sub,
    sublist,
)
from engine.importers.log_sessions import (
    Conversation,
    describe_conversations,
    file_conversations,
    one_conversation,
    session_of,
)
from engine.importers.model import CallRec, ImportedSession, ImportFormatError, Interner, MessageRec, UsageRec
from engine.importers.wire_bodies import (
    _anthropic_request,
    _anthropic_response,
    _openai_request,
    _openai_response,
)
from engine.wording import counted

# log_sessions' names, imported from here as before
__all__ = [
    "Conversation",
    "describe_conversations",
    "every_call",
    "file_conversations",
    "one_conversation",
    "parse_line",
    "parse_lines",
    "session_of",
    "sniff_line",
]

NAME = "proxy-jsonl"
_OPENAI_LIKE = ("openai", "deepseek", "azure", "openrouter")


def sniff_line(obj: Any) -> bool:
    if not (isinstance(obj, dict) and isinstance(obj.get("request"), dict) and "response" in obj):
        return False
    # claude-trace's pairs hold the HTTP exchange (url, headers, body); ours hold the bodies.
    return not ("url" in obj["request"] and "body" in obj["request"])


def detect_provider(line: dict[str, Any]) -> str:
    """'anthropic' or 'openai' (the wire format; a named provider like deepseek maps to its format)."""
    named = line.get("provider")
    if isinstance(named, str):
        n = named.lower()
        if n in ("anthropic", "bedrock-anthropic", "claude"):
            return "anthropic"
        if n in _OPENAI_LIKE:
            return "openai"
    req = sub(line, "request")
    resp = sub(line, "response")
    if "system" in req or resp.get("type") == "message" or "choices" not in resp and "content" in resp:
        return "anthropic"
    for m in sublist(req, "messages"):
        if not isinstance(m, dict):
            continue
        if m.get("role") in ("system", "tool", "developer") or "tool_calls" in m:
            return "openai"
        c = m.get("content")
        if isinstance(c, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "thinking") for b in c
        ):
            return "anthropic"
    if any(isinstance(t, dict) and "input_schema" in t for t in sublist(req, "tools")):
        return "anthropic"
    return "openai"


# ---------------------------------------------------------------- file


def _timestamp(value: Any, ctx: Ctx, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    ctx.fail(where, f"is {_kind(value)} (expected epoch seconds or an ISO 8601 time)")


def _streamed(
    raw: str, wire: str, ctx: Ctx, where: str, cut: bool = False
) -> tuple[dict[str, Any] | None, str | None]:
    """A response logged as text: JSON, or a server-sent-event stream reassembled into the body the API
    would have returned unstreamed. (body, None), or (None, why) for a stream that did not finish.
    `cut`: the line says the call failed; a chat stream that ends without [DONE] after every choice
    finished is whole only without that, as the proxy judges it (Reassembled.settle)."""
    from engine.capture.proxy.sse import REASSEMBLERS

    stripped = raw.lstrip()
    if stripped.startswith("{"):
        obj = parse_json(raw, ctx, where)
        return ctx.obj(obj, where), None
    if not stripped:
        return None, "empty response body"
    r = REASSEMBLERS[wire](raw.encode("utf-8", "surrogatepass")).settle(cut)
    if r.body is None:
        article = "an" if wire[:1] in "aeiou" else "a"
        ctx.fail(where, f"is text that is neither JSON nor {article} {wire} event stream ({r.reason})")
    if not r.complete:
        return None, f"incomplete stream: {r.reason} ({counted(r.events, 'event')})"
    return r.body, None


def _wire(obj: dict[str, Any], req: dict[str, Any]) -> str:
    """anthropic | openai-chat | openai-responses."""
    if "messages" not in req and "input" in req:
        return "openai-responses"
    return "anthropic" if detect_provider(obj) == "anthropic" else "openai-chat"


def parse_line(obj: dict[str, Any], ctx: Ctx, where: str, intern: Interner) -> tuple[CallRec, str]:
    """One logged call -> (CallRec, provider name). `response` may be the parsed body, or the raw body as
    text (JSON or an SSE stream), or null with `error`."""
    from engine.capture.proxy import responses_api

    req = ctx.obj(ctx.key(obj, "request", where), f"{where} request")
    wire = _wire(obj, req)
    marks: tuple[tuple[str, int, str], ...] | None = None
    if wire == "anthropic":
        msgs, tools, marks = _anthropic_request(req, ctx, f"{where} request")
    else:
        chat_req = responses_api.request_to_chat(req) if wire == "openai-responses" else req
        msgs, tools = _openai_request(chat_req, ctx, f"{where} request")
    resp_raw = obj.get("response")
    response: MessageRec | None = None
    usage: UsageRec | None = None
    error: str | None = obj.get("error") if isinstance(obj.get("error"), str) else None
    if isinstance(resp_raw, str):
        resp_raw, stream_error = _streamed(resp_raw, wire, ctx, f"{where} response", cut=bool(error))
        error = error or stream_error
    if resp_raw is not None:
        resp = ctx.obj(resp_raw, f"{where} response")
        if wire == "anthropic":
            response, usage, err = _anthropic_response(resp, ctx, f"{where} response")
        else:
            if wire == "openai-responses":
                resp = responses_api.response_to_chat(resp)
            response, usage, err = _openai_response(resp, ctx, f"{where} response")
        error = error or err
    elif error is None:
        error = "no response recorded"
    if response is not None:
        response = intern(response)
    if usage is not None and isinstance(req.get("prompt_cache_key"), str):
        usage = usage.with_extra(prompt_cache_key=req["prompt_cache_key"])
    model = req.get("model") if isinstance(req.get("model"), str) else None
    if isinstance(resp_raw, dict) and isinstance(resp_raw.get("model"), str):
        model = resp_raw["model"]  # the served model (a dated snapshot) is more precise
    named = obj.get("provider")
    provider = named if isinstance(named, str) else (guess_provider(model) if wire != "anthropic" else wire)
    # The serving build (OpenAI/DeepSeek `system_fingerprint`): DeepSeek's cache persistence differs by
    # build, and simulate reads it from here; logs lost it, so every captured DeepSeek call was simulated
    # as the always-persisting build.
    fp = resp_raw.get("system_fingerprint") if isinstance(resp_raw, dict) else None
    call = CallRec(
        messages=tuple(intern(m) for m in msgs),
        response=response,
        tools=tools,
        usage=usage,
        timestamp=_timestamp(obj.get("timestamp"), ctx, f"{where} timestamp"),
        model=model,
        error=error,
        fingerprint=fp if isinstance(fp, str) and fp else None,
        cache_marks=marks,
    )
    return call, provider


def _response_id(obj: dict[str, Any], wire: str, ctx: Ctx, where: str) -> str | None:
    """A Responses call's response id (what a later request's previous_response_id names), or None."""
    if wire != "openai-responses":
        return None
    resp = obj.get("response")
    if isinstance(resp, str) and resp.strip():
        try:
            resp, _ = _streamed(resp, wire, ctx, where)
        except ImportFormatError:
            return None  # parse_line already took it; a body it cannot read names nothing
    rid = resp.get("id") if isinstance(resp, dict) else None
    return rid if isinstance(rid, str) and rid else None


def parse_lines(text: str, path: str, conversation: int = 1) -> ImportedSession:
    """The log's largest conversation (`conversation=N` picks another); the notes list the others.
    `conversation=0`: every call in the file's order, one session whatever its conversations (a log read
    as a set of calls, as every import was before conversations were told apart)."""
    ctx = Ctx(NAME, path)
    intern = Interner()
    keyed: list[tuple[str, CallRec, str]] = []
    chained: list[tuple[str | None, str | None]] = []
    for where, obj in json_lines(text, ctx):
        if not isinstance(obj, dict):
            ctx.fail(where, f"is {_kind(obj)} (expected an object with request and response)")
        call, provider = parse_line(obj, ctx, where, intern)
        req = obj["request"]
        wire = _wire(obj, req)
        keyed.append((session_key(wire, req, None), call, provider))
        prev = req.get("previous_response_id")
        chained.append(
            (prev if isinstance(prev, str) else None, _response_id(obj, wire, ctx, f"{where} response"))
        )
    if not keyed:
        ctx.fail("", "file has no JSON lines")
    if conversation == 0:
        return session_of(NAME, path, [c for _, c, _ in keyed], [p for _, _, p in keyed], ctx)
    return one_conversation(NAME, path, file_conversations(keyed, chained), conversation, ctx)


def every_call(path: str | Path) -> ImportedSession:
    """Every call of a proxy JSONL file in its order, one session (parse_lines' `conversation=0`)."""
    return parse_lines(read_text(str(path), NAME), str(path), conversation=0)
