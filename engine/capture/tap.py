"""A tap for agents that do not use the engine to assemble: wrap an `anthropic` or `openai` client.

    from engine.capture.tap import tap
    client = tap(anthropic.Anthropic(), record="run.cpsession", serve=True)   # nothing else changes

Every request the agent sends is journaled as the turn's *actual* assembly, and each response's usage
is fed back. A shadow engine ingests the same messages, so the inspector shows what ContextPipe would
have sent next to what was sent (the engine's plan is a what-if, the request is the truth).

What is wrapped (sync and async clients of both SDKs): `messages.create`, `.parse` and `.stream()`
(Anthropic), the same three on `beta.messages` (what agents using betas call: context editing,
compaction, the beta tool runner), `chat.completions.create` (and the `.stream()` helper, which calls it),
`.parse` (structured outputs; it posts without calling create), the same on `beta.chat.completions`, and
`responses.create` / `.parse` / `.stream()` (OpenAI); `with_raw_response` goes through the same wrappers.
Streams (`stream=True`) are handed to the agent event by event, unchanged, while the tap reassembles the
message and takes the usage from the final events.

Concurrent calls (threads, `asyncio.gather`) each carry their own `TapCall`: a call's request and its
response are journaled as one turn, in the order the calls started, whatever order they finish in.
While one call's turn is open in the journal, calls started by *other* threads or tasks wait (held in
memory, the agent is not delayed); a caller that starts a new call while its own earlier one is
unfinished has abandoned (or interleaves) that stream, so the earlier turn is closed and its outcome,
if it ever comes, is journaled under its own turn number as a late `usage`/`error` event.

Conversations that share an opening (the same task run again with the same client, attempts of it at
once, a step asked again) are recorded apart, as the proxy files them (engine.capture.lineage): the
first in `record`, the next in RUN-s2.cpsession and so on, each new one's first turn noted
(`conversation_branch`) and named in `TapStats.notes`; `tap(..., split=False)` keeps every call in one.

The tap never breaks the agent: every tap step runs guarded; a failure is counted in `TapStats`
(`client.contextpipe_stats`, also `tap_errors`), journaled as a `diag` event (so `cp-inspect ps` and
the inspector's header show the count), and the agent's call goes through untouched.

Here: what the tap reads of an SDK call's arguments (`request_body`) and the wrapping of the SDKs'
methods; the shadow session the calls go to is `tap_session.Tap`, what it makes of a request
`tap_request`.
"""

from __future__ import annotations

import atexit
import inspect
from pathlib import Path
from typing import Any

from engine.capture import tap_retries
from engine.capture.tap_call import cut_short
from engine.capture.tap_request import server_of
from engine.capture.tap_session import Tap, TapCall, TapError, TapStats, gave_up
from engine.capture.tap_streams import (
    ACCUMULATORS,
    AsyncTappedStream,
    TappedStream,
    plain,
    stream_ended,
)
from engine.importers.ingest import DEFAULT_WINDOW

# The tap's public names (the session's classes are tap_session's; imported from here as before).
__all__ = ["PARAM_KEYS", "Tap", "TapCall", "TapError", "TapStats", "request_body", "server_of", "tap"]

# The request fields the tap reads; everything else (extra_query, extra_headers, timeouts...) is the
# SDK's business and never touched, so nothing the agent passes there can trip the tap.
_REQUEST_KEYS = (
    "model",
    "messages",
    "system",
    "tools",
    "functions",  # the legacy function-calling API's tools
    "input",
    "instructions",
    "prompt_cache_key",
    "previous_response_id",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "stream",
)
# The request's settings the OpenTelemetry export names (gen_ai.request.*, gen_ai.output.type), in every
# wire's own spelling; read best-effort (a value the tap cannot read is left out, never an error).
PARAM_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "stop",  # OpenAI chat: a string or a list
    "stop_sequences",  # Anthropic
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "n",
    "response_format",  # OpenAI chat: {"type": "json_schema" | "json_object" | "text"} (parse(): a class)
    "text",  # Responses: {"format": {"type": ...}}
    "text_format",  # Responses parse(): the agent's model class
    "output_format",  # Anthropic structured outputs (beta): {"type": "json_schema", ...}
    "output_config",  # Anthropic structured outputs: {"format": {"type": "json_schema", ...}}
)
# Both SDKs mark with_raw_response ("raw") and with_streaming_response ("stream") calls with this header.
RAW_RESPONSE_HEADER = "X-Stainless-Raw-Response"


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
        if k in ("messages", "tools", "functions", "input") and not isinstance(v, (list, tuple, str, dict)):
            raise TapError(f"{k} is a {type(v).__name__} (a one-shot iterable the tap must not read)")
        body[k] = plain(v)
    for k in PARAM_KEYS:
        v = kwargs.get(k)
        if v is None or _is_unset(v):
            continue
        if isinstance(v, type):  # parse(response_format=Model) / text_format=Model: structured output
            body[k] = {"type": "json_schema"}
            continue
        try:
            body[k] = plain(v)
        except (TypeError, ValueError):  # a setting the tap cannot read costs its attribute, not the call
            continue
    return body


