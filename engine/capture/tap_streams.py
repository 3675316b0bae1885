"""Streamed responses, seen by the tap: events accumulated into the message and its usage, and the
wrappers that hand every event to the agent unchanged while they accumulate.

The accumulators work on plain dicts (an SDK event object is dumped first), one per wire format:
- Anthropic Messages: `message_start` (the message and its input usage: cache reads, writes and the
  5m/1h split), content blocks built from their deltas (text, tool input JSON, thinking), `message_delta`
  (stop reason, output tokens; newer APIs repeat the input figures there), `message_stop`.
- OpenAI Chat Completions: `choices[0].delta` pieces (content, reasoning_content, tool calls by index)
  and, when the agent asked for it (`stream_options.include_usage`), the final chunk's `usage`.
- OpenAI Responses: the `response.completed` (or `.incomplete`/`.failed`) event carries the whole
  response; completed and incomplete (stopped at its output limit) are both the reply the agent got.
The tap never changes what the agent asked for: a chat stream without `include_usage` has no usage,
and is journaled without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine.capture.proxy.responses_api import why_failed
from engine.capture.proxy.sse import carried_error


def plain(obj: Any) -> Any:
    """An SDK object (pydantic) or container as plain JSON-able data, without consuming iterators."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if _is_sentinel(v):
                continue
            key = k.decode("utf-8", "replace") if isinstance(k, (bytes, bytearray)) else str(k)
            out[key] = plain(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj if not _is_sentinel(v)]
    if isinstance(obj, (bytes, bytearray)):
        return obj.decode("utf-8", "replace")
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        # exclude_none: SDK models carry every optional field as None (refusal, audio, citations...).
        # warnings off: a parse() result's `parsed` holds the agent's own model where the SDK's type says
        # None, and pydantic would warn about it in the agent's stderr on every call the tap reads.
        try:
            dumped = dump(mode="json", exclude_none=True, warnings=False)
        except (TypeError, ValueError):  # an SDK on pydantic v1 takes no `warnings`
            dumped = dump(mode="json", exclude_none=True)
        return plain(dumped)
    raise TypeError(f"{type(obj).__name__} is not JSON-like data")


def _is_sentinel(v: Any) -> bool:
    """The SDKs' NOT_GIVEN / Omit markers: arguments the agent did not pass."""
    return type(v).__name__ in ("NotGiven", "Omit")


class AnthropicAccumulator:
    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: list[dict[str, Any]] = []
        self.partial_json: dict[int, str] = {}
        self.complete = False
        self.events = 0

    def feed(self, ev: dict[str, Any]) -> None:
        self.events += 1
        t = ev.get("type")
        if t == "message_start":
            self.message = dict(ev.get("message") or {})
            self.message["content"] = self.blocks
        elif t == "content_block_start":
            i = int(ev.get("index", len(self.blocks)))
            while len(self.blocks) <= i:
                self.blocks.append({})
            self.blocks[i] = dict(ev.get("content_block") or {})
        elif t == "content_block_delta":
            i = int(ev.get("index", 0))
            if i >= len(self.blocks):
                return
            b, d = self.blocks[i], ev.get("delta") or {}
            dt = d.get("type")
            if dt == "text_delta":
                b["text"] = b.get("text", "") + d.get("text", "")
            elif dt == "input_json_delta":
                self.partial_json[i] = self.partial_json.get(i, "") + d.get("partial_json", "")
            elif dt == "thinking_delta":
                b["thinking"] = b.get("thinking", "") + d.get("thinking", "")
            elif dt == "signature_delta":
                b["signature"] = b.get("signature", "") + d.get("signature", "")
        elif t == "content_block_stop":
            i = int(ev.get("index", 0))
            if i in self.partial_json and i < len(self.blocks):
                raw = self.partial_json.pop(i)
                try:
                    self.blocks[i]["input"] = json.loads(raw) if raw else {}
                except json.JSONDecodeError:
                    self.blocks[i]["input"] = {"_unparsed": raw}
        elif t == "message_delta" and self.message is not None:
            d = ev.get("delta") or {}
            for k in ("stop_reason", "stop_sequence"):
                if d.get(k) is not None:
                    self.message[k] = d[k]
            u = ev.get("usage") or {}
            usage = dict(self.message.get("usage") or {})
            # message_delta's counts are cumulative: they replace message_start's where given
            usage.update({k: v for k, v in u.items() if v is not None})
            self.message["usage"] = usage
        elif t == "message_stop":
            self.complete = True

    def result(self) -> dict[str, Any] | None:
        return self.message


