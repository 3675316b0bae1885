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

Anthropic -> neutral: the `system` string/blocks become one system message; a user turn's
`tool_result` blocks become `tool` messages (in order, before the turn's text, as Anthropic requires);
assistant `thinking` blocks go to `thinking` (and, signed or redacted, one by one to `thinking_blocks`
with their signature or `data`, which the API needs to take them back), `tool_use` blocks to tool
calls (`input` dumped as JSON).
Usage: Anthropic `input_tokens` excludes cached parts, so input = input + cache_read + cache_creation;
OpenAI `prompt_tokens` already includes `prompt_tokens_details.cached_tokens`; DeepSeek's
`prompt_cache_hit_tokens` wins when present.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.capture.lineage import SAME_OPENING, Placement, conversations
from engine.capture.proxy.routes import session_key
from engine.feedback import reply_diagnostics
from engine.importers._common import (
    Ctx,
    _kind,
    arguments_text,
    guess_provider,
    join,
    json_lines,
    openai_message,
    openai_tools,
    parse_json,
    read_text,
    sub,
    sublist,
    usage_rec,
)
from engine.importers.model import (
    CallRec,
    ImportedSession,
    ImportFormatError,
    Interner,
    MessageRec,
    NoSuchConversation,
    ThinkingRec,
    ToolCallRec,
    ToolSchemaRec,
    UsageRec,
)
from engine.wording import counted

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


# ---------------------------------------------------------------- Anthropic


def _block_text(content: Any, ctx: Ctx, where: str) -> str:
    """tool_result content (and the system prompt): a string or a list of blocks (text, image, any other)."""
    if content is None or isinstance(content, str):
        return content or ""
    out = []
    for j, b in enumerate(ctx.lst(content, where)):
        bw = join(where, j)
        b = ctx.obj(b, bw)
        if b.get("type") == "text":
            out.append(ctx.text(b.get("text"), join(bw, "text"), allow_none=False))
        elif b.get("type") == "image":
            out.append("[image]")
        else:
            out.append(_other_block_text(b, ctx, bw))
    return "\n".join(out)


def _other_block_text(b: dict[str, Any], ctx: Ctx, where: str) -> str:
    """Any other content block, as the text it puts in the prompt. The Messages API keeps adding them
    (documents and search results from the user; server tools' calls and results, MCP listings, compaction
    summaries, fallback markers in the model's turns) and each is sent back with the conversation, so
    each is kept, never refused: a single unknown block would otherwise lose the call, and every later
    call that carries it. A document or search result is its text (a placeholder when it is binary, as
    for images); a block with text content is that text; anything else is its JSON, as it was sent."""
    btype = b.get("type")
    if not isinstance(btype, str) or not btype:
        ctx.fail(join(where, "type"), f"is {_kind(btype)} (expected a block type)")
    if btype in ("document", "search_result"):
        parts = [str(b[k]) for k in ("title", "source") if isinstance(b.get(k), str)]
        src = b.get("source")
        if isinstance(src, dict) and src.get("type") == "text" and isinstance(src.get("data"), str):
            parts.append(src["data"])
        body = src.get("content") if isinstance(src, dict) else b.get("content")
        if isinstance(body, list):
            parts += [str(c.get("text", "")) for c in body if isinstance(c, dict) and c.get("type") == "text"]
        return "\n".join(parts) if parts else f"[{btype}]"
    if isinstance(b.get("content"), str):  # a compaction block's summary
        return str(b["content"])
    rest = {k: v for k, v in b.items() if k not in ("type", "signature", "cache_control")}
    return f"[{btype}] {json.dumps(rest, ensure_ascii=False, sort_keys=True)}"


def _cache_ttl(b: dict[str, Any], ctx: Ctx, where: str) -> str | None:
    """The TTL of a block's `cache_control` breakpoint ("5m" unless it says "1h"), None without one."""
    cc = b.get("cache_control")
    if cc is None:
        return None
    cw = join(where, "cache_control")
    ttl = ctx.obj(cc, cw).get("ttl", "5m")
    if ttl not in ("5m", "1h"):
        ctx.fail(join(cw, "ttl"), f"is {_kind(ttl)} (expected 5m or 1h)")
    return str(ttl)


def _anthropic_message(
    m: Any, ctx: Ctx, where: str, marks: list[tuple[int, str]] | None = None
) -> list[MessageRec]:
    """One Anthropic message -> its MessageRecs (tool results first). `marks` receives (index in the
    returned list, ttl) of each one a `cache_control` breakpoint ends."""
    m = ctx.obj(m, where)
    role = ctx.key(m, "role", where)
    if role not in ("user", "assistant"):
        ctx.fail(join(where, "role"), f"is {_kind(role)} (expected user/assistant)")
    content = m.get("content")
    cw = join(where, "content")
    if isinstance(content, str):
        return [MessageRec(role=role, content=content)]
    blocks = ctx.lst(content, cw)
    texts: list[str] = []
    thinking: list[str] = []
    signed: list[ThinkingRec] = []  # the thinking blocks with what the API checks them by
    calls: list[ToolCallRec] = []
    results: list[MessageRec] = []
    own_ttl: str | None = None  # the breakpoint on the message's own (non-result) blocks, the last one
    for j, b in enumerate(blocks):
        bw = join(cw, j)
        b = ctx.obj(b, bw)
        btype = b.get("type")
        ttl = _cache_ttl(b, ctx, bw)
        if ttl is not None and marks is not None:
            if btype == "tool_result" and role == "user":
                marks.append((len(results), ttl))
            else:
                own_ttl = ttl
        if btype == "text":
            texts.append(ctx.text(b.get("text"), join(bw, "text"), allow_none=False))
        elif btype == "thinking" and role == "assistant":
            thinking.append(ctx.text(b.get("thinking"), join(bw, "thinking")))
            sig = b.get("signature")
            if sig is not None and not isinstance(sig, str):
                ctx.fail(join(bw, "signature"), f"is {_kind(sig)} (expected a string)")
            signed.append(ThinkingRec(thinking[-1], sig or ""))
        elif btype == "redacted_thinking" and role == "assistant":
            thinking.append("[redacted thinking]")
            data = b.get("data")
            if isinstance(data, str) and data:
                signed.append(ThinkingRec(data, redacted=True))
            else:  # nothing to send back: a placeholder the engine leaves out like unsigned thinking
                signed.append(ThinkingRec("[redacted thinking]"))
        elif btype == "tool_use" and role == "assistant":
            calls.append(
                ToolCallRec(
                    id=ctx.text(ctx.key(b, "id", bw), join(bw, "id"), allow_none=False),
                    name=ctx.text(ctx.key(b, "name", bw), join(bw, "name"), allow_none=False),
                    arguments=arguments_text(b.get("input"), ctx, join(bw, "input")),
                )
            )
        elif btype == "tool_result" and role == "user":
            results.append(
                MessageRec(
                    role="tool",
                    content=_block_text(b.get("content"), ctx, join(bw, "content")),
                    tool_call_id=ctx.text(
                        ctx.key(b, "tool_use_id", bw), join(bw, "tool_use_id"), allow_none=False
                    ),
                )
            )
        elif btype == "image":
            texts.append("[image]")
        elif btype in ("thinking", "redacted_thinking", "tool_use", "tool_result"):
            owner = "a user message" if btype == "tool_result" else "an assistant message"
            ctx.fail(join(bw, "type"), f"is {btype!r} in a {role} message (it belongs in {owner})")
        else:
            texts.append(_other_block_text(b, ctx, bw))
    out = list(results)
    if role == "assistant" or texts or not results:
        if own_ttl is not None and marks is not None:
            marks.append((len(out), own_ttl))
        out.append(
            MessageRec(
                role=role,
                content="\n".join(texts),
                tool_calls=tuple(calls),
                thinking="\n".join(thinking) if thinking else None,
                # Kept block by block only when one can go back (signed or redacted): without, the
                # joined text is all the engine has, as before.
                thinking_blocks=tuple(signed) if any(t.signature or t.redacted for t in signed) else (),
            )
        )
    return out


def _anthropic_request(
    req: dict[str, Any], ctx: Ctx, where: str
) -> tuple[list[MessageRec], tuple[ToolSchemaRec, ...], tuple[tuple[str, int, str], ...]]:
    """(messages, tools, the request's cache breakpoints: see CallRec.cache_marks)."""
    msgs: list[MessageRec] = []
    marks: list[tuple[str, int, str]] = []
    system = req.get("system")
    if system is not None:
        sw = join(where, "system")
        if isinstance(system, list):
            # One system message holds every system block: a breakpoint on any ends at it (the last).
            ttls = [
                _cache_ttl(b, ctx, join(sw, j)) if isinstance(b, dict) else None for j, b in enumerate(system)
            ]
            last = next((x for x in reversed(ttls) if x is not None), None)
            if last is not None:
                marks.append(("message", 0, last))
        msgs.append(MessageRec(role="system", content=_block_text(system, ctx, sw)))
    raw = ctx.lst(ctx.key(req, "messages", where), join(where, "messages"))
    for i, m in enumerate(raw):
        local: list[tuple[int, str]] = []
        got = _anthropic_message(m, ctx, join(join(where, "messages"), i), local)
        marks.extend(("message", len(msgs) + k, ttl) for k, ttl in local)
        msgs.extend(got)
    tools: list[ToolSchemaRec] = []
    tw = join(where, "tools")
    for i, t in enumerate(ctx.lst(req["tools"], tw) if req.get("tools") is not None else []):
        t = ctx.obj(t, join(tw, i))
        ttl = _cache_ttl(t, ctx, join(tw, i))
        if "input_schema" not in t:
            # server tools (web_search, bash_2024...) have no schema to record; a breakpoint on one
            # still ends the tools before it
            if ttl is not None and tools:
                marks.append(("tool", len(tools) - 1, ttl))
            continue
        if ttl is not None:
            marks.append(("tool", len(tools), ttl))
        tools.append(
            ToolSchemaRec(
                name=ctx.text(ctx.key(t, "name", join(tw, i)), join(join(tw, i), "name"), allow_none=False),
                description=ctx.text(t.get("description"), join(join(tw, i), "description")),
                parameters=ctx.obj(t["input_schema"], join(join(tw, i), "input_schema")),
            )
        )
    # Breakpoints in wire order (tools, then system and messages), as the API reads them.
    marks.sort(key=lambda x: (x[0] != "tool", x[1]))
    return msgs, tuple(tools), tuple(marks)


def _anthropic_response(
    resp: dict[str, Any], ctx: Ctx, where: str
) -> tuple[MessageRec | None, UsageRec | None, str | None]:
    if resp.get("type") == "error" or "error" in resp and "content" not in resp:
        err = resp.get("error")
        return None, None, json.dumps(err) if not isinstance(err, str) else err
    msg = _anthropic_message({"role": "assistant", "content": ctx.key(resp, "content", where)}, ctx, where)[
        -1
    ]
    usage = None
    if resp.get("usage") is not None:
        usage = usage_rec(resp["usage"], ctx, join(where, "usage"), **reply_diagnostics(resp))
    return msg, usage, None


# ---------------------------------------------------------------- OpenAI


def _openai_request(
    req: dict[str, Any], ctx: Ctx, where: str
) -> tuple[list[MessageRec], tuple[ToolSchemaRec, ...]]:
    raw = ctx.lst(ctx.key(req, "messages", where), join(where, "messages"))
    msgs = [
        openai_message(m, ctx, join(join(where, "messages"), i), role_map={"developer": "system"})
        for i, m in enumerate(raw)
    ]
    tools = openai_tools(req.get("tools"), ctx, join(where, "tools"))
    # The legacy function-calling API declares its tools as bare function objects under `functions`
    legacy = openai_tools(req.get("functions"), ctx, join(where, "functions"))
    return msgs, tools + legacy


def _openai_response(
    resp: dict[str, Any], ctx: Ctx, where: str
) -> tuple[MessageRec | None, UsageRec | None, str | None]:
    if "error" in resp and "choices" not in resp:
        err = resp["error"]
        return None, None, err if isinstance(err, str) else json.dumps(err)
    choices = ctx.lst(ctx.key(resp, "choices", where), join(where, "choices"))
    if not choices:
        ctx.fail(join(where, "choices"), "is empty (expected one choice)")
    c0 = ctx.obj(choices[0], join(join(where, "choices"), 0))
    msg = openai_message(
        ctx.key(c0, "message", join(where, "choices[0]")), ctx, join(where, "choices[0].message")
    )
    usage = None
    if resp.get("usage") is not None:
        usage = usage_rec(resp["usage"], ctx, join(where, "usage"), **reply_diagnostics(resp))
    return msg, usage, None


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


def session_of(fmt: str, path: str, calls: list[CallRec], providers: list[str], ctx: Ctx) -> ImportedSession:
    if not calls:
        ctx.fail("", "file has no model calls")
    # One model and provider price and simulate the whole session: the model most calls used (the
    # first named on a tie) and the provider that served it. The provider used to be the commonest
    # over every call, whatever its model: a log of one gpt-4o call and one Claude call came out as
    # "gpt-4o via anthropic" (Anthropic cache rules at OpenAI prices) without a word.
    # Calls that got a reply name the served model (a dated snapshot); a failed call only the one asked
    # for, which would read as a second model.
    models = [c.model for c in calls if c.model and c.response is not None] or [
        c.model for c in calls if c.model
    ]
    model = max(dict.fromkeys(models), key=models.count) if models else "unknown"
    known = [p for c, p in zip(calls, providers, strict=True) if p != "unknown" and c.model in (model, None)]
    # sorted() first so that a tie resolves the same way on every run (set order is hash-seeded)
    provider = max(sorted(set(known)), key=known.count) if known else "unknown"
    meta: dict[str, Any] = {"providers_per_call": providers, "notes": []}
    if len(set(models)) > 1 or len({p for p in providers if p != "unknown"}) > 1:
        mix = ", ".join(
            f"{m} ({models.count(m)})" for m in sorted(set(models), key=lambda m: (-models.count(m), m))
        )
        provs = ", ".join(sorted({p for p in providers if p != "unknown"}))
        meta["notes"].append(
            f"the calls use more than one model or provider ({mix}; providers {provs}): the whole session "
            f"is imported, simulated and priced as {model} via {provider}; import each part on its own "
            "(or name one with --model/--provider) to price it as what served it"
        )
    return ImportedSession(format=fmt, source=path, model=model, provider=provider, calls=calls, meta=meta)


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


@dataclass
class Conversation:
    """One conversation of a log: its calls (each with its provider), the number lineage gave it (the
    order conversations began in), how it began when it shares another's opening (lineage's branch,
    naming the other by that number) and the calls of it other conversations fit as well."""

    calls: list[tuple[CallRec, str]]
    number: int
    branch: dict[str, Any] | None = None
    ambiguous: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)  # (call in it, others)