def _is_unset(v: Any) -> bool:
    return type(v).__name__ in ("NotGiven", "Omit")


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
    """One wrapped SDK method: each call gets its TapCall when it starts; its response (or error) is
    that call's outcome, so concurrent calls cannot trade responses."""

    def __init__(self, t: Tap, is_async: bool, stream_wire: str) -> None:
        self.t, self.is_async, self.stream_wire = t, is_async, stream_wire

    def start(self, kwargs: dict[str, Any]) -> TapCall | None:
        self.t.stats.calls += 1
        return self.t.begin(lambda: request_body(kwargs))

    def observe(self, resp: Any, kwargs: dict[str, Any], call: TapCall | None) -> Any:
        """The agent's return value, wrapped if it is a stream; the response journaled otherwise."""
        t = self.t
        if call is None:
            return resp
        try:
            mode = _raw_mode(kwargs)
            streaming = bool(kwargs.get("stream")) and type(kwargs.get("stream")).__name__ not in (
                "NotGiven",
                "Omit",
            )
            if mode == "stream":  # with_streaming_response: the body is the agent's to read, lazily
                t.stats.unobserved += 1
                t.end(
                    call, problem="unobserved: the agent reads this response itself (with_streaming_response)"
                )
                return resp
            if mode is not None:  # with_raw_response: parse() is cached, the agent gets the same object
                if streaming:
                    t.stats.unobserved += 1
                    t.end(call, problem="unobserved: the agent reads this raw stream itself")
                    return resp
                t.end(call, resp.parse())
                return resp
            if not streaming and t.defer(call, resp, kwargs):
                return resp
            if streaming:
                acc = ACCUMULATORS[self.stream_wire]()
                cls = AsyncTappedStream if self.is_async else TappedStream
                bg = kwargs.get("background") is True
                return cls(resp, acc, lambda a, p: t.finish_stream(call, a, p, bg))
            t.end(call, resp)
        except Exception as exc:
            t.note_error(f"observe: {type(exc).__name__}: {exc}")
            t.end(call, problem=f"unobserved: the tap could not read the response ({type(exc).__name__})")
        return resp

    async def aobserve(self, resp: Any, kwargs: dict[str, Any], call: TapCall | None) -> Any:
        """observe() for async clients: an async raw response's parse() is a coroutine (cached too)."""
        if call is not None and _raw_mode(kwargs) == "raw" and not kwargs.get("stream"):
            t = self.t
            try:
                parsed = resp.parse()  # openai's legacy raw response parses synchronously
                if inspect.isawaitable(parsed):  # anthropic's AsyncAPIResponse does not
                    parsed = await parsed
            except Exception as exc:
                t.note_error(f"observe: {type(exc).__name__}: {exc}")
                t.end(call, problem=f"unobserved: the tap could not read the response ({type(exc).__name__})")
                return resp
            t.end(call, parsed)
            return resp
        return self.observe(resp, kwargs, call)

    def error(self, exc: BaseException, call: TapCall | None) -> None:
        self.t.end(call, problem=gave_up(exc))


