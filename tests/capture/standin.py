"""A local stand-in for the Anthropic, OpenAI (Chat Completions, Responses) and DeepSeek APIs.

It speaks each API's wire format, non-streamed and streamed (the real SSE event sequences, with the
usage fields each provider sends: Anthropic cache reads/writes and the 5m/1h write breakdown, OpenAI's
`include_usage` final chunk with `cached_tokens`, DeepSeek's hit/miss tokens and `reasoning_content`).
Replies are deterministic (fixed ids, no timestamps) so a response fetched twice is byte-identical.

Behaviour by model name, for the bad-input tests:
    *-error429 / *-error500 / *-error529   that status with the API's error body (529: Anthropic's
                              overloaded), with `retry-after` when StandIn.retry_after is set
    *-malformed               a stream with a non-JSON event and no terminator
    *-slow                    the stream's events 0.2 s apart (for client disconnects)
    *-badusage-*              (Anthropic, streamed) message_start's usage has `"input_tokens": "many"`
    *-cut                     the stream stops mid-way and the connection is dropped
    *-reset                   the same, the connection reset (RST) as a crashed server or a middlebox does
    *-overloaded              the stream breaks off after 3 events with the API's own error event
                              (Anthropic: `event: error`, overloaded_error; OpenAI: a chunk with `error`;
                              Responses: its `error` event, `{"type": "error", "code", "message"}`)
    *-websearch               the non-streamed Anthropic reply used the web search server tool: its
                              server_tool_use and web_search_tool_result blocks, a cited text block
    *-functions               the chat reply calls `bash` through the legacy function-calling API
                              (`message.function_call`, finish_reason `function_call`; streamed, the call's
                              name, then its arguments in pieces, in `delta.function_call`)
    *-thinking                the Anthropic reply opens with a signed thinking block and a redacted_thinking
                              block (streamed: thinking_delta pieces, then the signature as a
                              signature_delta; the redacted block whole in its content_block_start)
    *-nodone                  (chat) the stream ends without `data: [DONE]`, as some compatible servers end it
    *-plainsse                the stream is served as `text/plain` (some OpenAI-compatible servers)
    *-gzipsse-* / *-zstdsse-* / *-brsse-*  the stream is compressed with that coding (each event flushed as
                              sent; brotli with the system's libbrotlienc: tests/capture/brotli_stream.py)
    *-unended                 the stream stops before its last event (compressed: and its coding's end), but
                              the response ends cleanly: a server whose compressor died, a middlebox
    *-zstd                    the non-streamed reply is zstd-compressed (Content-Encoding: zstd), as a
                              CDN sends it to a client whose Accept-Encoding lists zstd (httpx's does)
    *-incomplete              (Responses) the reply stopped at its output limit: `status: incomplete`,
                              `incomplete_details.reason: max_output_tokens`, its usage; streamed, the
                              final event is `response.incomplete` instead of `response.completed`
    StandIn.failures          the next requests answered with these statuses (429, 500, 529), whatever the model:
                              an SDK retrying a rate-limited call meets them in turn, then the reply
    background: true          (Responses) the reply is `queued`; GET /responses/{id} answers `in_progress`
                              (background_polls - 1 times), then the outcome; streamed, the events carry
                              the call's id and a GET with `?stream=true&starting_after=N` resumes after
                              event N (with *-cut, the first stream breaks off half-way);
                              POST /responses/{id}/cancel cancels it
    *-failed                  (Responses) the model failed mid-way: `status: failed` with its `error`
                              (server_error), no output, no usage; streamed, the final event is
                              `response.failed`
    n: N > 1                  (chat) N choices, choice i's text the scripted one with " Choice i." after it
                              (choice 0's unchanged); streamed, their chunks interleaved as OpenAI sends them
Per request, for concurrency tests: a request whose body holds `[standin tokens=N delay=S]` gets usage
of its own (N output tokens, 1000+N uncached input tokens; for OpenAI N completion tokens, 2000+N
prompt tokens) and is answered S seconds late (a stream pauses S seconds half-way), so concurrent
calls finish in an order of the test's choosing and each response is recognisable by its usage.
Scripted replies: `StandIn.script` is a list served in order (then the default): a string is the
assistant's text; `{"bash": CMD}` is a reply that calls the `bash` tool with `{"command": CMD}` (as
mini-swe-agent's tool-calling config expects), with a fresh call id each time; on `/responses` that
reply is a `message` item and a `function_call` item, streamed too (the call's arguments in
`response.function_call_arguments.delta` pieces, as OpenAI's documented event sequence has them).
Every request's headers and raw body are kept in `requests` (tests check keys arrive untouched).

Run it alone: `python -m tests.capture.standin --port 8765`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import struct
import threading
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import zstandard
from aiohttp import web

USAGE_ANTHROPIC = {
    "input_tokens": 21,
    "cache_creation_input_tokens": 1200,
    "cache_read_input_tokens": 3400,
    "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 200},
    "output_tokens": 17,
    "service_tier": "standard",
}
USAGE_OPENAI = {
    "prompt_tokens": 2048,
    "completion_tokens": 12,
    "total_tokens": 2060,
    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
}
USAGE_DEEPSEEK = {
    "prompt_tokens": 900,
    "completion_tokens": 30,
    "total_tokens": 930,
    "prompt_tokens_details": {"cached_tokens": 640},
    "prompt_cache_hit_tokens": 640,
    "prompt_cache_miss_tokens": 260,
    "completion_tokens_details": {"reasoning_tokens": 20},
}
USAGE_RESPONSES = {
    "input_tokens": 1500,
    # cache_write_tokens: the openai SDK's ResponseUsage requires it (0 when nothing was written)
    "input_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 0},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 1509,
}


# What the Messages API returns when the model used the web search server tool (the shapes of its docs)
WEB_SEARCH_BLOCKS: list[dict[str, Any]] = [
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "aiohttp zstd"}},
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://docs.aiohttp.org/",
                "title": "aiohttp docs",
                "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5",
                "page_age": None,
            }
        ],
    },
    {
        "type": "text",
        "text": "aiohttp reads zstd.",
        "citations": [
            {
                "type": "web_search_result_location",
                "url": "https://docs.aiohttp.org/",
                "title": "aiohttp docs",
                "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0",
                "cited_text": "zstd",
            }
        ],
    },
]

# The call a `*-functions` model makes (the legacy function-calling API)
LEGACY_CALL = {"name": "bash", "arguments": '{"cmd": "ls -la"}'}

_DIRECTIVE = re.compile(rb"\[standin tokens=(\d+)(?: delay=([0-9.]+))?\]")
# Set per request (aiohttp serves each request in its own task, so concurrent requests keep theirs).
_TOKENS: ContextVar[int | None] = ContextVar("standin_tokens", default=None)


THINKING = "The user wants the files; ls lists them."
SIGNATURE = "EqQBCkYIBxgCKkC0standin0signature0of0the0thinking0block=="
REDACTED = "EmwKAhgBEgy3va3pzix0standin0redacted0data0AAAA=="
THINKING_BLOCKS: list[dict[str, Any]] = [
    {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE},
    {"type": "redacted_thinking", "data": REDACTED},
]


def thinking_events() -> list[bytes]:
    """A streamed reply's thinking blocks (indexes 0 and 1) as the API streams them."""
    start = {"type": "thinking", "thinking": "", "signature": ""}
    out = [sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start})]
    for piece in (THINKING[:20], THINKING[20:]):
        delta = {"type": "thinking_delta", "thinking": piece}
        out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
    delta = {"type": "signature_delta", "signature": SIGNATURE}
    out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
    out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    red = THINKING_BLOCKS[1]
    out.append(sse("content_block_start", {"type": "content_block_start", "index": 1, "content_block": red}))
    out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 1}))
    return out


