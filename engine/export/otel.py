"""OpenTelemetry export with the official SDK: one span per model call, one trace per session.

    sink = OtelSink(header, endpoint="http://localhost:4318")   # or OTEL_EXPORTER_OTLP_ENDPOINT
    pipeline.journal.subscribe(sink)                             # Pipeline(otel=True) does this

The agent's thread only appends each journal event to a bounded queue; the sink's own thread folds them
into spans and exports them in batches, and a full queue drops events rather than waiting. The endpoint,
protocol and timeout follow the OTEL_EXPORTER_OTLP_* variables as the OTLP exporter specification
defines them. The SDK is imported lazily, so `import engine` never needs it.
"""

from __future__ import annotations

import atexit
import os
import random
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from engine.errors import ConfigError
from engine.export.optin import ENV_ENDPOINT, ENV_TRACES_ENDPOINT
from engine.export.spans import SpanData, messages_content, session_trace_id, turn_span

SCOPE = "contextpipe"
ENV_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
ENV_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
ENV_TIMEOUT = "OTEL_EXPORTER_OTLP_TIMEOUT"
ENV_TRACES_TIMEOUT = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"


def traces_url(endpoint: str) -> str:
    """OTLP/HTTP: a base endpoint gets `/v1/traces` appended, as the SDK does for the base variable."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def _env(signal_name: str, base_name: str) -> tuple[str, str] | None:
    """(variable, value) of the signal-specific variable, else the base one, else None (empty = unset)."""
    for name in (signal_name, base_name):
        value = os.environ.get(name, "").strip()
        if value:
            return name, value
    return None


def _checked_url(url: str, where: str) -> str:
    """An OTLP/HTTP URL must name its scheme: without one `requests` refuses every export (MissingSchema),
    which the SDK only logs, so every span of the session was lost behind one log line per batch."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"{where} is {url!r}: an OTLP/HTTP endpoint is a URL with an http:// or https:// scheme and a "
            f"host, e.g. http://localhost:4318 (the port defaults to 80 for http and 443 for https)"
        )
    return url


def resolve_endpoint(endpoint: str | None = None) -> str:
    """The URL spans are posted to, by the OTLP exporter specification (opentelemetry-specification,
    specification/protocol/exporter.md, "Endpoint URLs for OTLP/HTTP"): a base endpoint (an argument or
    OTEL_EXPORTER_OTLP_ENDPOINT) gets `v1/traces` appended to its path; the signal-specific
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is (a collector behind a path prefix or a vendor's
    own ingest path), only an empty path becoming `/`. An explicit argument wins over both variables."""
    if endpoint:
        return traces_url(_checked_url(endpoint.strip(), "the OTLP endpoint"))
    found = _env(ENV_TRACES_ENDPOINT, ENV_ENDPOINT)
    if found is None:
        raise ConfigError(f"no OTLP endpoint: pass one, or set {ENV_ENDPOINT} (e.g. http://localhost:4318)")
    name, url = found
    _checked_url(url, name)
    if name == ENV_TRACES_ENDPOINT:
        return url if urlsplit(url).path else url + "/"
    return traces_url(url)


def resolve_protocol() -> str:
    """OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL (exporter.md, "Specify Protocol"):
    http/protobuf (the default) or grpc. http/json has no Python exporter: refused by name rather than
    sent as protobuf to a receiver that expects JSON."""
    found = _env(ENV_TRACES_PROTOCOL, ENV_PROTOCOL)
    if found is None:
        return "http/protobuf"
    name, value = found
    value = value.lower()
    if value in ("http/protobuf", "grpc"):
        return value
    if value == "http/json":
        raise ConfigError(f"{name}=http/json: the OpenTelemetry Python SDK has no OTLP/JSON exporter; "
                          "set it to http/protobuf (collectors accept both on port 4318) or grpc")
    raise ConfigError(f"{name} is {value!r}: expected http/protobuf or grpc")


def resolve_timeout_s() -> float | None:
    """OTEL_EXPORTER_OTLP_TRACES_TIMEOUT / OTEL_EXPORTER_OTLP_TIMEOUT in seconds, None when unset. The
    specification's Timeout type (configuration/common.md) is milliseconds, 0 meaning no limit (a very
    long time: 2**31-1 ms, as it suggests), and a negative or unreadable value is warned about and
    ignored. The Python exporters read the variables as seconds (opentelemetry-python #4044), so
    TIMEOUT=10000 meant a 10 000 s wait per batch: read here and passed to the exporter explicitly."""
    found = _env(ENV_TRACES_TIMEOUT, ENV_TIMEOUT)
    if found is None:
        return None
    name, value = found
    try:
        ms = float(value)
    except ValueError:
        ms = -1.0
    if ms < 0:
        import warnings

        warnings.warn(f"{name}={value!r} is ignored: expected a non-negative whole number of milliseconds, "
                      "e.g. 10000; the exporter's default (10 s) applies", RuntimeWarning, stacklevel=2)
        return None
    return (ms or 2**31 - 1) / 1000.0


