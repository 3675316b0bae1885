"""Server-sent events: a tolerant parser, and reassembly of each API's stream into its non-streamed shape.

The proxy passes the stream through untouched; this runs afterwards, off the forwarding path, on the
bytes it kept. What it rebuilds is what the API would have returned without `stream: true`: the
Anthropic message (content blocks, stop reason, usage with cache reads, writes and the 5m/1h write
breakdown), the OpenAI chat completion (with the `include_usage` final chunk's usage, cached tokens,
DeepSeek's hit/miss tokens and `reasoning_content`), the Responses API's final response object.

A stream that ends early (the upstream or the client went away, or the bytes are not SSE at all) is
reassembled from the events that were complete and reported with `complete=False` and a reason, so the
recording keeps what arrived and says that it is partial.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.capture.proxy.responses_api import why_failed


@dataclass
class SSEEvent:
    """One server-sent event: its event name and data."""
    event: str  # the `event:` field, "message" when absent (the SSE default)
    data: str


def parse_sse(raw: bytes) -> tuple[list[SSEEvent], bool]:
    """All events whose blank-line terminator arrived, and whether the bytes ended on an event boundary.

    Lines end in LF, CRLF or CR; `data:` lines of one event are joined with LF; comment lines (`:`)
    and unknown fields are ignored, as the SSE spec says.
    """
    text = raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    events: list[SSEEvent] = []
    data: list[str] = []
    name, have = "", False
    lines = text.split("\n")
    tail = lines.pop()  # text after the last newline: an unterminated line
    for line in lines:
        if line == "":
            if have:
                events.append(SSEEvent(name or "message", "\n".join(data)))
            name, data, have = "", [], False
            continue
        if line.startswith(":"):
            continue
        fname, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if fname == "event":
            name, have = value, True
        elif fname == "data":
            data.append(value)
            have = True
    return events, not have and tail == ""


@dataclass
class Reassembled:
    """A stream rebuilt into the API's non-streamed response body."""

    body: dict[str, Any] | None
    complete: bool
    reason: str = ""  # why not complete
    events: int = 0
    notes: list[str] = field(default_factory=list)

    def settle(self, cut: bool) -> Reassembled:
        """This stream judged with how its connection ended (`cut`: it broke off, or something else says
        the body did not end as sent). A chat stream whose every choice finished but that never sent
        `data: [DONE]` (NO_DONE: llama.cpp forks, older TGI never do; the SDKs end at the connection's
        end) is whole when nothing says it was cut; cut, it stays incomplete. The proxy's recorder and
        the proxy-log importer both judge by this, so a stream reads the same whichever recorded it."""
        if not self.complete and self.reason == NO_DONE and not cut:
            self.complete = True
        return self


# What a reassembler raises on an event of the right kind whose values have the wrong types ("choices": 1.5,
# a text block whose text is a number, a tool call's index that is a list).
_SHAPE_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError)


def _tolerant(reassemble: Callable[[bytes], Reassembled]) -> Callable[[bytes], Reassembled]:
    """A reassembler that says a stream it cannot rebuild is incomplete, and why, instead of raising: a
    chunk with `"choices": 1.5` raised TypeError out of the proxy's recorder, whose last-resort catch
    kept "TypeError: 'float' object is not iterable" and left the call's turn without its outcome
    (benchmarks/fuzz_proxy.py). The body is an empty map, not None: the stream was one (the proxy-log
    importer says None as "neither JSON nor an event stream"), it did not arrive as the API sends it."""

    @functools.wraps(reassemble)
    def run(raw: bytes) -> Reassembled:
        try:
            return reassemble(raw)
        except _SHAPE_ERRORS as exc:
            why = f"{type(exc).__name__}: {exc}"[:300]
            return Reassembled(
                {}, False, f"its events are not shaped as the API sends them ({why})", len(parse_sse(raw)[0])
            )

    return run


def _json(ev: SSEEvent, notes: list[str]) -> dict[str, Any] | None:
    try:
        obj = json.loads(ev.data)
    except json.JSONDecodeError:
        notes.append(f"event {ev.event!r} carries data that is not JSON: {ev.data[:60]!r}")
        return None
    if not isinstance(obj, dict):
        notes.append(f"event {ev.event!r} carries {type(obj).__name__}, not an object")
        return None
    return obj


def carried_error(error: dict[str, Any]) -> str:
    """Why a stream that carried an error event failed, in the API's words (overloaded, rate limited...),
    so the recording says which error it was: the agent saw it, raised by its SDK."""
    err = error.get("error", error)
    if isinstance(err, dict):
        kind = err.get("code") or (err.get("type") if err.get("type") != "error" else None)
        message = err.get("message")
        said = ": ".join(str(x) for x in (kind, message) if x)
    else:
        said = str(err)
    return f"the stream carried an error ({said[:500]})" if said else "the stream carried an error"


# ------------------------------------------------------------------ Anthropic Messages

# How far past the blocks so far a content_block_start may name its block (an API sends the next index).
MAX_INDEX_GAP = 256



