"""Which API a request is for, where it goes, and which conversation (session) it belongs to.

Paths: the proxy accepts each SDK's own paths under its base URL, so pointing an SDK's base URL at the
proxy is all an agent needs:

    /v1/messages                     Anthropic Messages        -> the anthropic upstream
    /v1/chat/completions             OpenAI Chat Completions   -> the openai upstream
    /v1/responses                    OpenAI Responses          -> the openai upstream
    /<provider>/...                  the same, sent to that provider (e.g. /deepseek/chat/completions)
    /openai/deployments/...          Azure OpenAI's own paths, kept whole (and /openai/v1/... when the
                                     openai upstream is an Azure host): AzureOpenAI(azure_endpoint=proxy)

Anything else (model lists, token counting, files, any method but POST, OpenAI's own `.../messages`
resources under /threads and /chat/completions) is forwarded unrecorded: to the anthropic upstream
when the request carries Anthropic's headers, else to the openai one. Of those, model calls the proxy
does not record (OpenAI's legacy `/v1/completions`) are said once each as they pass (unrecorded_call).
Two Responses requests are followed though not model calls: `GET /v1/responses/{id}` (polling, or
resuming a stream with `starting_after`) and `POST /v1/responses/{id}/cancel`, for a call made in
background mode (`background: true`), whose first reply is only `queued` (Route.follows).

Sessions: a request names its session with the `X-ContextPipe-Session` header (stripped before
forwarding), or else the session is the hash of what stays fixed across an agent's conversation: the
API, the system prompt (instructions) and the first non-system message (the task). Two agents with
different tasks behind one proxy are two sessions; an agent's sub-agents (another system prompt) are
sessions of their own. That key names the opening, which several conversations may share (the same task
run again, attempts of it at once, a step asked again): the recorder tells them apart by the messages
each already holds (engine.capture.lineage). The tools are not part of it: they change within a conversation (an MCP server
that connects late, a tool loaded on demand), and that change, which breaks the agent's cache, is what
the recording must show inside the conversation, not split it at.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

SESSION_HEADER = "X-ContextPipe-Session"

# Public base URLs; `--upstream` overrides them.
DEFAULT_UPSTREAMS: dict[str, str] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "deepseek": "https://api.deepseek.com",
}

# The wire format of each recorded endpoint, by the path's ending.
_ENDPOINTS = (
    ("/messages", "anthropic"),
    ("/chat/completions", "openai-chat"),
    ("/responses", "openai-responses"),
)

# Headers that describe one hop, not the message (RFC 9110 7.6.1), and those the HTTP client recomputes.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        # The proxy has read the whole body (its server answered the agent's `Expect: 100-continue`);
        # passed on, it made the proxy wait for a 100 the upstream need not send, while the upstream
        # waited for the body (curl sends it with any body over 1 MB).
        "expect",
        SESSION_HEADER.lower(),
    }
)


@dataclass(frozen=True)
class Route:
    """Where the proxy sends a request and how it records it (the upstream, its wire format, its path)."""
    provider: str  # the upstream's name: anthropic, openai, deepseek, ...
    wire: str | None  # anthropic | openai-chat | openai-responses; None = forwarded, not recorded
    upstream_path: str  # the path (and query) to request from the upstream base URL
    # The Responses id a retrieve (GET /responses/{id}) or cancel (POST /responses/{id}/cancel) names:
    # the recorder follows a background call's outcome through them (recording.Recorder._follow).
    follows: str | None = None


def match(
    path: str, query: str, headers: dict[str, str], upstreams: dict[str, str], method: str = "POST"
) -> Route:
    """The route for a request path. `headers` lower-cased names."""
    rest = path
    provider = None
    first, _, tail = path.lstrip("/").partition("/")
    if first in upstreams and first not in ("v1",) and not _azure_path(first, tail, upstreams):
        provider, rest = first, "/" + tail
    wire = None
    for suffix, w in _ENDPOINTS:
        if rest.rstrip("/").endswith(suffix):
            wire = w
            break
    segments = rest.strip("/").split("/")
    if wire == "anthropic" and len(segments) >= 3 and segments[-3] in ("threads", "completions"):
        # OpenAI's own .../messages resources (/threads/{id}/messages, the stored completions'
        # /chat/completions/{id}/messages): OpenAI calls, not the Messages API. Taken for Anthropic they
        # would be sent to the anthropic upstream with the agent's OpenAI key.
        wire = None
    if provider is None:
        if wire == "anthropic" or (
            wire is None and ("anthropic-version" in headers or "x-api-key" in headers)
        ):
            provider = "anthropic"
        else:
            provider = "openai"
    if method.upper() != "POST":
        wire = None  # a model call is a POST; a GET on the same path lists or fetches stored objects
    follows = None
    if wire is None and provider != "anthropic" and len(segments) >= 2:
        if method.upper() == "GET" and segments[-2] == "responses":
            follows = segments[-1]
        elif method.upper() == "POST" and len(segments) >= 3 and segments[-3:-2] == ["responses"] and (
            segments[-1] == "cancel"
        ):
            follows = segments[-2]
    return Route(provider, wire, rest + (f"?{query}" if query else ""), follows or None)


# Azure OpenAI's hosts: its paths begin /openai/ (see _azure_path)
_AZURE_HOSTS = (".azure.com", ".azure.us", ".azure.cn")


def _azure_path(first: str, tail: str, upstreams: dict[str, str]) -> bool:
    """Whether a path's leading /openai is Azure OpenAI's own (/openai/deployments/{name}/chat/completions,
    /openai/v1/...), not the proxy's /<provider> prefix: stripped, Azure answered 404 to an AzureOpenAI
    client pointed at the proxy. OpenAI's own API has no /deployments; /openai/v1 is Azure's when the
    openai upstream is an Azure host, else the proxy's prefix before OpenAI's /v1."""
    if first != "openai":
        return False
    if tail.partition("/")[0] == "deployments":
        return True
    host = urlsplit(upstreams.get("openai", "")).hostname or ""
    return host.endswith(_AZURE_HOSTS)


def unrecorded_call(route: Route, method: str) -> str | None:
    """What a model call the proxy forwards but does not record is, or None. OpenAI's legacy Completions
    API (`/v1/completions`: a prompt string in, text out; base models, fill-in-the-middle) is such a call:
    its prompt is the whole conversation as one text with no messages to journal a turn from, and each
    call's prompt differs from the last, so it would be a session of its own every time."""
    if route.wire is not None or method.upper() != "POST":
        return None
    path = route.upstream_path.partition("?")[0].rstrip("/")
    if path.endswith("/completions") and not path.endswith("/chat/completions"):
        return "OpenAI's legacy Completions API"
    return None