def file_conversations(
    keyed: list[tuple[str, CallRec, str]], chained: list[tuple[str | None, str | None]]
) -> list[Conversation]:
    """The calls of a log by conversation, the largest first: `keyed` each call with its opening's key
    (routes.session_key) and provider; `chained` each call's (previous_response_id, own response id).

    One opening may be several conversations (the agent run twice on one task through the logging proxy,
    attempts at once, a step sampled again): told apart by the messages each already holds, as the
    proxy files them live (engine.capture.lineage). A Responses request continued by
    previous_response_id holds only what is new this turn: it goes with the call whose response it
    names, as the proxy's `_continued` files it."""
    by_response: dict[str, int] = {}  # a response id -> the index of its call
    owner: list[int] = []  # each call's index in `keyed`, or of the call it continues
    free: list[int] = []  # the calls lineage places
    for i, (prev, rid) in enumerate(chained):
        first = by_response.get(prev) if prev is not None else None
        owner.append(owner[first] if first is not None else i)
        if first is None:
            free.append(i)
        if rid is not None:
            by_response[rid] = i
    branches: dict[int, dict[str, Any]] = {}
    unsure: dict[int, Placement] = {}  # by index in `free`
    numbers = conversations(
        [(keyed[i][0], keyed[i][1].messages, keyed[i][1].response) for i in free], branches, unsure
    )
    number = dict(zip(free, numbers, strict=True))
    unsure_at = {free[k]: w.ambiguous for k, w in unsure.items()}
    groups: dict[int, Conversation] = {}
    for i, (_, call, provider) in enumerate(keyed):
        n = number[owner[i]]
        conv = groups.get(n)
        if conv is None:
            conv = groups[n] = Conversation([], n, branches.get(n))
        if i in unsure_at:
            conv.ambiguous.append((len(conv.calls), unsure_at[i]))
        conv.calls.append((call, provider))
    # sorted() is stable: conversations of one size stay in the order they began
    return sorted(groups.values(), key=lambda g: -len(g.calls))


