"""OpenTelemetry export with the official SDK: one span per model call, one trace per session.

    sink = OtelSink(header, endpoint="http://localhost:4318")   # or OTEL_EXPORTER_OTLP_ENDPOINT
    pipeline.journal.subscribe(sink)                             # Pipeline(otel=True) does this

Spans are handed to a BatchSpanProcessor: the agent's thread only builds a small attribute dict and
enqueues; export happens on the processor's own thread, and a full queue drops spans rather than
waiting. The SDK is imported lazily, so `import engine` never needs it.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from engine.errors import ConfigError
from engine.export.optin import ENV_ENDPOINT, ENV_TRACES_ENDPOINT
from engine.export.spans import SpanData, messages_content, session_trace_id, turn_span

SCOPE = "contextpipe"


def traces_url(endpoint: str) -> str:
    """OTLP/HTTP: a base endpoint gets `/v1/traces` appended, as the SDK does for the base variable."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def _sdk() -> Any:
    try:
        from opentelemetry.sdk import trace as sdk_trace
    except ImportError as exc:
        raise ConfigError(
            "OpenTelemetry export needs the SDK: pip install 'contextpipe-inspector[otel]' "
            "(opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)"
        ) from exc
    return sdk_trace


class SpanEmitter:
    """Turns SpanData into the SDK's ReadableSpans and hands them to an SDK exporter (OTLP/HTTP by
    default) in batches. Trace ids come from the session, so every call of a session is one trace; the
    agent's own tracing (the global TracerProvider) is never touched. Not thread-safe: one caller."""

    MAX_BATCH = 512

    def __init__(self, exporter: Any = None, *, endpoint: str | None = None, batch: bool = True,
                 service_name: str = "contextpipe") -> None:
        _sdk()
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            url = endpoint or os.environ.get(ENV_TRACES_ENDPOINT) or os.environ.get(ENV_ENDPOINT)
            if not url:
                raise ConfigError(f"no OTLP endpoint: pass one, or set {ENV_ENDPOINT} (e.g. http://localhost:4318)")
            exporter = OTLPSpanExporter(endpoint=traces_url(url))
        self.exporter = exporter
        self.batch = batch
        self.resource = Resource.create({"service.name": service_name})
        self.scope = InstrumentationScope(SCOPE)
        self._pending: list[Any] = []
        self.exported = 0
        self.failed = 0

    def emit(self, data: SpanData) -> None:
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        attributes = dict(data.attributes)
        status = Status(StatusCode.UNSET)
        if data.error:
            status = Status(StatusCode.ERROR, data.error)
            attributes["error.type"] = data.error.split(":", 1)[0]
        context = SpanContext(data.trace_id, random.getrandbits(64) or 1, is_remote=False,
                              trace_flags=TraceFlags(TraceFlags.SAMPLED))
        span = ReadableSpan(
            data.name, context=context, resource=self.resource, attributes=attributes,
            events=[Event(name, attrs, when) for name, when, attrs in data.events], kind=SpanKind.CLIENT,
            status=status, start_time=data.start_ns, end_time=data.end_ns, instrumentation_scope=self.scope,
        )
        self._pending.append(span)
        if not self.batch or len(self._pending) >= self.MAX_BATCH:
            self.flush()

    def flush(self) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        if not self._pending:
            return
        batch, self._pending = self._pending, []
        try:
            ok = self.exporter.export(batch) == SpanExportResult.SUCCESS
        except Exception:
            ok = False
        if ok:
            self.exported += len(batch)
        else:
            self.failed += len(batch)

    def close(self, timeout_s: float = 5.0) -> None:
        self.flush()
        self.exporter.shutdown()


