"""claude-trace logs (`.claude-trace/log-*.jsonl`): one HTTP exchange with the Anthropic API per line.

A line is `{"request": {"timestamp", "method", "url", "headers", "body"}, "response": {"timestamp",
"status_code", "headers", "body" (parsed JSON) | "body_raw" (text: the SSE stream)} | null,
"logged_at", "note"?}`. A null response is a request that never got one (claude-trace's
"ORPHANED_REQUEST"). Only `/v1/messages` calls are model calls; token counting and other endpoints
are skipped and counted in the notes. Headers are never read (claude-trace keeps parts of API keys).

Claude Code talks to the API in several conversations at once (the main agent, sub-agents, short
title and summary calls on a small model). They are told apart as the proxy tells sessions apart
(system prompt and first message: `engine.capture.proxy.routes.session_key`, then the messages each
conversation already holds: `engine.capture.lineage`); the import is
the conversation with the most calls (`conversation=N` picks another, 1 = the largest), and the notes
list the others.
"""

from __future__ import annotations

import json
from typing import Any

from engine.capture.proxy.routes import session_key
from engine.importers._common import Ctx, _kind, json_lines
from engine.importers.log_sessions import file_conversations, one_conversation
from engine.importers.model import CallRec, ImportedSession, Interner
from engine.importers.proxy_jsonl import parse_line

NAME = "claude-trace"


def sniff_line(obj: Any) -> bool:
    if not isinstance(obj, dict) or "response" not in obj:
        return False
    req = obj.get("request")
    return isinstance(req, dict) and "url" in req and "body" in req and "method" in req


def _response_of(resp: Any, ctx: Ctx, where: str) -> tuple[Any, str | None]:
    """(the response for proxy_jsonl.parse_line: parsed body or raw text, an error or None)."""
    if resp is None:
        return None, "no response (the request was still open when claude-trace stopped)"
    resp = ctx.obj(resp, where)
    status = resp.get("status_code")
    body = resp.get("body")
    raw = resp.get("body_raw")
    if isinstance(status, int) and status >= 400:
        text = json.dumps(body) if body is not None else str(raw or "")
        return None, f"HTTP {status}: {text[:2000]}"
    if body is not None:
        return body, None
    if isinstance(raw, str):
        return raw, None
    return None, "the response body was not logged"


def parse_lines(text: str, path: str, conversation: int = 1) -> ImportedSession:
    ctx = Ctx(NAME, path)
    intern = Interner()
    keyed: list[tuple[str, CallRec, str]] = []  # each call with its opening's key
    skipped: dict[str, int] = {}
    for where, obj in json_lines(text, ctx):
        if not sniff_line(obj):
            ctx.fail(where, f"is {_kind(obj)} without request.url/body (expected a claude-trace pair)")
        req = obj["request"]
        url = str(req.get("url", ""))
        endpoint = url.split("?", 1)[0]
        if not endpoint.endswith("/v1/messages"):
            tail = endpoint.rsplit("/", 2)[-2:]
            skipped["/".join(tail)] = skipped.get("/".join(tail), 0) + 1
            continue
        body = ctx.obj(req.get("body"), f"{where} request.body")
        response, error = _response_of(obj.get("response"), ctx, f"{where} response")
        line_obj: dict[str, Any] = {
            "request": body,
            "response": response,
            "provider": "anthropic",
            "timestamp": req.get("timestamp"),
        }
        if error is not None:
            line_obj["error"] = error
        call, provider = parse_line(line_obj, ctx, where, intern)
        keyed.append((session_key("anthropic", body, None), call, provider))
    if not keyed:
        ctx.fail("", "no /v1/messages calls in the file" + (f" (skipped: {skipped})" if skipped else ""))
    # Calls with one opening may be several conversations (a sub-agent of one kind run twice, a call
    # asked again): told apart by the messages each already holds, as the proxy files them
    ranked = file_conversations(keyed, [(None, None)] * len(keyed))
    session = one_conversation(NAME, path, ranked, conversation, ctx)
    if skipped:
        session.meta["notes"].append(f"skipped non-message endpoints: {skipped}")
    return session
