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
from collections.abc import Iterable, Mapping
from typing import Any

from engine.errors import ConfigError
from engine.export.spans import SpanData, messages_content, session_trace_id, turn_span

ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
ENV_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
SCOPE = "contextpipe"


def otel_requested(flag: bool | None) -> bool:
    """An explicit argument wins; otherwise the standard variables opt in (and OTEL_SDK_DISABLED out)."""
    if flag is not None:
        return flag
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(os.environ.get(ENV_TRACES_ENDPOINT) or os.environ.get(ENV_ENDPOINT))


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
    """A TracerProvider of our own (never the global one, so an agent's own tracing is untouched) whose
    trace ids come from the session, so every call of a session lands in one trace."""

    def __init__(self, exporter: Any = None, *, endpoint: str | None = None, batch: bool = True,
                 service_name: str = "contextpipe") -> None:
        sdk_trace = _sdk()
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.id_generator import IdGenerator

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            url = endpoint or os.environ.get(ENV_TRACES_ENDPOINT) or os.environ.get(ENV_ENDPOINT)
            if not url:
                raise ConfigError(f"no OTLP endpoint: pass one, or set {ENV_ENDPOINT} (e.g. http://localhost:4318)")
            exporter = OTLPSpanExporter(endpoint=traces_url(url))

        emitter = self

        class SessionIds(IdGenerator):  # type: ignore[misc]
            def generate_span_id(self) -> int:
                return random.getrandbits(64) or 1

            def generate_trace_id(self) -> int:
                return emitter.trace_id

        self.trace_id = 1
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        self.provider = sdk_trace.TracerProvider(
            resource=Resource.create({"service.name": service_name}), id_generator=SessionIds()
        )
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer(SCOPE)

    def emit(self, data: SpanData) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.trace_id = data.trace_id
        span = self.tracer.start_span(data.name, kind=SpanKind.CLIENT, attributes=data.attributes,
                                      start_time=data.start_ns)
        for name, when, attrs in data.events:
            span.add_event(name, attrs, timestamp=when)
        if data.error:
            span.set_status(Status(StatusCode.ERROR, data.error))
            span.set_attribute("error.type", data.error.split(":", 1)[0])
        span.end(end_time=data.end_ns)

    def close(self, timeout_s: float = 5.0) -> None:
        self.provider.force_flush(int(timeout_s * 1000))
        self.provider.shutdown()


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
    """A journal sink for a live session (Pipeline(otel=True), the tap, the proxy). Never raises into
    the journal: an exporter failure is counted in `errors`."""

    def __init__(self, header: Mapping[str, Any], *, endpoint: str | None = None, exporter: Any = None,
                 content: bool = False, redact: bool = False, batch: bool = True) -> None:
        self.emitter = SpanEmitter(exporter, endpoint=endpoint, batch=batch)
        self.fold = SessionFold(str(header.get("provider") or "") or None, content=content, redact=redact)
        self.spans = 0
        self.errors = 0

    def __call__(self, ev: Mapping[str, Any]) -> None:
        try:
            data = self.fold.take(ev)
            if data is not None:
                self.emitter.emit(data)
                self.spans += 1
        except Exception:  # the agent must never notice the exporter
            self.errors += 1

    def close(self, timeout_s: float = 5.0) -> None:
        try:
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
