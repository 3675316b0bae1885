"""Anthropic Messages and OpenAI chat-completions bodies, request and response, read into the neutral
records (engine.importers.model): what the proxy-JSONL and claude-trace importers and the tap make of a
call.

Anthropic -> neutral: the `system` string/blocks become one system message; a user turn's
`tool_result` blocks become `tool` messages (in order, before the turn's text, as Anthropic requires);
assistant `thinking` blocks go to `thinking` (and, signed or redacted, one by one to `thinking_blocks`
with their signature or `data`, which the API needs to take them back), `tool_use` blocks to tool
calls (`input` dumped as JSON); each `cache_control` breakpoint is kept with its TTL.
"""

from __future__ import annotations

import json
from typing import Any

from engine.feedback import reply_diagnostics
from engine.importers._common import Ctx, _kind, arguments_text, join, openai_message, openai_tools, usage_rec
from engine.importers.model import MediaRec, MessageRec, ThinkingRec, ToolCallRec, ToolSchemaRec, UsageRec

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
            ctx.media.append(_anthropic_image(b))
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
        if btype == "document" and isinstance(src, dict) and _is_pdf(src):
            # Its pages as images plus their text, as Anthropic bills a PDF (engine.importers.media_tokens)
            from engine.importers.media_tokens import pdf_rec

            data = src.get("data") if src.get("type") == "base64" else None
            ref = str(src.get("url") or src.get("file_id") or "")
            ctx.media.append(pdf_rec("anthropic", data if isinstance(data, str) else None, ref=ref))
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
    ctx.media.clear()
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
            own_media, ctx.media = ctx.media, []  # (the message's own images, met before this block)
            results.append(
                MessageRec(
                    role="tool",
                    content=_block_text(b.get("content"), ctx, join(bw, "content")),
                    tool_call_id=ctx.text(
                        ctx.key(b, "tool_use_id", bw), join(bw, "tool_use_id"), allow_none=False
                    ),
                    media=ctx.take_media(),  # a screenshot a computer-use tool returned
                )
            )
            ctx.media = own_media
        elif btype == "image":
            texts.append("[image]")
            ctx.media.append(_anthropic_image(b))
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
                media=ctx.take_media(),
            )
        )
    ctx.media.clear()
    return out


def _is_pdf(src: dict[str, Any]) -> bool:
    """A document block's source that is a PDF: base64 data of that media type, or a PDF's URL; a file
    id (the Files API) whose media type the request does not say is taken for one (a plain-text file's
    block is sent as `text`)."""
    kind = src.get("type")
    if kind == "base64":
        return src.get("media_type") == "application/pdf"
    return kind in ("url", "file")


def _anthropic_image(b: dict[str, Any]) -> MediaRec:
    """An Anthropic image block (`source`: base64 with its media_type, a url, or a file) counted by
    Anthropic's rule."""
    from engine.importers.image_tokens import image_rec

    given = b.get("source")
    src: dict[str, Any] = given if isinstance(given, dict) else {}
    data = src.get("data") if src.get("type") == "base64" else None
    ref = str(src.get("url") or src.get("file_id") or "")
    return image_rec("anthropic", data if isinstance(data, str) else None, str(src.get("media_type") or ""), url=ref)


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