class ChatAccumulator:
    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.function_call: dict[str, str] | None = None  # the legacy API's one call, built from its pieces
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self.complete = False
        self.events = 0

    def feed(self, ev: dict[str, Any]) -> None:
        self.events += 1
        if not self.head:
            self.head = {k: ev.get(k) for k in ("id", "model", "created", "system_fingerprint") if k in ev}
        if ev.get("system_fingerprint"):  # the serving build, whichever chunk names it first (or last)
            self.head["system_fingerprint"] = ev["system_fingerprint"]
        if ev.get("usage"):
            self.usage = ev["usage"]
        for ch in ev.get("choices") or []:
            if ch.get("index", 0) != 0:
                continue
            d = ch.get("delta") or {}
            if isinstance(d.get("content"), str):
                self.content.append(d["content"])
            if isinstance(d.get("reasoning_content"), str):
                self.reasoning.append(d["reasoning_content"])
            for tc in d.get("tool_calls") or []:
                slot = self.calls.setdefault(
                    int(tc.get("index", 0)),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if tc.get("id"):
                    slot["id"] = tc["id"]
                fn = tc.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            fc = d.get("function_call")
            if isinstance(fc, dict):
                if self.function_call is None:
                    self.function_call = {"name": "", "arguments": ""}
                self.function_call["name"] += fc.get("name") or ""
                self.function_call["arguments"] += fc.get("arguments") or ""
            if ch.get("finish_reason"):
                self.finish = ch["finish_reason"]
                self.complete = True

    def result(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.calls:
            msg["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        if self.function_call is not None:
            msg["function_call"] = self.function_call
        if self.reasoning:
            msg["reasoning_content"] = "".join(self.reasoning)
        out: dict[str, Any] = {
            **self.head,
            "choices": [{"index": 0, "finish_reason": self.finish, "message": msg}],
        }
        if self.usage is not None:
            out["usage"] = self.usage
        return out


class ResponsesAccumulator:
    def __init__(self) -> None:
        self.response: dict[str, Any] | None = None
        self.complete = False
        self.events = 0
        # Why the stream ended without a reply when the API said so (`response.failed` or an `error`
        # event, which the SDK hands over as events, not exceptions): the journal says that, not that
        # the agent stopped reading.
        self.failure: str | None = None
        # The response's id, from whichever event carries the response first (`response.created`): a
        # background call's stream that breaks off is resumed by it (Tap.finish_stream defers on it).
        self.rid: str | None = None

    def feed(self, ev: dict[str, Any]) -> None:
        self.events += 1
        if self.rid is None:
            resp = ev.get("response")
            if isinstance(resp, dict) and isinstance(resp.get("id"), str):
                self.rid = resp["id"]
        if ev.get("type") == "response.failed":
            self.failure = why_failed(ev.get("response"))
        elif ev.get("type") == "error":  # the API's own error event ({type, code, message}), yielded too
            self.failure = carried_error(ev)
        if ev.get("type") in ("response.completed", "response.incomplete", "response.failed"):
            self.response = ev.get("response")
            # response.incomplete (max_output_tokens, content_filter) is a finished, billed reply too
            self.complete = ev.get("type") in ("response.completed", "response.incomplete")

    def result(self) -> dict[str, Any] | None:
        return self.response


Accumulator = AnthropicAccumulator | ChatAccumulator | ResponsesAccumulator
ACCUMULATORS: dict[str, Callable[[], Accumulator]] = {
    "anthropic": AnthropicAccumulator,
    "openai": ChatAccumulator,
    "openai-responses": ResponsesAccumulator,
}


def stream_ended(exc: BaseException) -> str:
    """Why a stream ended early: its error, or that the agent cancelled it (a cancellation says nothing)."""
    if isinstance(exc, Exception):
        return f"stream failed: {type(exc).__name__}: {exc}"
    return f"stream cancelled: the agent stopped reading it ({type(exc).__name__})"


class _Observer:
    """What both stream wrappers share: the SDK's stream they wrap (every attribute not theirs is its),
    feed each event (guarded), finish exactly once."""

    def __init__(
        self, inner: Any, acc: Accumulator, finish: Callable[[Accumulator, str | None], None]
    ) -> None:
        self._inner = inner
        self._it: Any = None
        self._acc = acc
        self._finish_cb = finish
        self._done = False
        self._broken = False

    def _see(self, ev: Any) -> None:
        if self._broken:
            return
        try:
            self._acc.feed(plain(ev))
        except Exception:  # a malformed event must not break the agent's stream; stop observing it
            self._broken = True

    def _finish(self, problem: str | None) -> None:
        if self._done:
            return
        self._done = True
        if self._broken and problem is None:
            problem = "stream events could not be read by the tap"
        self._finish_cb(self._acc, problem)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class TappedStream(_Observer):
    """Wraps an SDK `Stream`: iterating, `with`, `close()` and every other attribute behave as the
    SDK's own; the accumulated message is journaled when the stream ends (or is closed early)."""

    def __iter__(self) -> TappedStream:
        return self

    def __next__(self) -> Any:
        if self._it is None:
            self._it = iter(self._inner)
        try:
            ev = next(self._it)
        except StopIteration:
            self._finish(None)
            raise
        except BaseException as exc:  # an interrupt too: the stream ends here either way
            self._finish(stream_ended(exc))
            raise
        self._see(ev)
        return ev

    def __enter__(self) -> TappedStream:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._inner.__exit__(*exc)
        finally:
            self._finish(None)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._finish(None)


class AsyncTappedStream(_Observer):
    """The async counterpart of TappedStream (AsyncStream: `async for`, `async with`, `await close()`)."""

    def __aiter__(self) -> AsyncTappedStream:
        return self

    async def __anext__(self) -> Any:
        if self._it is None:
            self._it = self._inner.__aiter__()
        try:
            ev = await self._it.__anext__()
        except StopAsyncIteration:
            self._finish(None)
            raise
        except BaseException as exc:  # a cancelled task too: the stream ends here either way
            self._finish(stream_ended(exc))
            raise
        self._see(ev)
        return ev

    async def __aenter__(self) -> AsyncTappedStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._inner.__aexit__(*exc)
        finally:
            self._finish(None)

    async def close(self) -> None:
        try:
            await self._inner.close()
        finally:
            self._finish(None)