@_tolerant
def reassemble_anthropic(raw: bytes) -> Reassembled:
    events, _ = parse_sse(raw)
    notes: list[str] = []
    msg: dict[str, Any] | None = None
    partial_json: dict[int, list[str]] = {}
    stopped = False
    error: dict[str, Any] | None = None
    for ev in events:
        obj = _json(ev, notes)
        if obj is None:
            continue
        kind = obj.get("type", ev.event)
        if kind == "message_start" and isinstance(obj.get("message"), dict):
            msg = copy.deepcopy(obj["message"])
            msg.setdefault("content", [])
            msg["content"] = list(msg["content"] or [])
        elif msg is None:
            if kind == "error":
                error = obj
            elif kind != "ping":
                notes.append(f"{kind!r} before message_start")
        elif kind == "content_block_start":
            i, block = obj.get("index"), obj.get("content_block")
            content = msg["content"]
            if isinstance(i, int) and not 0 <= i < len(content) + MAX_INDEX_GAP:
                # Blocks start in order (index = the blocks so far). An index of 2**63 - 1 padded the
                # list with Nones until memory ran out: one 150-byte event hung the proxy's recorder.
                notes.append(f"content_block_start for block {i}, with {len(content)} blocks so far: skipped")
            elif isinstance(i, int) and isinstance(block, dict):
                while len(content) <= i:
                    content.append(None)
                content[i] = copy.deepcopy(block)
        elif kind == "content_block_delta":
            i, delta = obj.get("index"), obj.get("delta")
            content = msg["content"]
            if not (isinstance(i, int) and 0 <= i < len(content) and isinstance(delta, dict)):
                notes.append(f"content_block_delta for unknown block {i!r}")
                continue
            block = content[i]
            if not isinstance(block, dict):
                continue
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif dtype == "input_json_delta":
                partial_json.setdefault(i, []).append(str(delta.get("partial_json", "")))
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop":
            i = obj.get("index")
            if isinstance(i, int) and i in partial_json:
                _finish_tool_input(msg["content"], i, partial_json.pop(i), notes)
        elif kind == "message_delta":
            delta = obj.get("delta") or {}
            if isinstance(delta, dict):
                for key in ("stop_reason", "stop_sequence", "container"):
                    if key in delta:
                        msg[key] = delta[key]
            usage = obj.get("usage")
            if isinstance(usage, dict):
                # message_delta's usage is cumulative: output_tokens always, the input-side figures when the
                # API restates them (server tools may change them mid-stream). Present keys win.
                mu = msg.setdefault("usage", {})
                for key, value in usage.items():
                    if value is not None:
                        mu[key] = copy.deepcopy(value)
        elif kind == "message_stop":
            stopped = True
        elif kind == "error":
            error = obj
    for i, parts in partial_json.items():  # blocks whose stop never came: keep what parsed
        _finish_tool_input(msg["content"] if msg else [], i, parts, notes)
    if msg is not None:
        msg["content"] = [b for b in msg["content"] if b is not None]
    if error is not None:
        return Reassembled(
            msg if msg is not None else error, False, carried_error(error), len(events), notes
        )
    if msg is None:
        return Reassembled(
            None, False, "no message_start event (not an Anthropic stream?)", len(events), notes
        )
    if not stopped:
        return Reassembled(msg, False, "the stream ended before message_stop", len(events), notes)
    return Reassembled(msg, True, "", len(events), notes)


def _finish_tool_input(content: list[Any], i: int, parts: list[str], notes: list[str]) -> None:
    if not (0 <= i < len(content)) or not isinstance(content[i], dict):
        return
    text = "".join(parts)
    try:
        content[i]["input"] = json.loads(text) if text else {}
    except json.JSONDecodeError:
        notes.append(f"tool_use block {i}: input JSON incomplete ({len(text)} chars)")
        content[i]["input"] = {}


# ------------------------------------------------------------------ OpenAI Chat Completions (and DeepSeek)