def _wrap_follow(resource: Any, t: Tap, is_async: bool, name: str) -> None:
    """responses.retrieve / cancel: what they return is a background call's outcome once it has one. A
    streamed retrieve (resuming a background stream, also what the SDK's responses.stream(response_id=)
    calls) is handed to the agent event by event, as any stream, and its final event is the outcome."""
    original = getattr(resource, name, None)
    if original is None:
        return

    def seen(resp: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if t.background == {}:
            return resp
        try:
            rid = args[0] if args else kwargs.get("response_id")
            mode = _raw_mode(kwargs)
            if kwargs.get("stream") is True:
                if mode is not None or not isinstance(rid, str) or rid not in t.background:
                    return resp  # a raw stream is the agent's to read; another call's stream is not ours
                cls = AsyncTappedStream if is_async else TappedStream
                return cls(resp, ACCUMULATORS["openai-responses"](), lambda a, p: t.follow_stream(rid, a, p))
            if mode == "stream":
                return resp
            # with_raw_response (the header says "true" or "raw"): the parsed reply, cached by the SDK
            t.follow(resp.parse() if mode is not None else resp)
        except Exception as exc:  # the agent's call must not fail for the tap
            t.note_error(f"{name}: {type(exc).__name__}: {exc}")
        return resp

    if is_async:

        async def afollowed(*args: Any, **kwargs: Any) -> Any:
            return seen(await original(*args, **kwargs), args, kwargs)

        setattr(resource, name, afollowed)
    else:

        def followed(*args: Any, **kwargs: Any) -> Any:
            return seen(original(*args, **kwargs), args, kwargs)

        setattr(resource, name, followed)


def _wrap_create(resource: Any, t: Tap, is_async: bool, stream_wire: str, name: str = "create") -> None:
    original = getattr(resource, name, None)
    if original is None:  # an SDK version without this method
        return
    site = _CallSite(t, is_async, stream_wire)
    if is_async:

        async def acreate(*args: Any, **kwargs: Any) -> Any:
            call = site.start(kwargs)
            token = tap_retries.running(call.tries) if call is not None else None
            try:
                resp = await original(*args, **kwargs)
            except BaseException as exc:  # a cancellation too (a task's, asyncio.wait_for's timeout)
                site.error(exc, call)
                raise
            finally:
                if token is not None:
                    tap_retries.done(token)
            return await site.aobserve(resp, kwargs, call)

        setattr(resource, name, acreate)
    else:

        def create(*args: Any, **kwargs: Any) -> Any:
            call = site.start(kwargs)
            # (the SDK's attempts of this call, each HTTP request it sends: tap_retries)
            token = tap_retries.running(call.tries) if call is not None else None
            try:
                resp = original(*args, **kwargs)
            except BaseException as exc:  # an interrupt too (Ctrl-C while the call waits)
                site.error(exc, call)
                raise
            finally:
                if token is not None:
                    tap_retries.done(token)
            return site.observe(resp, kwargs, call)

        setattr(resource, name, create)
    # with_raw_response / with_streaming_response wrap `create` when first used (cached properties):
    # drop any cached copy so they are rebuilt around the tapped method.
    for cached in ("with_raw_response", "with_streaming_response"):
        resource.__dict__.pop(cached, None)


class _TappedStreamManager:
    """Anthropic's `messages.stream()` helper (it posts without calling create): the request is
    journaled when the stream is opened, the final message snapshot when the `with` block ends."""

    def __init__(self, inner: Any, t: Tap, call: TapCall | None) -> None:
        self._inner, self._t, self._call = inner, t, call
        self._stream: Any = None

    def _finish(self, exc: BaseException | None = None) -> None:
        """`exc`: what ended the `with` block, if it failed (the SDK raises an error event, a cut...)."""
        if self._call is None:
            return
        t = self._t
        snap = None
        try:
            snap = self._stream.current_message_snapshot if self._stream is not None else None
        except Exception:
            snap = None
        if snap is not None and getattr(snap, "stop_reason", None) is not None:
            t.end(self._call, snap)
            return
        if exc is not None:  # why the stream ended early, in the SDK's words (overloaded_error: ...)
            problem = f"incomplete_stream: {stream_ended(exc)}"
        else:
            problem = "incomplete_stream: the stream was closed before its final message"
        try:  # with the usage the snapshot has from message_start (its input side, cache reads and writes)
            partial = plain(snap)
        except Exception:
            partial = None
        t.end(self._call, problem=cut_short(problem, partial))

    def __enter__(self) -> Any:
        token = tap_retries.running(self._call.tries) if self._call is not None else None
        try:
            self._stream = self._inner.__enter__()  # (the request is sent here, retried by the SDK)
        except BaseException as exc:
            self._t.end(self._call, problem=gave_up(exc))
            raise
        finally:
            if token is not None:
                tap_retries.done(token)
        return self._stream

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._inner.__exit__(*exc)
        finally:
            self._finish(exc[1])

    async def __aenter__(self) -> Any:
        token = tap_retries.running(self._call.tries) if self._call is not None else None
        try:
            self._stream = await self._inner.__aenter__()
        except BaseException as exc:
            self._t.end(self._call, problem=gave_up(exc))
            raise
        finally:
            if token is not None:
                tap_retries.done(token)
        return self._stream

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self._inner.__aexit__(*exc)
        finally:
            self._finish(exc[1])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _wrap_anthropic_stream(resource: Any, t: Tap, is_async: bool) -> None:
    original = getattr(resource, "stream", None)
    if original is None:
        return
    site = _CallSite(t, is_async, "anthropic")

    def stream(*args: Any, **kwargs: Any) -> Any:
        call = site.start(kwargs)
        return _TappedStreamManager(original(*args, **kwargs), t, call)

    resource.stream = stream


def _anthropic_resources(client: Any) -> list[Any]:
    """`client.messages` and, when the SDK has it, `client.beta.messages` (the betas' endpoint: same
    wire format, with `?beta=true` and the `anthropic-beta` header; the beta tool runner calls it)."""
    found = [client.messages]
    try:
        beta = getattr(getattr(client, "beta", None), "messages", None)
    except Exception:  # an SDK whose beta namespace cannot be built: tap what there is
        beta = None
    if beta is not None and beta is not client.messages:
        found.append(beta)
    return found


def _openai_chat_resources(client: Any) -> list[Any]:
    """`client.chat.completions` and `client.beta.chat.completions`: the beta alias is an object of its
    own (where `parse` and `stream` lived before they moved to `chat`, and where older agents still call
    them), so wrapping one leaves the other's calls unrecorded."""
    found = [client.chat.completions]
    try:
        beta = getattr(getattr(getattr(client, "beta", None), "chat", None), "completions", None)
    except Exception:  # an SDK whose beta namespace cannot be built: tap what there is
        beta = None
    if beta is not None and beta is not client.chat.completions:
        found.append(beta)
    return found


def _is_async(client: Any) -> bool:
    return any(c.__name__.startswith("Async") for c in type(client).__mro__)


def tap(
    client: Any,
    *,
    record: str | Path | None = None,
    serve: bool | None = None,
    window: int = DEFAULT_WINDOW,
    split: bool = True,
) -> Any:
    """Wrap an anthropic.Anthropic/AsyncAnthropic or openai.OpenAI/AsyncOpenAI client in place and return it.

    `client.contextpipe_stats` is the TapStats; `client.contextpipe_tap` the Tap (call `.close()` at exit
    to finish the recording; it is also finished at interpreter exit).

    `split`: conversations that share an opening are recorded apart, as the proxy files them (a restart
    of the task with the same client, attempts run at once, a step asked again: RUN-s2.cpsession, ...;
    see Tap._route); False records every call of the client in `record`, each new start as a rewrite."""
    module = type(client).__module__
    is_async = _is_async(client)
    if module.startswith("anthropic") and hasattr(client, "messages"):
        t = Tap("anthropic", record=record, serve=serve, window=window, split=split)
        for resource in _anthropic_resources(client):
            # parse(): structured outputs, and the beta tool runner's non-streamed calls
            for name in ("create", "parse"):
                _wrap_create(resource, t, is_async, "anthropic", name)
            _wrap_anthropic_stream(resource, t, is_async)
    elif hasattr(client, "chat") and hasattr(client.chat, "completions"):
        t = Tap("openai", record=record, serve=serve, window=window, split=split)
        for resource in _openai_chat_resources(client):
            # parse() posts itself (it does not call create): structured outputs would go unrecorded
            for name in ("create", "parse"):
                _wrap_create(resource, t, is_async, "openai", name)
        responses = getattr(client, "responses", None)
        if responses is not None and hasattr(responses, "create"):
            for name in ("create", "parse"):
                _wrap_create(responses, t, is_async, "openai-responses", name)
            for name in ("retrieve", "cancel"):  # a background call's outcome
                _wrap_follow(responses, t, is_async, name)
    else:
        raise TypeError(
            f"tap() expects an anthropic.Anthropic or openai.OpenAI client (sync or async), "
            f"got {type(client).__name__}"
        )
    # Each HTTP attempt of a call (the SDK retries a 429, 529 or 5xx itself, inside create())
    tap_retries.hook(client, is_async)
    try:  # both SDKs keep it as an httpx.URL
        t.server = server_of(getattr(client, "base_url", None))
    except Exception:  # an SDK without it: the spans go without server.address
        t.server = None
    atexit.register(t.close)
    client.contextpipe_tap = t
    client.contextpipe_stats = t.stats
    client._contextpipe_tap = t  # the name of earlier versions
    return client