def _preview(conv: Conversation) -> str:
    """The first message past the system prompt of a conversation's first call, short, on one line."""
    msgs = conv.calls[0][0].messages
    text = next((m.content for m in msgs if m.role != "system" and m.content.strip()), "")
    one = " ".join(text.split())
    return repr(one if len(one) <= 48 else one[:45] + "...") if one else "(no message)"


def _begins(conv: Conversation, rank: dict[int, int]) -> str:
    """How a conversation began, by the others' numbers in the listing ('' for a conversation of its own)."""
    b = conv.branch
    if b is None or b.get("session") not in rank:
        return ""
    other = rank[b["session"]]
    if b.get("kind") == SAME_OPENING:
        return f"same opening as {other}: a restart or another attempt"
    return f"forked from {other} at message {b.get('at_message')}"


def describe_conversations(ranked: list[Conversation]) -> list[str]:
    """One line per conversation, numbered as --conversation takes them: its calls, model, first message,
    and whether it is a restart or a fork of another."""
    rank = {c.number: k + 1 for k, c in enumerate(ranked)}
    out = []
    for k, c in enumerate(ranked, start=1):
        model = c.calls[0][0].model or "an unnamed model"
        began = _begins(c, rank)
        out.append(
            f"{k}: {counted(len(c.calls), 'call')} on {model}, {_preview(c)}" + (f" ({began})" if began else "")
        )
    return out