@_tolerant
def reassemble_openai_chat(raw: bytes) -> Reassembled:
    events, on_boundary = parse_sse(raw)
    notes: list[str] = []
    out: dict[str, Any] | None = None
    choices: dict[int, dict[str, Any]] = {}
    done = False
    error: dict[str, Any] | None = None
    for ev in events:
        if ev.data.strip() == "[DONE]":
            done = True
            continue
        obj = _json(ev, notes)
        if obj is None:
            continue
        if "error" in obj and "choices" not in obj:
            error = obj
            continue
        if out is None:
            out = {k: v for k, v in obj.items() if k not in ("choices", "usage")}
            out["object"] = "chat.completion"
        for key in ("model", "system_fingerprint", "service_tier"):
            if obj.get(key) is not None:
                out[key] = obj[key]
        if isinstance(obj.get("usage"), dict):
            out["usage"] = copy.deepcopy(obj["usage"])  # the include_usage chunk (choices: [])
        for ch in obj.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            idx = ch.get("index", 0)
            idx = idx if isinstance(idx, int) else 0
            c = choices.setdefault(
                idx, {"index": idx, "message": {"role": "assistant"}, "finish_reason": None}
            )
            if ch.get("finish_reason") is not None:
                c["finish_reason"] = ch["finish_reason"]
            if ch.get("logprobs") is not None:
                c["logprobs"] = ch["logprobs"]
            delta = ch.get("delta")
            if isinstance(delta, dict):
                _merge_chat_delta(c["message"], delta)
    if out is None:
        if error is not None:
            return Reassembled(error, False, carried_error(error), len(events), notes)
        return Reassembled(
            None, False, "no chat.completion.chunk events (not an OpenAI stream?)", len(events), notes
        )
    msgs = [choices[i] for i in sorted(choices)]
    for c in msgs:
        m = c["message"]
        m.setdefault("content", None)
        if "tool_calls" in m:
            m["tool_calls"] = [m["tool_calls"][k] for k in sorted(m["tool_calls"])]
    out["choices"] = msgs
    out.setdefault("usage", None)
    if error is not None:
        return Reassembled(out, False, carried_error(error), len(events), notes)
    if not done:
        if on_boundary and msgs and all(c["finish_reason"] is not None for c in msgs):
            # Every choice finished but no [DONE] came: some OpenAI-compatible servers never send it (the
            # SDKs end at the connection's end). Whether it is whole is the connection's to say
            # (Reassembled.settle). Bytes that end mid-event were cut whatever the connection did: the
            # SDK drops an unterminated event, and that one may be the usage chunk.
            return Reassembled(out, False, NO_DONE, len(events), notes)
        return Reassembled(out, False, "the stream ended before [DONE]", len(events), notes)
    return Reassembled(out, True, "", len(events), notes)


NO_DONE = "every choice finished but the stream ended without [DONE]"


def _merge_chat_delta(m: dict[str, Any], delta: dict[str, Any]) -> None:
    for key, value in delta.items():
        if value is None:
            continue
        if key == "role":
            m["role"] = value
        elif key in ("content", "reasoning_content", "refusal") and isinstance(value, str):
            m[key] = (m.get(key) or "") + value
        elif key == "tool_calls" and isinstance(value, list):
            calls: dict[int, dict[str, Any]] = m.setdefault("tool_calls", {})
            for tc in value:
                if not isinstance(tc, dict):
                    continue
                k = tc.get("index", len(calls))
                slot = calls.setdefault(
                    k, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                if tc.get("id"):
                    slot["id"] = tc["id"]
                if tc.get("type"):
                    slot["type"] = tc["type"]
                fn = tc.get("function") or {}
                if isinstance(fn, dict):
                    if fn.get("name"):
                        slot["function"]["name"] += fn["name"]
                    if fn.get("arguments"):
                        slot["function"]["arguments"] += fn["arguments"]
        elif key == "function_call" and isinstance(value, dict):
            # The legacy function-calling API streams its one call in pieces, as tool_calls do
            fc = m.setdefault("function_call", {"name": "", "arguments": ""})
            fc["name"] += value.get("name") or ""
            fc["arguments"] += value.get("arguments") or ""
        else:
            m[key] = value


# ------------------------------------------------------------------ OpenAI Responses


_FINAL = ("response.completed", "response.incomplete", "response.failed")
_ENDED = ("response.completed", "response.incomplete")  # the reply the agent gets: not an error


@_tolerant
def reassemble_responses(raw: bytes) -> Reassembled:
    """The Responses API's stream ends with `response.completed` carrying the whole response; a cut
    stream is rebuilt from `response.created` and the `response.output_item.done` items seen."""
    events, _ = parse_sse(raw)
    notes: list[str] = []
    base: dict[str, Any] | None = None
    items: dict[int, Any] = {}
    for ev in events:
        obj = _json(ev, notes)
        if obj is None:
            continue
        kind = obj.get("type", ev.event)
        if kind in _FINAL and isinstance(obj.get("response"), dict):
            # An incomplete response (it reached max_output_tokens, a content filter stopped it) is a
            # finished, billed reply, as Chat's finish_reason "length" is; its reason is in the body.
            complete = kind in _ENDED
            reason = "" if complete else f"the response ended as {kind}"
            if kind == "response.failed":  # the model's own failure, in the API's words
                reason = why_failed(obj["response"])
            return Reassembled(copy.deepcopy(obj["response"]), complete, reason, len(events), notes)
        if kind in ("response.created", "response.in_progress") and isinstance(obj.get("response"), dict):
            base = copy.deepcopy(obj["response"])
        elif kind == "response.output_item.done" and isinstance(obj.get("item"), dict):
            idx = obj.get("output_index", len(items))
            items[idx if isinstance(idx, int) else len(items)] = copy.deepcopy(obj["item"])
        elif kind == "error":
            return Reassembled(base or obj, False, carried_error(obj), len(events), notes)
    if base is None:
        return Reassembled(
            None, False, "no response.created event (not a Responses stream?)", len(events), notes
        )
    base["output"] = [items[i] for i in sorted(items)]
    return Reassembled(base, False, "the stream ended before response.completed", len(events), notes)


REASSEMBLERS = {
    "anthropic": reassemble_anthropic,
    "openai-chat": reassemble_openai_chat,
    "openai-responses": reassemble_responses,
}
