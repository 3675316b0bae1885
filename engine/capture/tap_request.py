"""What the tap (and the proxy's journaling path, which is a Tap) makes of an agent's request body, in
any wire's spelling: its messages, tools and cache breakpoints (`parse_request`), the settings the
OpenTelemetry export names (`request_params`), and the server a call went to (`server_of`). Reading the
SDK's create() arguments into that body is `tap.request_body`'s.
"""

from __future__ import annotations

from typing import Any

from engine.importers._common import Ctx
from engine.importers.model import MessageRec, ToolSchemaRec
from engine.importers.wire_bodies import _anthropic_request, _openai_request


def _output_type(body: dict[str, Any]) -> str | None:
    """gen_ai.output.type for a request that asks for an output format: `json` for a JSON object or
    schema, `text` for plain text (the conventions' well-known values); None when it asks for none."""
    formats = [body.get("response_format"), body.get("output_format"), body.get("text_format")]
    for nested in (body.get("text"), body.get("output_config")):
        if isinstance(nested, dict):
            formats.append(nested.get("format"))
    for f in formats:
        kind = f.get("type") if isinstance(f, dict) else None
        if kind in ("json_object", "json_schema", "json"):
            return "json"
        if kind == "text":
            return "text"
    return None


def request_params(body: dict[str, Any]) -> dict[str, Any]:
    """The request's settings as the agent sent them (any wire's body, before conversion), by the names
    of the GenAI conventions' `gen_ai.request.*` attributes; only those the request set."""
    out: dict[str, Any] = {}
    for k in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        v = body.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            out["max_tokens"] = v
            break
    for k in ("temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty"):
        v = body.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
    seed = body.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        out["seed"] = seed
    stop = body.get("stop_sequences", body.get("stop"))
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(stop, list) and stop and all(isinstance(x, str) for x in stop):
        out["stop_sequences"] = stop
    n = body.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n != 1:  # (the conventions: only when not 1)
        out["choice_count"] = n
    if body.get("stream") is True:
        out["stream"] = True
    kind = _output_type(body)
    if kind is not None:
        out["output_type"] = kind
    return out


def server_of(url: Any) -> dict[str, Any] | None:
    """{"address", "port"} of the URL a call went to (the port the scheme's default when not given), or
    None when it cannot be read. For the OpenTelemetry export's server.address and server.port."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(str(url))
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or parts.scheme not in ("http", "https"):
        return None
    return {"address": host, "port": port if port is not None else (443 if parts.scheme == "https" else 80)}


Parsed = tuple[list[MessageRec], tuple[ToolSchemaRec, ...], tuple[tuple[str, int, str], ...] | None]


def parse_request(wire: str, body: dict[str, Any]) -> Parsed:
    """A request body's (messages, tools, cache breakpoints or None: see CallRec.cache_marks), as sent:
    a Responses request's own messages only (Tap._parse_request adds what previous_response_id names)."""
    if wire != "anthropic" and "messages" not in body and "input" in body:
        from engine.capture.proxy.responses_api import request_to_chat

        body = request_to_chat(body)
    ctx = Ctx(f"{wire} request", "<tap>")
    if wire == "anthropic":
        return _anthropic_request(body, ctx, "request")
    msgs, tools = _openai_request(body, ctx, "request")
    return msgs, tools, None