def upstream_url(route: Route, upstreams: dict[str, str]) -> str:
    return upstreams[route.provider].rstrip("/") + route.upstream_path


def parse_upstreams(values: list[str]) -> dict[str, str]:
    """`--upstream` values: `URL` (every provider goes there, e.g. a local stand-in or a gateway) or
    `NAME=URL` for one provider. Raises ValueError with what to write instead."""
    out = dict(DEFAULT_UPSTREAMS)
    for v in values:
        name, eq, url = v.partition("=")
        if not eq:
            name, url = "", v
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--upstream {v!r}: expected URL or NAME=URL with an http(s) URL")
        if name:
            out[name.strip().lower()] = url
        else:
            for k in out:
                out[k] = url
    return out


# ------------------------------------------------------------------ sessions


def _text_of(content: Any) -> Any:
    """A message's or system prompt's text, whatever its shape: a string, or parts with `text` (cache
    markers and other per-call decorations dropped, since agents move them from call to call)."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return content


def _first_turn(wire: str, body: dict[str, Any]) -> tuple[Any, Any]:
    """(system, first non-system message) of a request body, normalized."""
    if wire == "openai-responses":
        from engine.capture.proxy.responses_api import request_to_chat

        body = request_to_chat(body)
    if wire == "anthropic":
        msgs = body.get("messages") or []
        m0: dict[str, Any] = msgs[0] if isinstance(msgs, list) and msgs and isinstance(msgs[0], dict) else {}
        return _text_of(body.get("system")), (m0.get("role"), _text_of(m0.get("content")))
    msgs = body.get("messages") or []
    system = []
    first: Any = None
    for m in msgs if isinstance(msgs, list) else []:
        if isinstance(m, dict) and m.get("role") in ("system", "developer"):
            system.append(_text_of(m.get("content")))
        elif isinstance(m, dict):
            first = (m.get("role"), _text_of(m.get("content")))
            break
    return system, first


OPENING_CHARS = 60  # the most of a conversation's first message `ps` and `top` show


def opening_text(wire: str, body: dict[str, Any]) -> str:
    """The start of a request's first non-system message, on one line ("" when it has no text): what
    tells one agent's conversations apart (a sub-agent's task, a new session's prompt)."""
    try:
        first = _first_turn(wire, body)[1]
    except (TypeError, AttributeError, ValueError, KeyError):
        return ""
    text = first[1] if isinstance(first, tuple) and len(first) > 1 else None
    if not isinstance(text, str):
        return ""
    words = " ".join(text.split())
    return words if len(words) <= OPENING_CHARS else words[: OPENING_CHARS - 1] + "…"


def session_key(wire: str, body: dict[str, Any], header: str | None) -> str:
    """A stable id for the conversation this request belongs to. See the module docstring."""
    if header:
        return "h:" + header.strip()[:200]
    system, first = _first_turn(wire, body)
    canon = json.dumps([wire, system, first], sort_keys=True, separators=(",", ":"), default=str)
    return "p:" + hashlib.sha256(canon.encode()).hexdigest()[:16]