def one_conversation(
    fmt: str, path: str, ranked: list[Conversation], conversation: int, ctx: Ctx
) -> ImportedSession:
    """Conversation `conversation` (1 = the largest) of `ranked` as the session; the notes name the others,
    and which is a restart or a fork of which."""
    listing = describe_conversations(ranked)
    if not 1 <= conversation <= len(ranked):
        raise NoSuchConversation(
            fmt,
            path,
            "",
            f"has {counted(len(ranked), 'conversation')}; conversation {conversation} does not exist (give 1 to "
            f"{len(ranked)})",
            listing,
        )
    chosen = ranked[conversation - 1]
    session = session_of(fmt, path, [c for c, _ in chosen.calls], [p for _, p in chosen.calls], ctx)
    session.meta["conversations"] = [len(g.calls) for g in ranked]
    session.meta["conversation_list"] = listing
    session.meta.setdefault("notes", [])
    notes = session.meta["notes"]
    if len(ranked) > 1:
        rank = {c.number: k + 1 for k, c in enumerate(ranked)}
        others = [line for k, line in enumerate(listing) if k != conversation - 1]
        more = f"; and {len(others) - 6} more" if len(others) > 6 else ""
        own = _begins(chosen, rank)
        notes.append(
            f"imported conversation {conversation} of {len(ranked)} ({counted(len(chosen.calls), 'call')}"
            f"{', ' + own if own else ''}); the others: {'; '.join(others[:6])}{more}; import another with "
            "--conversation N"
        )
    if chosen.ambiguous:
        rank = {c.number: k + 1 for k, c in enumerate(ranked)}
        calls = ", ".join(str(k) for k, _ in chosen.ambiguous[:6])
        also = sorted({rank.get(n, n) for _, ns in chosen.ambiguous for n in ns})
        one = len(chosen.ambiguous) == 1  # "call 1 ... fits conversation 2", not "call(s) 1 ... fit"
        notes.append(
            f"{'call' if one else 'calls'} {calls}{' and more' if len(chosen.ambiguous) > 6 else ''} of this "
            f"conversation {'fits' if one else 'fit'} {'conversation' if len(also) == 1 else 'conversations'} "
            f"{', '.join(map(str, also))} as well (an attempt that left its reply out, or a compaction that kept "
            f"only the shared opening): filed with this one, the earliest {'it fits' if one else 'they fit'}"
        )
    return session


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