def usage_anthropic() -> dict[str, Any]:
    n = _TOKENS.get()
    return USAGE_ANTHROPIC if n is None else {**USAGE_ANTHROPIC, "input_tokens": 1000 + n, "output_tokens": n}


def usage_openai(deepseek: bool = False) -> dict[str, Any]:
    base = USAGE_DEEPSEEK if deepseek else USAGE_OPENAI
    n = _TOKENS.get()
    if n is None:
        return base
    return {**base, "prompt_tokens": 2000 + n, "completion_tokens": n, "total_tokens": 2000 + 2 * n}


def _compressed(events: list[bytes], coding: str) -> list[bytes]:
    """A stream's events compressed as one body, each flushed as it is sent (as a server that compresses
    its event stream does), then the coding's end; the pieces in the order they are written."""
    import zlib

    if coding == "br":
        from tests.capture.brotli_stream import compress_flushed

        return compress_flushed(events)
    if coding == "gzip":
        z = zlib.compressobj(wbits=31)
        out = [z.compress(ev) + z.flush(zlib.Z_SYNC_FLUSH) for ev in events]
        return out[:-1] + [out[-1] + z.flush()]
    c = zstandard.ZstdCompressor().compressobj()
    out = [c.compress(ev) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) for ev in events]
    return out[:-1] + [out[-1] + c.flush()]


