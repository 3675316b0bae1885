"""A tap for agents that do not use the engine to assemble: wrap an `anthropic` or `openai` client.

    from engine.capture.tap import tap
    client = tap(anthropic.Anthropic(), record="run.cpsession", serve=True)   # nothing else changes

Every request the agent sends is journaled as the turn's *actual* assembly, and each response's usage
is fed back. A shadow engine ingests the same messages, so the inspector shows what ContextPipe would
have sent next to what was sent (the engine's plan is a what-if, the request is the truth).

What is wrapped (sync and async clients of both SDKs): `messages.create` and `messages.stream()`
(Anthropic), `chat.completions.create` (and the `.stream()` helper, which calls it) and
`responses.create` / `.stream()` (OpenAI); `with_raw_response` goes through the same wrappers.
Streams (`stream=True`) are handed to the agent event by event, unchanged, while the tap reassembles the
message and takes the usage from the final events.

The tap never breaks the agent: every tap step runs guarded; a failure is counted in `TapStats`
(`client.contextpipe_stats`, also `tap_errors`), journaled as a `diag` event (so `cp-inspect ps` and
the inspector's header show the count), and the agent's call goes through untouched.
"""

from __future__ import annotations

import atexit
import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.capture.tap_streams import (
    ACCUMULATORS,
    Accumulator,
    AsyncTappedStream,
    TappedStream,
    plain,
)
from engine.errors import ContextPipeError
from engine.feedback import cache_diagnostics, normalize_usage
from engine.importers._common import Ctx
from engine.importers.ingest import DEFAULT_WINDOW, ActualRecorder, IngestReport, _Feeder
from engine.importers.model import CallRec, MessageRec, ToolSchemaRec
from engine.importers.proxy_jsonl import (
    _anthropic_request,
    _anthropic_response,
    _openai_request,
    _openai_response,
)
from engine.pipeline import Pipeline

# The request fields the tap reads; everything else (extra_query, extra_headers, timeouts...) is the
# SDK's business and never touched, so nothing the agent passes there can trip the tap.
_REQUEST_KEYS = (
    "model",
    "messages",
    "system",
    "tools",
    "input",
    "instructions",
    "prompt_cache_key",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "stream",
)
# Both SDKs mark with_raw_response ("raw") and with_streaming_response ("stream") calls with this header.
RAW_RESPONSE_HEADER = "X-Stainless-Raw-Response"
DIAG_KIND = "tap_error"


class TapError(ContextPipeError):
    """Something the tap could not journal (never raised into the agent: counted and journaled)."""


@dataclass
class TapStats:
    """What the tap saw, public: `client.contextpipe_stats` (also `Tap.stats`)."""

    calls: int = 0  # requests the agent made through the tapped client
    journaled: int = 0  # of them, journaled as a turn's actual request
    errors: int = 0  # tap failures (each journaled as a `diag` event); the agent never saw them
    last_error: str | None = None
    streams_without_usage: int = 0  # streams that ended without usage (chat without include_usage)
    unobserved: int = 0  # responses the tap could not see (with_streaming_response, raw streams)
    notes: list[str] = field(default_factory=list)