def _sdk() -> Any:
    try:
        from opentelemetry.sdk import trace as sdk_trace
    except ImportError as exc:
        raise ConfigError(
            "OpenTelemetry export needs the SDK: pip install 'contextpipe-inspector[otel]' "
            "(opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)"
        ) from exc
    return sdk_trace


def make_exporter(endpoint: str | None = None, timeout_s: float | None = None) -> Any:
    """The SDK's OTLP span exporter for an endpoint (or the OTEL_EXPORTER_OTLP_* variables), over the
    protocol the variables ask for; headers, compression and certificates are left to the SDK, which
    reads their variables itself."""
    _sdk()
    protocol = resolve_protocol()
    if timeout_s is None:
        timeout_s = resolve_timeout_s()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError as exc:
            raise ConfigError(
                "the OTLP protocol is grpc (OTEL_EXPORTER_OTLP_PROTOCOL), which needs "
                "pip install opentelemetry-exporter-otlp-proto-grpc; or set it to http/protobuf"
            ) from exc
        url = endpoint.strip() if endpoint else None  # gRPC has no path: the exporter reads the variables
        if url is None and _env(ENV_TRACES_ENDPOINT, ENV_ENDPOINT) is None:
            raise ConfigError(f"no OTLP endpoint: pass one, or set {ENV_ENDPOINT} (e.g. http://localhost:4317)")
        return GrpcExporter(endpoint=url, timeout=timeout_s)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=resolve_endpoint(endpoint), timeout=timeout_s)


def exporter_url(exporter: Any) -> str:
    """Where an SDK exporter sends (for messages): its endpoint when it says, else its class name."""
    return str(getattr(exporter, "_endpoint", "") or type(exporter).__name__)


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
            exporter = make_exporter(endpoint)
        self.exporter = exporter
        self.batch = batch
        # OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) names the service when set: the
        # attributes given to Resource.create override the environment's, so a fixed "contextpipe" put
        # every agent of a fleet under one service whatever its deployment said. Ours is the fallback.
        resource = Resource.create({})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": service_name}))
        self.resource = resource
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
    """Folds one session's journal events into spans: request times, usage, then the turn's trace.

    A live sink passes `at`, a monotonic reading of when each event was journaled: a turn's span then
    ends when its outcome (usage or error) arrived, so its duration is the model call's. A recording
    keeps no such time, so its spans end where they start."""

    def __init__(self, provider: str | None = None, content: bool = False, redact: bool = False) -> None:
        self.provider = provider
        self.content = content and not redact  # redaction wins: prompt text never leaves
        self.redact = redact
        self.trace_id: int | None = None
        self.times: dict[int, tuple[float, float | None]] = {}  # turn -> (request time, monotonic)
        self.ended: dict[int, float] = {}  # turn -> monotonic reading of its outcome
        self.last_time: float | None = None  # the newest journaled wall time (session, requests)
        self.usage: dict[int, Mapping[str, Any]] = {}
        self.blobs: dict[str, str] = {}
        self.msgs: list[Mapping[str, Any]] = []

    def take(self, ev: Mapping[str, Any], at: float | None = None) -> SpanData | None:
        k = ev.get("k")
        if k == "session" and self.trace_id is None:
            self.trace_id = session_trace_id(ev)
            self.last_time = _wall(ev.get("time")) or self.last_time
        elif k == "request":
            when = _wall(ev.get("time"))
            if when is not None:
                self.last_time = when
                self.times[int(ev["turn"])] = (when, at)
        elif k == "usage":
            self.usage[int(ev["turn"])] = ev.get("usage") or {}
            if at is not None:
                self.ended[int(ev["turn"])] = at
        elif k == "error":
            if at is not None and ev.get("turn") is not None:
                self.ended.setdefault(int(ev["turn"]), at)
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
            start, started_at = self.times.pop(turn, (None, None))
            ended_at = self.ended.pop(turn, None)
            if start is None:
                # Its request event was never seen (a sink queue that overflowed): the newest journaled
                # time, rather than 0, which put the span at 1970 where backends drop or hide it.
                start = self.last_time
            end = start
            if start is not None and started_at is not None and ended_at is not None:
                end = start + max(0.0, ended_at - started_at)
            content = messages_content(self.msgs, self.blobs) if self.content else None
            data = turn_span(trace, self.trace_id, start_s=start, end_s=end,
                             usage=self.usage.pop(turn, None), provider=self.provider, content=content)
            if self.redact:
                _redact(data)
            return data
        return None