def _choice(first: dict[str, Any], i: int) -> dict[str, Any]:
    """Choice i of a chat reply asked for several (`n`): the first one's, its text told apart."""
    msg = dict(first["message"])
    if i and isinstance(msg.get("content"), str):
        msg["content"] = f"{msg['content']} Choice {i}."
    return {**first, "index": i, "message": msg}


def sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


@dataclass
class StandIn:
    host: str = "127.0.0.1"
    port: int = 0
    script: list[str | dict[str, str]] = field(default_factory=list)
    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)  # every response body, as sent
    chunk_delay: float = 0.0
    fingerprint: str = "fp_standin"  # the serving build chat replies name (`system_fingerprint`)
    # Background Responses calls (`background: true`) by id: the outcome ("final"), retrieves so far
    # ("polls": the first background_polls - 1 of them answer `in_progress`), a streamed one's events
    background: dict[str, dict[str, Any]] = field(default_factory=dict)
    background_polls: int = 2
    retry_after: str = ""  # the error replies' Retry-After header (none when empty: SDKs that retry wait it)
    # Statuses (429, 500, 529) the next requests get, one each, before any reply is served: an SDK's retry
    # of a rate-limited call meets the next one (then the script's reply, when the list is spent)
    failures: list[int] = field(default_factory=list)

    # ------------------------------------------------------------------ replies

    scripted_calls: int = 0

    def _text(self) -> str | dict[str, str]:
        return self.script.pop(0) if self.script else "Hello from the stand-in."

    def _call(self, item: dict[str, str]) -> tuple[str, str, dict[str, str]]:
        self.scripted_calls += 1
        return f"call_{self.scripted_calls}", "I will run a command.", {"command": item["bash"]}

    def reply(self, path: str, model: str, item: str | dict[str, str]) -> dict[str, Any]:
        """A non-streamed reply body for a scripted item."""
        if isinstance(item, str):
            if path.endswith("/messages"):
                return self.anthropic_message(model, item)
            if path.endswith("/responses"):
                return self.response_obj(model, item)
            return self.chat_completion(model, item)
        cid, text, args = self._call(item)
        if path.endswith("/responses"):
            return self.response_obj(model, text, call=(cid, args))
        if path.endswith("/messages"):
            msg = self.anthropic_message(model, text)
            msg["content"][1] = {"type": "tool_use", "id": "toolu_" + cid, "name": "bash", "input": args}
            return msg
        body = self.chat_completion(model, text)
        body["choices"][0]["message"]["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps(args)}}
        ]
        body["choices"][0]["finish_reason"] = "tool_calls"
        return body

    def anthropic_message(self, model: str, text: str) -> dict[str, Any]:
        return {
            "id": "msg_standin_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls -la"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": usage_anthropic(),
        }

    def anthropic_stream(self, model: str, text: str) -> list[bytes]:
        start_usage = {**usage_anthropic(), "output_tokens": 1}
        if "-badusage" in model:  # a message_start whose usage the journal cannot read
            start_usage["input_tokens"] = "many"
        msg = {
            **self.anthropic_message(model, text),
            "content": [],
            "stop_reason": None,
            "usage": start_usage,
        }
        words = [w + " " for w in text.split(" ")]
        out = [sse("message_start", {"type": "message_start", "message": msg})]
        k = 0  # the index of the text block: 2 after the thinking blocks
        if model.endswith("-thinking"):
            out += thinking_events()
            k = 2
        out.append(
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": k, "content_block": {"type": "text", "text": ""}},
            )
        )
        out.append(sse("ping", {"type": "ping"}))
        for w in words:
            out.append(
                sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": k, "delta": {"type": "text_delta", "text": w}},
                )
            )
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": k}))
        out.append(
            sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": k + 1,
                    "content_block": {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}},
                },
            )
        )
        for part in ('{"cmd"', ': "ls', ' -la"}'):
            out.append(
                sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": k + 1,
                        "delta": {"type": "input_json_delta", "partial_json": part},
                    },
                )
            )
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": k + 1}))
        out.append(
            sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": usage_anthropic()["output_tokens"]},
                },
            )
        )
        out.append(sse("message_stop", {"type": "message_stop"}))
        return out

    def chat_completion(self, model: str, text: str) -> dict[str, Any]:
        deepseek = model.startswith("deepseek")
        msg: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if deepseek:
            msg = {"role": "assistant", "content": text, "reasoning_content": "Think first."}
        finish = "stop"
        if model.endswith("-functions"):
            msg = {"role": "assistant", "content": None, "function_call": dict(LEGACY_CALL)}
            finish = "function_call"
        return {
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "created": 1700000000,
            "model": model,
            "system_fingerprint": self.fingerprint,
            "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}],
            "usage": usage_openai(deepseek),
        }

    def chat_stream(self, model: str, text: str, include_usage: bool, choices: int = 1) -> list[bytes]:
        if choices > 1:  # each choice's own stream, their chunks taken in turn (one chunk, one choice)
            texts = [f"{text} Choice {i}." if i else text for i in range(choices)]
            streams = [self.chat_stream(model, t, False) for t in texts]
            out: list[bytes] = []
            for k in range(max(map(len, streams)) - 1):  # (each stream's last is its [DONE])
                for i, evs in enumerate(streams):
                    if k < len(evs) - 1:
                        out.append(evs[k].replace(b'"index": 0', f'"index": {i}'.encode(), 1))
            if include_usage:
                last = json.loads(streams[0][-2][len(b"data: ") :])  # (its final chunk: the base fields)
                usage = usage_openai(model.startswith("deepseek"))
                out.append(sse(None, {**last, "choices": [], "usage": usage}))
            return out + [b"data: [DONE]\n\n"]
        deepseek = model.startswith("deepseek")
        base = {
            "id": "chatcmpl-standin",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "system_fingerprint": self.fingerprint,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            c: dict[str, Any] = {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            if include_usage:
                c["usage"] = None
            return sse(None, c)

        if model.endswith("-functions"):
            args = LEGACY_CALL["arguments"]
            out = [chunk({"role": "assistant", "content": None, "function_call": {"name": "bash", "arguments": ""}})]
            out += [chunk({"function_call": {"arguments": args[i : i + 5]}}) for i in range(0, len(args), 5)]
            out.append(chunk({}, "function_call"))
            if include_usage:
                out.append(sse(None, {**base, "choices": [], "usage": usage_openai(deepseek)}))
            out.append(b"data: [DONE]\n\n")
            return out
        out = [chunk({"role": "assistant", "content": ""})]
        if deepseek:
            out.append(chunk({"reasoning_content": "Think first."}))
        for w in [w + " " for w in text.split(" ")][:-1] + [text.split(" ")[-1]]:
            out.append(chunk({"content": w}))
        out.append(chunk({}, "stop"))
        if include_usage:
            out.append(sse(None, {**base, "choices": [], "usage": usage_openai(deepseek)}))
        out.append(b"data: [DONE]\n\n")
        return out

    def response_obj(
        self, model: str, text: str, status: str | None = None, call: tuple[str, dict[str, str]] | None = None
    ) -> dict[str, Any]:
        """A Responses API `response` object; `status` defaults to what the model name asks for
        (`*-incomplete`: stopped at max_output_tokens), `call` adds a `function_call` item to `bash`."""
        if status is None:
            status = next((end for end in ("incomplete", "failed") if model.endswith("-" + end)), "completed")
        final = status in ("completed", "incomplete")
        output: list[dict[str, Any]] = []
        if final:
            output.append(
                {
                    "type": "message",
                    "id": "msg_r1",
                    "status": status,
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
            if call is not None:
                output.append(self._function_call(*call))
        return {
            "id": "resp_standin",
            "object": "response",
            "created_at": 1700000000,
            "status": status,
            "model": model,
            "error": {"code": "server_error", "message": "The model failed to generate a response."}
            if status == "failed"
            else None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": None,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": USAGE_RESPONSES if final else None,
        }

    @staticmethod
    def _function_call(cid: str, args: dict[str, str], arguments: str | None = None) -> dict[str, Any]:
        return {
            "type": "function_call",
            "id": "fc_" + cid,
            "call_id": cid,
            "name": "bash",
            "arguments": json.dumps(args) if arguments is None else arguments,
            "status": "completed",
        }

    def responses_stream(
        self, model: str, text: str, call: tuple[str, dict[str, str]] | None = None
    ) -> list[bytes]:
        final = self.response_obj(model, text, call=call)
        created = self.response_obj(model, text, "in_progress")
        item = {
            "type": "message",
            "id": "msg_r1",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        seq = 0

        def ev(kind: str, **fields: Any) -> bytes:
            nonlocal seq
            seq += 1
            return sse(kind, {"type": kind, "sequence_number": seq - 1, **fields})

        out = [ev("response.created", response=created)]
        out.append(ev("response.output_item.added", output_index=0, item=item))
        part = {"item_id": "msg_r1", "output_index": 0, "content_index": 0}
        out.append(ev("response.content_part.added", **part, part={"type": "output_text", "text": "", "annotations": []}))
        for w in text.split(" "):
            out.append(ev("response.output_text.delta", **part, delta=w + " ", logprobs=[]))
        if final["status"] == "failed":  # the model gave up before the item was done
            out.append(ev("response.failed", response=final))
            return out
        out.append(ev("response.output_item.done", output_index=0, item=final["output"][0]))
        if call is not None:
            fc = final["output"][1]
            out.append(
                ev(
                    "response.output_item.added",
                    output_index=1,
                    item={**self._function_call(call[0], call[1], ""), "status": "in_progress"},
                )
            )
            args = fc["arguments"]
            for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
                out.append(
                    ev("response.function_call_arguments.delta", item_id=fc["id"], output_index=1, delta=piece)
                )
            out.append(
                ev("response.function_call_arguments.done", item_id=fc["id"], output_index=1, arguments=args)
            )
            out.append(ev("response.output_item.done", output_index=1, item=fc))
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        out.append(ev(kind, response=final))
        return out

    # ------------------------------------------------------------------ HTTP

    def _background_reply(self, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        """A background call's first reply (`queued`); its outcome is kept for the retrieves to come."""
        rid = f"resp_bg_{len(self.background) + 1}"
        final = {**reply, "id": rid, "background": True}
        self.background[rid] = {"final": final, "polls": 0, "events": []}
        return {**final, "status": "queued", "output": [], "usage": None, "error": None, "incomplete_details": None}

    async def retrieve(self, request: web.Request, rid: str, cancel: bool) -> web.StreamResponse:
        """GET /responses/{id} (`?stream=true&starting_after=N` resumes a background stream after event
        N) and POST /responses/{id}/cancel, for the background calls this stand-in answered."""
        bg = self.background.get(rid)
        if bg is None:
            return web.json_response({"error": {"message": f"No response found with id '{rid}'.",
                                                "type": "invalid_request_error", "code": None}}, status=404)
        final = bg["final"]
        if final is None:  # a streamed call: its outcome is its final event's response (an error: failed)
            last = json.loads(bg["events"][-1].split(b"data: ", 1)[1])
            ended = last.get("response") or {
                "id": rid, "object": "response", "status": "failed", "output": [], "usage": None,
                "error": {"code": last.get("code"), "message": last.get("message")},
            }
            final = bg["final"] = {**ended, "background": True}
        if cancel:
            bg["final"] = {**final, "status": "cancelled", "output": [], "usage": None}
            return web.json_response(bg["final"])
        if request.query.get("stream") == "true":
            after = int(request.query.get("starting_after", "-1"))
            rest = [e for e in bg["events"] if json.loads(e.split(b"data: ", 1)[1])["sequence_number"] > after]
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            try:
                for ev in rest:
                    await resp.write(ev)
                await resp.write_eof()
            except (ConnectionError, RuntimeError):
                pass  # the agent stopped reading the resumed stream
            self.sent.append(b"".join(rest))
            return resp
        bg["polls"] += 1
        if bg["polls"] < self.background_polls and final["status"] != "cancelled":
            return web.json_response({**final, "status": "in_progress", "output": [], "usage": None})
        return web.json_response(final)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.requests.append((request.path, {k.lower(): v for k, v in request.headers.items()}, raw))
        segs = request.path.strip("/").split("/")
        if request.method == "GET" and len(segs) >= 2 and segs[-2] == "responses":
            return await self.retrieve(request, segs[-1], cancel=False)
        if request.method == "POST" and len(segs) >= 3 and segs[-3] == "responses" and segs[-1] == "cancel":
            return await self.retrieve(request, segs[-2], cancel=True)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.json_response({"error": {"message": f"not JSON ({len(raw)} bytes)"}}, status=400)
        model = str(body.get("model", "m"))
        path = request.path
        n = body.get("n")
        choices = n if isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1
        directive = _DIRECTIVE.search(raw)
        late = 0.0
        if directive is not None:
            _TOKENS.set(int(directive.group(1)))
            late = float(directive.group(2) or 0)
        anthropic = path.endswith("/messages")
        failing = self.failures.pop(0) if self.failures else None
        for code in (429, 500, 529):
            if model.endswith(f"-error{code}") or failing == code:
                err = (
                    {
                        "type": "error",
                        "error": {
                            "type": {429: "rate_limit_error", 529: "overloaded_error"}.get(code, "api_error"),
                            "message": f"stand-in says {code}",
                        },
                    }
                    if anthropic
                    else {"error": {"message": f"stand-in says {code}", "type": "x", "code": None}}
                )
                data = json.dumps(err).encode()
                self.sent.append(data)
                return web.Response(
                    status=code,
                    body=data,
                    content_type="application/json",
                    headers={"x-request-id": "req_err", **({"retry-after": self.retry_after} if self.retry_after else {})},
                )
        item = self._text()
        responses = path.endswith("/responses")
        if not body.get("stream") or (not isinstance(item, str) and not responses):
            if late:
                await asyncio.sleep(late)
            reply = self.reply(path, model, item)
            if anthropic and model.endswith("-thinking"):
                reply["content"] = THINKING_BLOCKS + reply["content"]
            if anthropic and model.endswith("-websearch"):
                reply["content"] = WEB_SEARCH_BLOCKS + reply["content"][:1]
                reply["stop_reason"] = "end_turn"
            if responses and body.get("background") is True:
                reply = self._background_reply(body, reply)
            if choices > 1 and "choices" in reply:
                reply["choices"] = [_choice(reply["choices"][0], i) for i in range(choices)]
            data = json.dumps(reply).encode()
            headers = {"x-request-id": "req_1"}
            if model.endswith("-zstd"):
                data = zstandard.ZstdCompressor(write_content_size=False).compress(data)
                headers["Content-Encoding"] = "zstd"
            self.sent.append(data)
            return web.Response(body=data, content_type="application/json", headers=headers)
        if responses:
            if isinstance(item, str):
                events = self.responses_stream(model, item)
            else:
                cid, text, args = self._call(item)
                events = self.responses_stream(model, text, (cid, args))
        elif anthropic:
            assert isinstance(item, str)
            events = self.anthropic_stream(model, item)
        else:
            assert isinstance(item, str)
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            events = self.chat_stream(model, item, include, choices)
        if responses and body.get("background") is True:
            rid = f"resp_bg_{len(self.background) + 1}"
            events = [e.replace(b'"resp_standin"', f'"{rid}"'.encode()) for e in events]
            self.background[rid] = {"final": None, "polls": 0, "events": events}
        if model.endswith("-overloaded") or "-overloaded-" in model:  # (with -cut: cut before the error)
            cut = (
                sse(
                    "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
                )
                if anthropic
                else sse(
                    "error",
                    {"type": "error", "code": "server_error", "message": "The server is overloaded",
                     "param": None, "sequence_number": 3},
                )
                if responses
                else sse(None, {"error": {"message": "The server is overloaded", "type": "server_error"}})
            )
            events = events[:3] + [cut]
        if "-nodone" in model:  # a server that ends its chat stream without `data: [DONE]`
            events = [e for e in events if e != b"data: [DONE]\n\n"]
        if model.endswith("-malformed"):
            events = events[:2] + [b"data: {this is not json\n\n", b"event: oops\ndata: [1, 2"]
        if responses and body.get("background") is True:
            self.background[rid]["events"] = events  # what a resumed stream goes on with, as changed above
        sse_headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        if "-plainsse" in model:  # a server that labels its event stream as something else
            sse_headers["Content-Type"] = "text/plain; charset=utf-8"
        for coding in ("gzip", "zstd", "br"):
            if f"-{coding}sse" in model:
                events = _compressed(events, coding)
                sse_headers["Content-Encoding"] = coding
        if model.endswith("-unended"):
            events = events[:-1]
        resp = web.StreamResponse(headers=sse_headers)
        await resp.prepare(request)
        sent = bytearray()
        delay = 0.2 if model.endswith("-slow") else self.chunk_delay
        for i, ev in enumerate(events):
            if model.endswith(("-cut", "-reset")) and i == len(events) // 2:
                self.sent.append(bytes(sent))
                assert request.transport is not None
                if model.endswith("-reset"):  # closed with SO_LINGER 0: the peer gets RST
                    # (after a moment: RST discards what the socket has not sent yet; the test is of
                    # what happens after the events that did go out)
                    await asyncio.sleep(0.05)
                    sock = request.transport.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                request.transport.abort()
                return resp
            if late and i == len(events) // 2:
                await asyncio.sleep(late)
            try:
                await resp.write(ev)
            except (ConnectionError, RuntimeError):
                break
            sent += ev
            if delay:
                await asyncio.sleep(delay)
        self.sent.append(bytes(sent))
        try:
            await resp.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the client went away mid-stream
        return resp

    # ------------------------------------------------------------------ running

    def start(self) -> StandIn:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            app = web.Application(client_max_size=256 * 1024 * 1024)
            app.router.add_route("*", "/{tail:.*}", self.handle)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, self.host, self.port)
            loop.run_until_complete(site.start())
            server: Any = site._server
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True, name="standin")
        self._thread.start()
        ready.wait(10)
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds between streamed events")
    args = ap.parse_args()
    s = StandIn(port=args.port, chunk_delay=args.delay).start()
    print(f"stand-in upstream on {s.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        s.stop()


if __name__ == "__main__":
    main()