def request_body(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The fields of a create() call the tap reads, as plain JSON-like data. SDK message objects in the
    history (`resp.choices[0].message`, Anthropic content blocks) are dumped with the SDK's own
    model_dump. A one-shot iterable is refused (reading it would empty it for the SDK)."""
    body: dict[str, Any] = {}
    for k in _REQUEST_KEYS:
        if k not in kwargs:
            continue
        v = kwargs[k]
        if type(v).__name__ in ("NotGiven", "Omit"):
            continue
        if k in ("messages", "tools", "input") and not isinstance(v, (list, tuple, str, dict)):
            raise TapError(f"{k} is a {type(v).__name__} (a one-shot iterable the tap must not read)")
        body[k] = plain(v)
    return body


class Tap:
    """The shadow session behind a tapped client (also the proxy's journaling path)."""

    def __init__(
        self,
        wire: str,
        *,
        record: str | Path | None = None,
        serve: bool | None = None,
        window: int = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.time,
        provider: str | None = None,
    ) -> None:
        self.wire = wire  # "anthropic" | "openai" (chat completions; Responses bodies are converted)
        # The engine policy of the shadow plan; by default the wire's (litellm passes the model's own).
        self.provider = provider or ("anthropic" if wire == "anthropic" else "openai")
        self.record, self.serve, self.window, self.clock = record, serve, window, clock
        self.pipe: Pipeline | None = None
        self.feeder: _Feeder | None = None
        self.fed: list[MessageRec] = []
        self.actual: ActualRecorder | None = None
        self.tools_seen: tuple[ToolSchemaRec, ...] = ()
        self.stats = TapStats()
        self.prompt_cache_key: str | None = None
        # Steps of concurrent calls (threads, asyncio tasks) must not interleave inside the journal.
        self.lock = threading.RLock()

    # Compatibility names (the proxy's recorder reads them)
    @property
    def tap_errors(self) -> int:
        return self.stats.errors

    @property
    def last_error(self) -> str | None:
        return self.stats.last_error

    @property
    def turns(self) -> int:
        return self.pipe.turn if self.pipe is not None else 0

    # ------------------------------------------------------------------ steps

    def _parse_request(self, body: dict[str, Any]) -> tuple[list[MessageRec], tuple[ToolSchemaRec, ...]]:
        if self.wire != "anthropic" and "messages" not in body and "input" in body:
            from engine.capture.proxy.responses_api import request_to_chat

            body = request_to_chat(body)
        ctx = Ctx(f"{self.wire} request", "<tap>")
        if self.wire == "anthropic":
            return _anthropic_request(body, ctx, "request")
        return _openai_request(body, ctx, "request")

    def _open(self, model: str) -> None:
        self.pipe = Pipeline(
            model, self.provider, self.window, record=self.record, serve=self.serve, clock=self.clock
        )
        self.feeder = _Feeder(self.pipe, IngestReport())
        self.actual = ActualRecorder(self.pipe)

    def before(self, body: dict[str, Any]) -> None:
        msgs, tools = self._parse_request(body)
        model = str(body.get("model", "unknown"))
        if self.pipe is None:
            self._open(model)
        assert self.pipe is not None and self.feeder is not None and self.actual is not None
        if tools != self.tools_seen:
            for t in tools:
                self.pipe.add_tool(t.name, t.description, t.parameters)
            self.tools_seen = tools
        # Feed only what is new since the last call; a rewritten history (the agent compacted) is fed whole.
        start = len(self.fed) if msgs[: len(self.fed)] == self.fed else 0
        for m in msgs[start:]:
            self.feeder.feed(m)
        self.fed = list(msgs)
        key = body.get("prompt_cache_key")
        self.prompt_cache_key = key if isinstance(key, str) else None
        call = CallRec(tuple(msgs), None, tools, None, self.clock(), model)
        # The turn this request becomes: the pipeline's own counter, so a call whose response never
        # came back (an abandoned stream) cannot file the next one under its number.
        self.actual.record(self.pipe.turn, call)
        self.pipe.next_request()
        if self.stats.errors:
            self.pipe.annotate("tap_errors", self.stats.errors)
        self.stats.journaled += 1

    def after(self, response: Any) -> None:
        assert self.pipe is not None and self.feeder is not None
        data = plain(response) if not isinstance(response, dict) else response
        if not isinstance(data, dict):
            raise TapError(f"response is {type(data).__name__}, not an object")
        raw_usage = data.get("usage")
        if self.wire != "anthropic" and "output" in data and "choices" not in data:
            from engine.capture.proxy.responses_api import response_to_chat

            data = response_to_chat(data)
        ctx = Ctx(f"{self.wire} response", "<tap>")
        if self.wire == "anthropic":
            msg, _, err = _anthropic_response({**data, "usage": None}, ctx, "response")
        else:
            msg, _, err = _openai_response({**data, "usage": None}, ctx, "response")
        if err is not None:
            self.pipe.record_error("error", err)
            return
        if raw_usage is not None:
            # The one normaliser (engine.feedback): cache reads, 5m/1h writes, Responses and DeepSeek fields
            u = normalize_usage(raw_usage).with_extra(
                prompt_cache_key=self.prompt_cache_key, **cache_diagnostics(data)
            )
            self.pipe.record_usage(u)
        else:
            self.stats.streams_without_usage += 1
        if msg is not None:
            self.feeder.feed(msg)
            self.fed.append(msg)

    def failed(self, exc: BaseException | str) -> None:
        assert self.pipe is not None
        text = str(exc)
        low = text.lower()
        kind = (
            "prompt_too_long"
            if "too long" in low or "context_length" in low
            else "incomplete_stream"
            if text.startswith("incomplete_stream")
            else "unobserved"  # a call that went through but whose response the tap could not see
            if text.startswith("unobserved")
            else "error"
        )
        self.pipe.record_error(kind, text)

    def guard(self, step: Callable[..., None], *args: Any) -> bool:
        """Run one tap step; a failure is counted and journaled, never raised. True if it worked."""
        try:
            with self.lock:
                step(*args)
            return True
        except Exception as exc:
            self.note_error(f"{getattr(step, '__name__', 'step')}: {type(exc).__name__}: {exc}")
            return False

    def note_error(self, text: str) -> None:
        try:
            self.stats.errors += 1
            self.stats.last_error = text[:500]
            if self.pipe is not None:
                with self.lock:
                    self.pipe.annotate("tap_errors", self.stats.errors)
                    self.pipe.journal.append(
                        {
                            "k": "diag",
                            "kind": DIAG_KIND,
                            "turn": max(0, self.pipe.turn - 1),
                            "message": text[:500],
                            "count": self.stats.errors,
                        }
                    )
        except Exception:  # the diagnostic itself must not fail the agent either
            pass

    def finish_stream(self, acc: Accumulator, problem: str | None) -> None:
        """A streamed call ended (or was abandoned): journal its message and usage, or why not."""
        if problem is None and not acc.complete:
            problem = f"incomplete_stream: the agent stopped reading after {acc.events} events"
        elif problem is not None and not problem.startswith("incomplete_stream"):
            problem = f"incomplete_stream: {problem}"
        result = acc.result()
        if problem is None and result is not None:
            self.guard(self.after, result)
        else:
            self.guard(self.failed, problem or "incomplete_stream: no message")

    def close(self) -> None:
        """Finish the recording (idempotent; also run at interpreter exit)."""
        try:
            with self.lock:
                if self.pipe is not None:
                    self.pipe.close()
        except Exception as exc:
            self.stats.errors += 1
            self.stats.last_error = f"close: {type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------------------------- wrapping


def _raw_mode(kwargs: dict[str, Any]) -> str | None:
    """'raw' (with_raw_response) or 'stream' (with_streaming_response), else None."""
    try:
        headers = kwargs.get("extra_headers")
        if isinstance(headers, dict):
            for k, v in headers.items():
                name = k.decode("latin-1") if isinstance(k, (bytes, bytearray)) else str(k)
                if name.lower() == RAW_RESPONSE_HEADER.lower():
                    return str(v)
    except Exception:
        return None
    return None


class _CallSite:
    """One wrapped SDK method: request journaled before the call, response (or error) after."""

    def __init__(self, t: Tap, is_async: bool, stream_wire: str) -> None:
        self.t, self.is_async, self.stream_wire = t, is_async, stream_wire

    def start(self, kwargs: dict[str, Any]) -> bool:
        t = self.t
        t.stats.calls += 1

        def before() -> None:
            t.before(request_body(kwargs))

        before.__name__ = "before"
        return t.guard(before)

    def observe(self, resp: Any, kwargs: dict[str, Any], journaled: bool) -> Any:
        """The agent's return value, wrapped if it is a stream; the response journaled otherwise."""
        t = self.t
        if not journaled:
            return resp
        try:
            mode = _raw_mode(kwargs)
            streaming = bool(kwargs.get("stream")) and type(kwargs.get("stream")).__name__ not in (
                "NotGiven",
                "Omit",
            )
            if mode == "stream":  # with_streaming_response: the body is the agent's to read, lazily
                t.stats.unobserved += 1
                t.guard(
                    t.failed, "unobserved: the agent reads this response itself (with_streaming_response)"
                )
                return resp
            if mode is not None:  # with_raw_response: parse() is cached, the agent gets the same object
                if streaming:
                    t.stats.unobserved += 1
                    t.guard(t.failed, "unobserved: the agent reads this raw stream itself")
                    return resp
                t.guard(t.after, resp.parse())
                return resp
            if streaming:
                acc = ACCUMULATORS[self.stream_wire]()
                cls = AsyncTappedStream if self.is_async else TappedStream
                return cls(resp, acc, lambda a, p: t.finish_stream(a, p))
            t.guard(t.after, resp)
        except Exception as exc:
            t.note_error(f"observe: {type(exc).__name__}: {exc}")
        return resp

    async def aobserve(self, resp: Any, kwargs: dict[str, Any], journaled: bool) -> Any:
        """observe() for async clients: an async raw response's parse() is a coroutine (cached too)."""
        if journaled and _raw_mode(kwargs) == "raw" and not kwargs.get("stream"):
            t = self.t
            try:
                parsed = resp.parse()  # openai's legacy raw response parses synchronously
                if inspect.isawaitable(parsed):  # anthropic's AsyncAPIResponse does not
                    parsed = await parsed
            except Exception as exc:
                t.note_error(f"observe: {type(exc).__name__}: {exc}")
                return resp
            t.guard(t.after, parsed)
            return resp
        return self.observe(resp, kwargs, journaled)

    def error(self, exc: BaseException, journaled: bool) -> None:
        if journaled:
            self.t.guard(self.t.failed, exc)


def _wrap_create(resource: Any, t: Tap, is_async: bool, stream_wire: str) -> None:
    original = resource.create
    site = _CallSite(t, is_async, stream_wire)
    if is_async:

        async def acreate(*args: Any, **kwargs: Any) -> Any:
            journaled = site.start(kwargs)
            try:
                resp = await original(*args, **kwargs)
            except Exception as exc:
                site.error(exc, journaled)
                raise
            return await site.aobserve(resp, kwargs, journaled)

        resource.create = acreate
    else:

        def create(*args: Any, **kwargs: Any) -> Any:
            journaled = site.start(kwargs)
            try:
                resp = original(*args, **kwargs)
            except Exception as exc:
                site.error(exc, journaled)
                raise
            return site.observe(resp, kwargs, journaled)

        resource.create = create
    # with_raw_response / with_streaming_response wrap `create` when first used (cached properties):
    # drop any cached copy so they are rebuilt around the tapped method.
    for name in ("with_raw_response", "with_streaming_response"):
        resource.__dict__.pop(name, None)


class _TappedStreamManager:
    """Anthropic's `messages.stream()` helper (it posts without calling create): the request is
    journaled when the stream is opened, the final message snapshot when the `with` block ends."""

    def __init__(self, inner: Any, t: Tap, journaled: bool) -> None:
        self._inner, self._t, self._journaled = inner, t, journaled
        self._stream: Any = None

    def _finish(self) -> None:
        if not self._journaled:
            return
        t = self._t
        snap = None
        try:
            snap = self._stream.current_message_snapshot if self._stream is not None else None
        except Exception:
            snap = None
        if snap is not None and getattr(snap, "stop_reason", None) is not None:
            t.guard(t.after, snap)
        else:
            t.guard(t.failed, "incomplete_stream: the stream was closed before its final message")

    def __enter__(self) -> Any:
        try:
            self._stream = self._inner.__enter__()
        except Exception as exc:
            if self._journaled:
                self._t.guard(self._t.failed, exc)
            raise
        return self._stream

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._inner.__exit__(*exc)
        finally:
            self._finish()

    async def __aenter__(self) -> Any:
        try:
            self._stream = await self._inner.__aenter__()
        except Exception as exc:
            if self._journaled:
                self._t.guard(self._t.failed, exc)
            raise
        return self._stream

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._inner.__aexit__(*exc)
        finally:
            self._finish()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _wrap_anthropic_stream(resource: Any, t: Tap, is_async: bool) -> None:
    original = getattr(resource, "stream", None)
    if original is None:
        return
    site = _CallSite(t, is_async, "anthropic")

    def stream(*args: Any, **kwargs: Any) -> Any:
        journaled = site.start(kwargs)
        return _TappedStreamManager(original(*args, **kwargs), t, journaled)

    resource.stream = stream


def _is_async(client: Any) -> bool:
    return any(c.__name__.startswith("Async") for c in type(client).__mro__)


def tap(
    client: Any, *, record: str | Path | None = None, serve: bool | None = None, window: int = DEFAULT_WINDOW
) -> Any:
    """Wrap an anthropic.Anthropic/AsyncAnthropic or openai.OpenAI/AsyncOpenAI client in place and return it.

    `client.contextpipe_stats` is the TapStats; `client.contextpipe_tap` the Tap (call `.close()` at exit
    to finish the recording; it is also finished at interpreter exit)."""
    module = type(client).__module__
    is_async = _is_async(client)
    if module.startswith("anthropic") and hasattr(client, "messages"):
        t = Tap("anthropic", record=record, serve=serve, window=window)
        _wrap_create(client.messages, t, is_async, "anthropic")
        _wrap_anthropic_stream(client.messages, t, is_async)
    elif hasattr(client, "chat") and hasattr(client.chat, "completions"):
        t = Tap("openai", record=record, serve=serve, window=window)
        _wrap_create(client.chat.completions, t, is_async, "openai")
        responses = getattr(client, "responses", None)
        if responses is not None and hasattr(responses, "create"):
            _wrap_create(responses, t, is_async, "openai-responses")
    else:
        raise TypeError(
            f"tap() expects an anthropic.Anthropic or openai.OpenAI client (sync or async), "
            f"got {type(client).__name__}"
        )
    atexit.register(t.close)
    client.contextpipe_tap = t
    client.contextpipe_stats = t.stats
    client._contextpipe_tap = t  # the name of earlier versions
    return client