def _wall(value: Any) -> float | None:
    """A journaled wall-clock time, None when absent or not a positive number."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


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

    On the agent's thread it only appends the event (and when it came) to a queue; its own daemon thread
    folds events into spans and exports them in batches, sleeping while there is nothing to send. A full
    queue drops events (counted in `dropped`) rather than growing or waiting; nothing here ever raises
    into the agent. close() waits at most its timeout for the receiver, then says how many of the
    session's spans did not reach it (`lost`, and one RuntimeWarning naming the endpoint).
    """

    RELEVANT = frozenset({"session", "request", "usage", "error", "turn"})
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
        self.dropped = 0  # events the full queue turned away
        self.turns = 0  # turns journaled while exporting: what a receiver should end up with
        self.lost = 0  # set by close(): turns whose span the receiver did not confirm
        self._queue: deque[tuple[Mapping[str, Any], float]] = deque()
        self._wake = threading.Event()
        self._closing = threading.Event()  # cuts the gather wait short: close() should not sit it out
        self._closed = False
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        _OPEN.add(self)

    def __call__(self, ev: Mapping[str, Any]) -> None:
        k = ev.get("k")
        if k not in self.kinds:
            return
        if k == "turn":
            self.turns += 1
        at = time.monotonic()
        if not self.threaded:
            self._take(ev, at)
            self.emitter.flush()
            return
        if self._closed or len(self._queue) >= self.MAX_QUEUE:
            self.dropped += 1
            return
        self._queue.append((ev, at))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="contextpipe-otel", daemon=True)
            self._thread.start()
        if len(self._queue) == 1:
            self._wake.set()

    def _take(self, ev: Mapping[str, Any], at: float | None = None) -> None:
        try:
            data = self.fold.take(ev, at)
            if data is not None:
                self.emitter.emit(data)
                self.spans += 1
        except Exception:  # the agent must never notice the exporter
            self.errors += 1

    def _drain(self) -> None:
        while self._queue:
            self._take(*self._queue.popleft())
        self.emitter.flush()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if not self._closed:
                self._closing.wait(self.GATHER_S)
            closing = self._closed  # read before draining: what was queued by then is all there is
            try:
                self._drain()
            except Exception:
                self.errors += 1
            if closing:
                return

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is left, waiting at most `timeout_s` for the receiver. A receiver that is down or
        slow used to hold the agent's Pipeline.close() for the exporter's whole retry budget (10 s and
        more) after the join had timed out, the agent's thread then draining the queue alongside the
        export thread. Now only the export thread touches the queue; past the timeout the exporter is
        shut down (which ends its retries) and what did not arrive is counted, not waited for."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        thread = self._thread
        try:
            if thread is None:
                self._drain()  # never started (threaded=False, or no relevant event): nothing in flight
            else:
                self._closing.set()
                self._wake.set()
                thread.join(timeout_s)
        except Exception:
            self.errors += 1
        try:
            self.emitter.exporter.shutdown()
        except Exception:
            self.errors += 1
        self.lost = max(0, self.turns - self.emitter.exported)
        if self.lost:
            import warnings

            detail = (f"{self.emitter.failed} refused or timed out, "
                      f"{self.lost - self.emitter.failed} unsent when the session closed")
            warnings.warn(
                f"OpenTelemetry export: {self.lost} of {self.turns} spans did not reach "
                f"{exporter_url(self.emitter.exporter)} ({detail}); is a collector listening there?",
                RuntimeWarning, stacklevel=2,
            )


# Sinks not yet closed. An agent that ends without Pipeline.close() (a script that returns, sys.exit)
# lost every span still queued or batched: the export thread is a daemon, stopped mid-wait at exit, so a
# short session reached the receiver with none of its calls and nothing said so. At exit each open sink
# is closed, all of them within one EXIT_TIMEOUT_S. Weak: a sink dropped unclosed is not kept alive.
_OPEN: weakref.WeakSet[OtelSink] = weakref.WeakSet()
EXIT_TIMEOUT_S = 5.0


@atexit.register
def _close_open_sinks() -> None:
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    for sink in list(_OPEN):
        # A forked child inherits its parent's open sinks (and their queues, not their threads): closing
        # them there would send the parent's spans twice and warn about spans that are not the child's.
        if sink._pid == os.getpid():
            sink.close(max(0.1, deadline - time.monotonic()))


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
