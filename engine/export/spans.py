"""One model call as an OpenTelemetry span: the GenAI semantic-convention attributes plus the engine's own
under `contextpipe.*`. Pure functions of a turn's journal events, with no OpenTelemetry import, so the
same figures come out live, from a recording, and in tests.

A session is one trace: its calls (`chat {model}` spans, kind CLIENT) are children of one `invoke_agent`
span (kind INTERNAL: the agent runs in this process), as the conventions' agent spans have it
(gen-ai-agent-spans.md, "Invoke agent internal span"). Its span id is derived from the trace id, so the
calls can name their parent before it ends, and a live export and a later export of the recording agree.
It is sent when the session closes (Pipeline.close(), or at exit): an agent killed before that sends
none, and a backend shows its calls under a parent it never got (an incomplete trace; exporting the
recording later completes it).

Names follow the GenAI semantic conventions (gen_ai.operation.name, gen_ai.provider.name,
gen_ai.request.model, gen_ai.usage.input_tokens / output_tokens / cache_read.input_tokens /
cache_creation.input_tokens, gen_ai.response.finish_reasons, gen_ai.conversation.id). `input_tokens`
is the whole prompt, cached parts included, as the conventions ask.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.hashing import canonical_json, sha256_hex
from engine.sim.pricing import PriceTable, usage_cost

NAMESPACE = "contextpipe"
CONTENT_CAP = 64 * 1024  # characters of gen_ai.input.messages JSON per span when content export is asked for

# gen_ai.provider.name values from the conventions' list; anything else passes through as named.
_PROVIDER_NAMES = {"anthropic": "anthropic", "openai": "openai", "bedrock": "aws.bedrock",
                   "deepseek": "deepseek", "prefix": "openai"}

AttrValue = str | bool | int | float | list[str] | list[int] | list[float]


@dataclass
class SpanData:
    """Everything an exporter needs for one span; times in nanoseconds since the epoch."""

    name: str
    trace_id: int
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue]
    events: list[tuple[str, int, dict[str, AttrValue]]] = field(default_factory=list)
    error: str | None = None
    span_id: int | None = None  # None: a random one
    parent_span_id: int | None = None
    kind: str = "client"  # or "internal" (the invoke_agent span)


def agent_span_id(trace_id: int) -> int:
    """The invoke_agent span's id within a session's trace (never 0, which OpenTelemetry calls invalid)."""
    return int(sha256_hex(f"{trace_id:032x}:invoke_agent")[:16], 16) or 1


def session_trace_id(session_event: Mapping[str, Any]) -> int:
    """A session's trace id: derived from its first journal event (config and start time), so a live
    export and a later export of the recording land in the same trace."""
    digest = sha256_hex(canonical_json({k: v for k, v in session_event.items() if k != "k"}))
    value = int(digest[:32], 16)
    return value or 1  # an all-zero trace id is invalid in OpenTelemetry


def turn_span(
    trace: Mapping[str, Any],
    trace_id: int,
    *,
    start_s: float | None,
    end_s: float | None = None,
    usage: Mapping[str, Any] | None = None,
    provider: str | None = None,
    content: list[dict[str, Any]] | MessagesFold | None = None,
    prices: PriceTable | None = None,
    request_params: Mapping[str, Any] | None = None,
) -> SpanData:
    """The span of one turn from its trace (and the usage event, which wins over the trace's copy).
    `request_params`: the request's settings when the trace has none (an engine-built request's
    max_tokens, from its session's config)."""
    model = str(trace.get("model") or "")
    prov = str(provider or trace.get("provider") or "")
    usage = usage if usage is not None else (trace.get("usage") or None)
    a: dict[str, AttrValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": _PROVIDER_NAMES.get(prov, prov),
        "gen_ai.request.model": model,
        "gen_ai.conversation.id": f"{trace_id:032x}",
    }
    ns = NAMESPACE
    a[f"{ns}.turn"] = int(trace.get("turn", 0))
    a[f"{ns}.tier"] = str(trace.get("tier", ""))
    pressure = trace.get("pressure") or {}
    for key in ("raw", "predictive", "raw_history"):
        if key in pressure:
            a[f"{ns}.pressure.{key}"] = float(pressure[key])
    for key, name in (("limit", "window"), ("estimated_tokens", "tokens.planned"), ("final_tokens", "tokens.sent"),
                      ("cacheable_prefix_tokens", "tokens.cacheable_prefix")):
        if trace.get(key) is not None:
            a[f"{ns}.{name}"] = int(trace[key])
    for s in trace.get("sections") or []:
        a[f"{ns}.section.{s['id']}.tokens"] = int(s.get("tokens", 0))
        if s.get("form") not in (None, "full"):
            a[f"{ns}.section.{s['id']}.form"] = str(s["form"])
    brk = trace.get("cache_break")
    a[f"{ns}.cache_break"] = bool(brk)
    if brk:
        a[f"{ns}.cache_break.section"] = str(brk.get("section", ""))
        a[f"{ns}.cache_break.cause"] = str(brk.get("cause", ""))
    skipped = trace.get("skipped") or []
    if skipped:
        a[f"{ns}.skipped"] = [str(s.get("step", "")) for s in skipped]
        a[f"{ns}.skipped.tokens_saved"] = sum(int(s.get("tokens_saved") or 0) for s in skipped)
    actions = trace.get("actions") or []
    if actions:
        a[f"{ns}.actions"] = [str(s.get("step", "")) for s in actions]
    compaction = trace.get("compaction")
    if isinstance(compaction, Mapping):
        for key, value in sorted(compaction.items()):
            if isinstance(value, bool | int | float | str):
                a[f"{ns}.compaction.{key}"] = value
    _request_attributes(a, trace, request_params)
    if usage:
        inp = int(usage.get("input_tokens") or 0)
        a["gen_ai.usage.input_tokens"] = inp
        a["gen_ai.usage.output_tokens"] = int(usage.get("output_tokens") or 0)
        a["gen_ai.usage.cache_read.input_tokens"] = int(usage.get("cache_read_tokens") or 0)
        a["gen_ai.usage.cache_creation.input_tokens"] = int(usage.get("cache_write_tokens") or 0)
        if usage.get("reasoning_tokens"):  # (part of output_tokens, as the conventions count it)
            a["gen_ai.usage.reasoning.output_tokens"] = int(usage["reasoning_tokens"])
        if usage.get("cache_write_1h_tokens"):
            a[f"{ns}.usage.cache_creation_1h.input_tokens"] = int(usage["cache_write_1h_tokens"])
        a[f"{ns}.cache_hit_rate"] = round(int(usage.get("cache_read_tokens") or 0) / inp, 4) if inp else 0.0
        reason = finish_reason(usage)
        if reason:
            a["gen_ai.response.finish_reasons"] = [reason]
        for key in ("cache_miss_reason", "prompt_cache_key"):
            if usage.get(key):
                a[f"{ns}.usage.{key}"] = str(usage[key])
        usd = usage_cost(model, usage, prices)
        if usd is not None:
            a[f"{ns}.cost.usd"] = round(usd, 8)
    meta = trace.get("response_meta")  # a reply without usage (a stream without it) still said why it stopped
    if isinstance(meta, Mapping) and "gen_ai.response.finish_reasons" not in a:
        if isinstance(meta.get("finish_reason"), str) and meta["finish_reason"]:
            a["gen_ai.response.finish_reasons"] = [meta["finish_reason"]]
    if content is not None:
        text, omitted = content.fit() if isinstance(content, MessagesFold) else fit_messages(content)
        a["gen_ai.input.messages"] = text
        if omitted:
            a[f"{ns}.input.messages_omitted"] = omitted
    start_ns = int((start_s or 0.0) * 1e9)
    end_ns = max(start_ns, int((end_s if end_s is not None else (start_s or 0.0)) * 1e9))
    events: list[tuple[str, int, dict[str, AttrValue]]] = [
        (f"{ns}.alert", end_ns, {"rule": str(al.get("rule", "")), "severity": str(al.get("severity", "")),
                                 "message": str(al.get("message", ""))})
        for al in trace.get("alerts") or []
    ]
    error = trace.get("error")
    if error:
        a["error.type"] = error_type(str(error))  # before any redaction: a status or kind is no secret
    return SpanData(f"chat {model}", trace_id, start_ns, end_ns, a, events, str(error) if error else None,
                    parent_span_id=agent_span_id(trace_id))


# A captured call's request settings (the trace's `request_params`, engine.capture.tap_request.request_params)
# by their GenAI attribute names, with the type each must have: a value of another type is left out.
_REQUEST_ATTRS: tuple[tuple[str, str, type | tuple[type, ...]], ...] = (
    ("max_tokens", "gen_ai.request.max_tokens", int),
    ("temperature", "gen_ai.request.temperature", (int, float)),
    ("top_p", "gen_ai.request.top_p", (int, float)),
    ("top_k", "gen_ai.request.top_k", (int, float)),
    ("frequency_penalty", "gen_ai.request.frequency_penalty", (int, float)),
    ("presence_penalty", "gen_ai.request.presence_penalty", (int, float)),
    ("seed", "gen_ai.request.seed", int),
    ("choice_count", "gen_ai.request.choice.count", int),
    ("stream", "gen_ai.request.stream", bool),
    ("output_type", "gen_ai.output.type", str),
)


def _request_attributes(a: dict[str, AttrValue], trace: Mapping[str, Any],
                        own: Mapping[str, Any] | None = None) -> None:
    """What a captured call's trace says of the request the agent sent (its settings, where it went) and
    of the reply (its id, the model that answered), as the conventions' attributes. The engine's own
    requests have none of these keys: `own` says their settings (max_tokens), from the session."""
    params = trace.get("request_params", own)
    if isinstance(params, Mapping):
        for key, name, kind in _REQUEST_ATTRS:
            value = params.get(key)
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                continue
            if isinstance(value, bool | str):
                a[name] = value
            elif isinstance(value, int | float) and kind == (int, float):
                a[name] = float(value)  # a double in the conventions, though the agent wrote 1
            elif isinstance(value, int):
                a[name] = value
        stops = params.get("stop_sequences")
        if isinstance(stops, list) and stops and all(isinstance(x, str) for x in stops):
            a["gen_ai.request.stop_sequences"] = list(stops)
    server = trace.get("server")
    if isinstance(server, Mapping) and isinstance(server.get("address"), str) and server["address"]:
        a["server.address"] = server["address"]
        port = server.get("port")
        if isinstance(port, int) and not isinstance(port, bool):
            a["server.port"] = port
    meta = trace.get("response_meta")
    if isinstance(meta, Mapping):
        for key, name in (("id", "gen_ai.response.id"), ("model", "gen_ai.response.model")):
            if isinstance(meta.get(key), str) and meta[key]:
                a[name] = meta[key]


# An upstream's refusal as the capture paths journal it (kind "error"): the proxy's "HTTP 429 ...", the
# SDKs' exceptions "Error code: 529 - ...", with a status prefix like "403 Forbidden" in others.
_STATUS = re.compile(r"^\s*(?:HTTP |Error code: )?([45]\d\d)\b")


def error_type(error: str) -> str:
    """`error.type` for a failed call's trace error ("{kind}: {message}"): the kind (incomplete_stream,
    prompt_too_long, overloaded...), or for a plain "error" the HTTP status the provider answered with,
    as the conventions ask (the provider's error code, else a low-cardinality identifier; HTTP's own
    conventions use the status code): every refusal was "error", rate limits and outages alike."""
    kind, _, message = error.partition(":")
    if kind.strip() == "error":
        m = _STATUS.match(message)
        if m is not None:
            return m.group(1)
    return kind.strip()


def finish_reason(usage: Mapping[str, Any] | None) -> str | None:
    """The reason the model stopped, as the provider said it (end_turn, tool_use, stop, tool_calls,
    length...), which the capture paths and importers keep in the usage event (engine.feedback)."""
    if not usage:
        return None
    reason = usage.get("finish_reason") or usage.get("stop_reason")
    return str(reason) if reason else None


def agent_span(
    trace_id: int,
    *,
    start_s: float | None,
    end_s: float | None,
    model: str,
    provider: str | None,
    calls: int,
    usage: Mapping[str, int],
    last_reason: str | None = None,
    error: str | None = None,
) -> SpanData:
    """The session's `invoke_agent` span: from its start to its last call's end, with the usage of all its
    calls summed (`usage`: input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)."""
    prov = str(provider or "")
    a: dict[str, AttrValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": _PROVIDER_NAMES.get(prov, prov),
        "gen_ai.conversation.id": f"{trace_id:032x}",
        f"{NAMESPACE}.calls": calls,
    }
    if model:
        a["gen_ai.request.model"] = model
    if usage:
        a["gen_ai.usage.input_tokens"] = int(usage.get("input_tokens", 0))
        a["gen_ai.usage.output_tokens"] = int(usage.get("output_tokens", 0))
        a["gen_ai.usage.cache_read.input_tokens"] = int(usage.get("cache_read_tokens", 0))
        a["gen_ai.usage.cache_creation.input_tokens"] = int(usage.get("cache_write_tokens", 0))
        if usage.get("reasoning_tokens"):
            a["gen_ai.usage.reasoning.output_tokens"] = int(usage["reasoning_tokens"])
    if last_reason:
        a["gen_ai.response.finish_reasons"] = [last_reason]
    start_ns = int((start_s or 0.0) * 1e9)
    end_ns = max(start_ns, int((end_s if end_s is not None else (start_s or 0.0)) * 1e9))
    return SpanData("invoke_agent", trace_id, start_ns, end_ns, a, [], error,
                    span_id=agent_span_id(trace_id), kind="internal")


def fit_messages(messages: list[dict[str, Any]], cap: int = CONTENT_CAP) -> tuple[str, int]:
    """The newest messages whose JSON fits in `cap` characters, as one valid JSON array, and how many
    older ones were left out. Cutting the serialized text at the cap left an unterminated string (a
    backend cannot parse it) and kept the oldest messages, so a long session's later calls never showed
    their own prompt. A newest message too long on its own keeps the head of each of its texts."""
    kept: list[str] = []
    size = 2  # the brackets
    for message in reversed(messages):
        piece = json.dumps(message, ensure_ascii=False)
        if size + len(piece) + (1 if kept else 0) > cap:
            if not kept:
                kept.append(_shrink(message, cap - size))
            break
        kept.append(piece)
        size += len(piece) + (1 if len(kept) > 1 else 0)
    return "[" + ",".join(reversed(kept)) + "]", len(messages) - len(kept)


def _shrink(message: dict[str, Any], room: int) -> str:
    """One message in at most `room` characters of JSON: its text fields cut to share what is left."""
    bare = {**message, "parts": [{k: ("" if k in ("content", "response") else v) for k, v in part.items()}
                                 for part in message.get("parts") or []]}
    spare = room - len(json.dumps(bare, ensure_ascii=False))
    texts = sum(1 for part in bare["parts"] for k in part if k in ("content", "response"))
    share = max(0, spare // max(1, texts) - 16)  # escapes (quotes, newlines) grow when serialized
    while True:
        cut = {**message, "parts": [{k: (str(v)[:share] if k in ("content", "response") else v) for k, v in part.items()}
                                    for part in message.get("parts") or []]}
        piece = json.dumps(cut, ensure_ascii=False)
        if len(piece) <= room or share == 0:
            return piece
        share = max(0, share - max(16, (len(piece) - room) // max(1, texts) + 1))


def messages_content(events: list[Mapping[str, Any]], blobs: Mapping[str, str]) -> list[dict[str, Any]]:
    """The session's inputs so far as GenAI `input.messages`-style messages: context sources as system
    parts, the user's text and tool results as user turns, the assistant's replies. Text only."""
    fold = MessagesFold(prune=False)
    for ev in events:
        fold.take(ev, blobs)
    return fold.current()


class MessagesFold:
    """messages_content built as the session's events come, for a span per turn. Rebuilt from every
    event at every turn, a long session's export was quadratic: 2,000 turns took 18 s to fold (3,000
    took 90), on the live sink's export thread too, which holds the GIL against the agent's. Messages
    older than a span could still carry are dropped (`prune`), only counted: a span carries the newest
    messages that fit CONTENT_CAP, and messages are only ever added after them, so the first message a
    span carried is never preceded by one a later span carries."""

    def __init__(self, prune: bool = True) -> None:
        self.prune = prune
        self.messages: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []  # user-side parts until the assistant answers
        self.dropped = 0  # messages pruned: older than any later span can carry

    def take(self, ev: Mapping[str, Any], blobs: Mapping[str, str]) -> None:
        """One journal event (a blob's text is journaled before the events that name it)."""

        def text(h: Any) -> str | None:
            return blobs.get(h) if isinstance(h, str) else None

        k = ev.get("k")
        if k in ("source", "content") and text(ev.get("h")) is not None:
            name = ev.get("id") or (ev.get("spec") or {}).get("id", "")
            self.messages.append(
                {"role": "system", "name": str(name), "parts": [{"type": "text", "content": text(ev["h"])}]}
            )
        elif k == "part":
            part = ev.get("part") or {}
            body = text(part.get("h"))
            if body is None:
                return
            if part.get("t") == "result":
                self.pending.append({"type": "tool_call_response", "id": str(part.get("id", "")), "response": body})
            else:
                self.pending.append({"type": "text", "content": body})
        elif k == "msg":
            if self.pending:
                self.messages.append({"role": "user", "parts": self.pending})
                self.pending = []
            parts = [{"type": "text", "content": body} for part in ev.get("parts") or []
                     if isinstance(part, Mapping) and (body := text(part.get("h"))) is not None]
            self.messages.append({"role": str(ev.get("role", "assistant")), "parts": parts})

    def current(self) -> list[dict[str, Any]]:
        """The messages so far (less those pruned), the user's pending parts as the last."""
        tail = [{"role": "user", "parts": list(self.pending)}] if self.pending else []
        return self.messages + tail

    def fit(self, cap: int = CONTENT_CAP) -> tuple[str, int]:
        """fit_messages of the messages so far: the JSON, and how many older messages were left out."""
        text, omitted = fit_messages(self.current(), cap)
        total = self.dropped + omitted  # (counted before the pruning below)
        if self.prune:
            # The messages before the first one kept are never kept again (see the class).
            gone = min(omitted, len(self.messages))
            if gone:
                del self.messages[:gone]
                self.dropped += gone
        return text, total