class SessionFold:
    """Folds one session's journal events into spans: request times, usage, then the turn's trace."""

    def __init__(self, provider: str | None = None, content: bool = False, redact: bool = False) -> None:
        self.provider = provider
        self.content = content and not redact  # redaction wins: prompt text never leaves
        self.redact = redact
        self.trace_id: int | None = None
        self.times: dict[int, float] = {}
        self.usage: dict[int, Mapping[str, Any]] = {}
        self.blobs: dict[str, str] = {}
        self.msgs: list[Mapping[str, Any]] = []

    def take(self, ev: Mapping[str, Any]) -> SpanData | None:
        k = ev.get("k")
        if k == "session" and self.trace_id is None:
            self.trace_id = session_trace_id(ev)
        elif k == "request":
            self.times[int(ev["turn"])] = float(ev.get("time") or 0.0)
        elif k == "usage":
            self.usage[int(ev["turn"])] = ev.get("usage") or {}
        elif k == "blob" and self.content:
            data = ev.get("data")
            if isinstance(data, bytes | bytearray):
                data = bytes(data).decode("utf-8", "replace")
            if isinstance(data, str):
                self.blobs[str(ev.get("h"))] = data
        elif k in ("msg", "part", "source", "content") and self.content:
            self.msgs.append(ev)
        elif k == "turn" and self.trace_id is not None:
            from engine.recording.journal import trace_of

            trace = trace_of(dict(ev))
            turn = int(trace.get("turn", ev.get("turn", 0)))
            start = self.times.pop(turn, None)
            content = messages_content(self.msgs, self.blobs) if self.content else None
            data = turn_span(trace, self.trace_id, start_s=start, end_s=ev.get("time") or start,
                             usage=self.usage.pop(turn, None), provider=self.provider, content=content)
            if self.redact:
                _redact(data)
            return data
        return None


def _redact(data: SpanData) -> None:
    """Allow-list under CONTEXTPIPE_REDACT: counts, hashes, tiers and section ids stay; free text goes."""
    for key in ("contextpipe.cache_break.cause", "contextpipe.usage.cache_miss_reason",
                "contextpipe.usage.prompt_cache_key"):
        data.attributes.pop(key, None)
    data.events = [(name, when, {k: v for k, v in attrs.items() if k != "message"})
                   for name, when, attrs in data.events]
    if data.error:
        data.error = data.error.split(":", 1)[0]


class OtelSink:
    """A journal sink for a live session (Pipeline(otel=True), the tap, the proxy).

    On the agent's thread it only appends the event to a queue; its own daemon thread folds events into
    spans and exports them in batches, sleeping while there is nothing to send. A full queue drops
    events (counted in `dropped`) rather than growing or waiting; nothing here ever raises into the agent.
    """

    RELEVANT = frozenset({"session", "request", "usage", "turn"})
    CONTENT = frozenset({"blob", "msg", "part", "source", "content"})
    GATHER_S = 0.5  # after a wake-up, wait this long so one export carries several turns
    MAX_QUEUE = 50_000

    def __init__(self, header: Mapping[str, Any], *, endpoint: str | None = None, exporter: Any = None,
                 content: bool = False, redact: bool = False, threaded: bool = True) -> None:
        """`threaded=False` exports each span as its turn ends, on the caller's thread (tests)."""
        self.emitter = SpanEmitter(exporter, endpoint=endpoint, batch=True)
        self.fold = SessionFold(str(header.get("provider") or "") or None, content=content, redact=redact)
        self.kinds = self.RELEVANT | (self.CONTENT if self.fold.content else frozenset())
        self.threaded = threaded
        self.spans = 0
        self.errors = 0
        self.dropped = 0
        self._queue: deque[Mapping[str, Any]] = deque()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def __call__(self, ev: Mapping[str, Any]) -> None:
        if ev.get("k") not in self.kinds:
            return
        if not self.threaded:
            self._take(ev)
            self.emitter.flush()
            return
        if len(self._queue) >= self.MAX_QUEUE:
            self.dropped += 1
            return
        self._queue.append(ev)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="contextpipe-otel", daemon=True)
            self._thread.start()
        if len(self._queue) == 1:
            self._wake.set()

    def _take(self, ev: Mapping[str, Any]) -> None:
        try:
            data = self.fold.take(ev)
            if data is not None:
                self.emitter.emit(data)
                self.spans += 1
        except Exception:  # the agent must never notice the exporter
            self.errors += 1

    def _drain(self) -> None:
        while self._queue:
            self._take(self._queue.popleft())
        self.emitter.flush()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            if not self._closed:
                time.sleep(self.GATHER_S)
            self._drain()

    def close(self, timeout_s: float = 5.0) -> None:
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        try:
            self._drain()
            self.emitter.close(timeout_s)
        except Exception:
            self.errors += 1


def export_events(events: Iterable[Mapping[str, Any]], header: Mapping[str, Any], emitter: SpanEmitter,
                  *, content: bool = False, redact: bool = False) -> int:
    """Export a recorded session through `emitter`; returns the number of spans."""
    fold = SessionFold(str(header.get("provider") or "") or None, content=content, redact=redact)
    n = 0
    for ev in events:
        data = fold.take(ev)
        if data is not None:
            emitter.emit(data)
            n += 1
    return n
