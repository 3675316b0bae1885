"""OpenTelemetry export with the official SDK: one span per model call, one trace per session, the calls
under the session's invoke_agent span (see engine.export.spans).

    sink = OtelSink(header, endpoint="http://localhost:4318")   # or OTEL_EXPORTER_OTLP_ENDPOINT
    pipeline.journal.subscribe(sink)                             # Pipeline(otel=True) does this

The agent's thread only appends each journal event to a queue bounded in bytes; an export thread per
endpoint folds them into spans and exports them in batches, and a full queue drops events rather than
waiting. The endpoint, protocol and timeout follow the OTEL_EXPORTER_OTLP_* variables as the OTLP
exporter specification defines them. The SDK is imported lazily, so `import engine` never needs it.
"""

from __future__ import annotations

import atexit
import logging
import os
import random
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from engine.errors import ConfigError
from engine.export.optin import ENV_ENDPOINT, ENV_TRACES_ENDPOINT
from engine.export.spans import (
    CONTENT_CAP,
    MessagesFold,
    SpanData,
    agent_span,
    error_type,
    finish_reason,
    session_trace_id,
    turn_span,
)
from engine.wording import counted

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


def _value_bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8", "replace"))
    if isinstance(value, list | tuple):
        return sum(_value_bytes(v) + 2 for v in value)
    return 9  # a number or a bool: at most a tag and 8 bytes


def span_bytes(data: SpanData) -> int:
    """About what a span takes in an OTLP post (protobuf): its names and values, plus a few bytes of
    framing each and the span's fixed fields. An estimate (it runs on every span): the text of the
    attributes is what makes a span large, and that is counted exactly."""
    size = 96 + len(data.name) + len(data.error or "")
    for key, value in data.attributes.items():
        size += len(key) + _value_bytes(value) + 8
    for name, _when, attrs in data.events:
        size += 24 + len(name) + sum(len(k) + _value_bytes(v) + 8 for k, v in attrs.items())
    return size


_THREAD_NAME = "contextpipe-otel"  # the export threads' name (the log filter below tells them by it)
# Export threads whose current export the SDK is retrying (it logged a transient error: the receiver
# refused the connection or answered 429/5xx), by thread ident; cleared as each export starts and ends.
_RETRYING: set[int] = set()
# How long close() waits for an export thread that is retrying when it is called (a receiver that is
# down), rather than its whole timeout: every agent with OTEL_EXPORTER_OTLP_ENDPOINT set and no collector
# running took 5 s more to exit, for spans that could not be delivered anyway (and are counted as lost).
RETRYING_GRACE_S = 0.5


class _ExportThreadLogs(logging.Filter):
    """The SDK exporter's log records from an export thread are not the agent's: a receiver that is
    down made it log a warning for every retry ("Transient error ... retrying in 2.11s"), printed on the
    agent's stderr (Python's last-resort handler, when the agent configures no logging), a line every
    few seconds through the agent's own output. What they say is counted instead, and said once, when
    the session closes (OtelSink.close). A retry is noted so that close() need not wait it out."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.threadName != _THREAD_NAME:
            return True  # the agent's own exporters, and export_events on the caller's thread (the CLI)
        if record.levelno >= logging.WARNING and str(record.msg).startswith("Transient error"):
            _RETRYING.add(record.thread or 0)
        return False


_LOG_FILTER = _ExportThreadLogs()


def _quiet_exporter_logs() -> None:
    """Put the filter on the SDK exporters' loggers (created when their modules were imported, which
    make_exporter did before any export thread starts). A logger's filters do not apply to its
    children's records, so each is given it."""
    for name, found in list(logging.Logger.manager.loggerDict.items()):
        if name.startswith("opentelemetry.exporter") and isinstance(found, logging.Logger):
            if _LOG_FILTER not in found.filters:
                found.addFilter(_LOG_FILTER)


class SpanEmitter:
    """Turns SpanData into the SDK's ReadableSpans and hands them to an SDK exporter (OTLP/HTTP by
    default) in batches. Trace ids come from the session, so every call of a session is one trace; the
    agent's own tracing (the global TracerProvider) is never touched. Not thread-safe: one caller."""

    MAX_BATCH = 512
    # What one export may carry, estimated (span_bytes). Receivers refuse a larger post whole, and every
    # span in it is lost: the Collector's OTLP/HTTP receiver past 20 MiB (max_request_body_size), gRPC
    # servers past 4 MiB (their default receive limit). 512 spans with content export (64 Ki characters
    # of prompt each) made 32 MiB posts; 3 MiB leaves room under both for the request's own framing.
    MAX_BATCH_BYTES = 3 * 2**20

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
        self._pending_bytes = 0
        self.exported = 0
        self.exported_calls = 0
        self.failed = 0
        self.failed_calls = 0

    def emit(self, data: SpanData) -> None:
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        attributes = dict(data.attributes)
        status = Status(StatusCode.UNSET)
        if data.error:
            status = Status(StatusCode.ERROR, data.error)
            attributes.setdefault("error.type", error_type(data.error))
        flags = TraceFlags(TraceFlags.SAMPLED)
        context = SpanContext(data.trace_id, data.span_id or random.getrandbits(64) or 1, is_remote=False,
                              trace_flags=flags)
        parent = None
        if data.parent_span_id:
            parent = SpanContext(data.trace_id, data.parent_span_id, is_remote=False, trace_flags=flags)
        span = ReadableSpan(
            data.name, context=context, parent=parent, resource=self.resource, attributes=attributes,
            events=[Event(name, attrs, when) for name, when, attrs in data.events],
            kind=SpanKind.INTERNAL if data.kind == "internal" else SpanKind.CLIENT,
            status=status, start_time=data.start_ns, end_time=data.end_ns, instrumentation_scope=self.scope,
        )
        size = span_bytes(data)
        if self._pending and self._pending_bytes + size > self.MAX_BATCH_BYTES:
            self.flush()  # this span would take the post past what a receiver accepts: it starts the next
        self._pending.append(span)
        self._pending_bytes += size
        if not self.batch or len(self._pending) >= self.MAX_BATCH:
            self.flush()

    def flush(self) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult
        from opentelemetry.trace import SpanKind

        if not self._pending:
            return
        batch, self._pending, self._pending_bytes = self._pending, [], 0
        me = threading.get_ident()
        _RETRYING.discard(me)
        try:
            ok = self.exporter.export(batch) == SpanExportResult.SUCCESS
        except Exception:
            ok = False
        finally:
            _RETRYING.discard(me)
        # The model calls' spans are counted apart too, for what a session's close says of them (its
        # invoke_agent span is counted in `exported` or `failed` only).
        calls = sum(1 for span in batch if span.kind == SpanKind.CLIENT)
        if ok:
            self.exported += len(batch)
            self.exported_calls += calls
        else:
            self.failed += len(batch)
            self.failed_calls += calls

    def close(self, timeout_s: float = 5.0) -> None:
        self.flush()
        self.exporter.shutdown()


# Set on a span whose times are not the model call's own (absent on every span of a live session or a
# recording made since probeotel23): "no_end", it starts at the request but the journal kept no end, so
# it is drawn zero-length; "no_times", the request had no time either (an import of a log without per-event
# times), so it sits at the newest time the journal had before it. On the invoke_agent span, with
# `contextpipe.timing.calls`, how many of its calls were such.
TIMING_ATTR = "contextpipe.timing"
TIMING_NO_END = "no_end"
TIMING_NO_TIMES = "no_times"


# The texts a content export's fold keeps for the events that may name them again, in characters. An
# event names a text by its hash; each text is journaled once per session, so one a later message repeats
# (a file read twice, a tool's same answer) must still be at hand then. Every text of the session was
# kept: exporting a long recording with --content held all its prompt text in memory at once.
MAX_FOLD_TEXT = 4 * 2**20


class FoldTexts(Mapping[str, str]):
    """Blob texts by hash for the content fold (MessagesFold), bounded: at most MAX_FOLD_TEXT characters,
    the least recently used let go first, each text only as far as a span can carry it (CONTENT_CAP:
    fit_messages never sends more of any one text). A text let go and named again is read back through
    `lookup` (a recording's own blob index, by hash), when there is one: without (a live sink), that part
    is left out of the span's messages."""

    def __init__(self, lookup: Callable[[str], str | None] | None = None, limit: int | None = None) -> None:
        self.lookup = lookup
        self.limit = MAX_FOLD_TEXT if limit is None else limit
        self._texts: OrderedDict[str, str] = OrderedDict()
        self.size = 0  # characters held

    def add(self, h: str, text: str) -> None:
        text = text[:CONTENT_CAP]
        old = self._texts.pop(h, None)
        if old is not None:
            self.size -= len(old)
        self._texts[h] = text
        self.size += len(text)
        while self.size > self.limit and len(self._texts) > 1:
            _, gone = self._texts.popitem(last=False)
            self.size -= len(gone)

    def __getitem__(self, h: str) -> str:
        text = self._texts.get(h)
        if text is not None:
            self._texts.move_to_end(h)
            return text
        found = None
        if self.lookup is not None:
            try:
                found = self.lookup(h)
            except Exception:  # a damaged or vanished file: the part is left out, as if never journaled
                found = None
        if found is None:
            raise KeyError(h)
        self.add(h, found)
        return self._texts[h]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._texts))  # (reading an item moves it: a live view would change under it)

    def __len__(self) -> int:
        return len(self._texts)


class SessionFold:
    """Folds one session's journal events into spans: request times, usage, then the turn's trace; and,
    once the session is over (`agent()`), its invoke_agent span.

    A live sink passes `at`, a monotonic reading of when each event was journaled: a turn's span then
    ends when its outcome (usage or error) arrived, so its duration is the model call's. A recording has
    the outcome's wall time in its usage or error event (journaled since probeotel23); one from before
    that keeps no end, so its spans end where they start, and say so (TIMING_ATTR)."""

    def __init__(self, provider: str | None = None, content: bool = False, redact: bool = False,
                 model: str | None = None, blob_lookup: Callable[[str], str | None] | None = None) -> None:
        self.provider = provider
        self.model = model or ""
        self.content = content and not redact  # redaction wins: prompt text never leaves
        self.redact = redact
        self.trace_id: int | None = None
        self.times: dict[int, tuple[float, float | None]] = {}  # turn -> (request time, monotonic)
        self.ended: dict[int, float] = {}  # turn -> monotonic reading of its outcome
        self.ended_wall: dict[int, float] = {}  # turn -> the outcome's journaled wall time (recordings)
        self.last_time: float | None = None  # the newest journaled wall time (session, requests)
        self.usage: dict[int, Mapping[str, Any]] = {}
        self.blobs = FoldTexts(blob_lookup)  # (content export only) bounded; see FoldTexts
        self.messages = MessagesFold()  # gen_ai.input.messages, when content is exported
        # For the invoke_agent span: the session's start, its calls, their summed usage, the last end.
        self.started: float | None = None
        self.calls = 0
        self.totals: dict[str, int] = {}
        self.last_end: float | None = None
        self.last_reason: str | None = None
        self.last_error: str | None = None
        self.untimed = 0  # calls whose span carries TIMING_ATTR
        self.first_start: float | None = None  # the earliest call's request time
        # The engine's own requests ask for the session's max_output_tokens (their body's max_tokens). A
        # captured session's requests are the agent's (their trace's request_params say what they set):
        # its `actual` events tell it apart in a recording made before the traces said so.
        self.max_output: int | None = None
        self.captured = False

    def _config(self, config: Any) -> None:
        value = config.get("max_output_tokens") if isinstance(config, Mapping) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            self.max_output = value

    def take(self, ev: Mapping[str, Any], at: float | None = None) -> SpanData | None:
        k = ev.get("k")
        if k == "session" and self.trace_id is None:
            self.trace_id = session_trace_id(ev)
            self.started = _wall(ev.get("time"))
            self.last_time = self.started or self.last_time
            config = ev.get("config")
            if not self.model and isinstance(config, Mapping):
                self.model = str(config.get("model") or "")
            if not self.provider and isinstance(config, Mapping):
                self.provider = str(config.get("provider") or "") or None
            self._config(config)
        elif k == "config":
            self._config(ev.get("config"))
        elif k == "actual":
            self.captured = True
        elif k == "request":
            when = _wall(ev.get("time"))
            if when is not None:
                self.last_time = when
                self.times[int(ev["turn"])] = (when, at)
        elif k == "usage":
            turn = int(ev["turn"])
            self.usage[turn] = ev.get("usage") or {}
            if at is not None:
                self.ended[turn] = at
            when = _wall(ev.get("time"))
            if when is not None:
                self.ended_wall[turn] = when
        elif k == "error":
            if ev.get("turn") is not None:
                if at is not None:
                    self.ended.setdefault(int(ev["turn"]), at)
                when = _wall(ev.get("time"))
                if when is not None:
                    self.ended_wall.setdefault(int(ev["turn"]), when)
        elif k == "blob" and self.content:
            data = ev.get("data")
            if isinstance(data, bytes | bytearray):
                data = bytes(data).decode("utf-8", "replace")
            if isinstance(data, str):
                self.blobs.add(str(ev.get("h")), data)
        elif k in ("msg", "part", "source", "content") and self.content:
            self.messages.take(ev, self.blobs)
        elif k == "turn" and self.trace_id is not None:
            from engine.recording.journal import trace_of

            trace = trace_of(dict(ev))
            turn = int(trace.get("turn", ev.get("turn", 0)))
            start, started_at = self.times.pop(turn, (None, None))
            ended_at = self.ended.pop(turn, None)
            ended_wall = self.ended_wall.pop(turn, None)
            # What the span's times rest on, said when it is not the call itself (TIMING_ATTR): a trace
            # viewer draws a zero-length span as a call that took no time, which is a lie when the
            # journal simply did not keep the call's end (an old recording, an import of a log that
            # has no per-event time).
            timing: str | None = None
            if start is None:
                # Its request event was never seen (a sink queue that overflowed), or had no time (an
                # import): the newest journaled time, rather than 0, which put the span at 1970 where
                # backends drop or hide it.
                start = self.last_time
                timing = TIMING_NO_TIMES
            end = start
            # The call's duration by the live clock (when its request and its outcome were journaled) and
            # by the journaled wall times (when it was sent, when its outcome came): the longer. The proxy
            # journals an exchange, request and outcome together, once its answer has ended, and the tap
            # a call held behind another's turn: by the live clock alone such a call took no time at all.
            took: float | None = None
            if start is not None and started_at is not None and ended_at is not None:
                took = max(0.0, ended_at - started_at)
            if start is not None and ended_wall is not None and timing is None:
                took = max(took or 0.0, ended_wall - start)
            if start is not None and took is not None:
                end = start + took
            elif timing is None:
                timing = TIMING_NO_END
            if start is not None and timing is None:
                first = self.first_start
                self.first_start = start if first is None else min(first, start)
            content = self.messages if self.content else None
            usage = self.usage.pop(turn, None)
            own = None
            if "request_params" not in trace and not self.captured and self.max_output is not None:
                own = {"max_tokens": self.max_output}
            data = turn_span(trace, self.trace_id, start_s=start, end_s=end,
                             usage=usage, provider=self.provider, content=content, request_params=own)
            if timing is not None:
                data.attributes[TIMING_ATTR] = timing
                self.untimed += 1
            if self.redact:
                _redact(data)
            self._count(usage if usage is not None else trace.get("usage"), end, data.error)
            return data
        return None

    def _count(self, usage: Any, end: float | None, error: str | None) -> None:
        self.calls += 1
        if isinstance(usage, Mapping):
            for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                        "reasoning_tokens"):
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    self.totals[key] = self.totals.get(key, 0) + value
            self.last_reason = finish_reason(usage)
        else:
            self.last_reason = None
        if end is not None:
            self.last_end = end if self.last_end is None else max(self.last_end, end)
        self.last_error = error

    def agent(self) -> SpanData | None:
        """The session's invoke_agent span, from its start to its last call's end; None before a call.
        Its status is the last call's: an agent whose final call failed ended in that error."""
        if self.trace_id is None or not self.calls:
            return None
        begin = self.started or self.last_end
        if self.first_start is not None and (begin is None or self.first_start < begin):
            # A call sent before the session's first event (the proxy opens the session when it journals
            # the first exchange, once that call's answer has ended): the session began with it.
            begin = self.first_start
        data = agent_span(self.trace_id, start_s=begin, end_s=self.last_end,
                          model=self.model, provider=self.provider, calls=self.calls, usage=self.totals,
                          last_reason=self.last_reason, error=self.last_error)
        if self.untimed:
            # Its end is its last call's, which is only the call's start when that call's end is unknown.
            data.attributes[TIMING_ATTR] = TIMING_NO_END if self.started else TIMING_NO_TIMES
            data.attributes[f"{TIMING_ATTR}.calls"] = self.untimed
        return data


def _wall(value: Any) -> float | None:
    """A journaled wall-clock time, None when absent or not a positive number."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def _redact(data: SpanData) -> None:
    """Allow-list under CONTEXTPIPE_REDACT: counts, hashes, tiers and section ids stay; free text goes."""
    for key in ("contextpipe.cache_break.cause", "contextpipe.usage.cache_miss_reason",
                "contextpipe.usage.prompt_cache_key", "gen_ai.request.stop_sequences"):
        data.attributes.pop(key, None)
    data.events = [(name, when, {k: v for k, v in attrs.items() if k != "message"})
                   for name, when, attrs in data.events]
    if data.error:
        data.error = data.error.split(":", 1)[0]


class OtelSink:
    """A journal sink for a live session (Pipeline(otel=True), the tap, the proxy).

    On the agent's thread it only appends the event (and when it came) to a queue; the export thread of
    its endpoint (shared by every sink of that endpoint: a proxy opens one per conversation) folds events
    into spans and exports them in batches, sleeping while there is nothing to send. Sinks of different
    endpoints never share a thread: a receiver that takes its exporter's whole timeout (10 s by default)
    for each batch holds only its own endpoint's spans, and another endpoint's leave at most GATHER_S
    plus their own receiver's answer after their turn (see _ExportWorker). The queue is bounded by an estimate
    of the memory its events hold (MAX_QUEUE_BYTES): past it, events are dropped (counted in `dropped`)
    rather than growing or waiting; nothing here ever raises into the agent. close() sends the session's
    invoke_agent span, waits at most its timeout for the receiver, then says in one RuntimeWarning, naming
    the endpoint, how many of the session's call spans did not reach it (`lost`) and how many events the
    full queue dropped.
    """

    RELEVANT = frozenset({"session", "config", "request", "usage", "error", "turn"})
    CONTENT = frozenset({"blob", "msg", "part", "source", "content"})
    GATHER_S = 0.5  # after a wake-up, wait this long so one export carries several turns
    # What the queue may hold while the receiver is slow or down. It was 50,000 events, ~175 MB of turn
    # traces; 8 MiB is some 400 turns (a turn's events hold ~19 KB: its trace ~16, request, usage).
    MAX_QUEUE_BYTES = 8 * 2**20

    def __init__(self, header: Mapping[str, Any], *, endpoint: str | None = None, exporter: Any = None,
                 content: bool = False, redact: bool = False, threaded: bool = True) -> None:
        """`threaded=False` exports each span as its turn ends, on the caller's thread (tests)."""
        self.emitter = SpanEmitter(exporter, endpoint=endpoint, batch=True)
        self.fold = SessionFold(str(header.get("provider") or "") or None, content=content, redact=redact,
                                model=str(header.get("model") or "") or None)
        self.kinds = self.RELEVANT | (self.CONTENT if self.fold.content else frozenset())
        self.threaded = threaded
        self.spans = 0
        self.errors = 0
        self.dropped = 0  # events the full queue turned away
        self.turns = 0  # turns journaled while exporting: what a receiver should end up with
        self.lost = 0  # set by close(): turns whose span the receiver did not confirm
        self._queue: deque[tuple[Mapping[str, Any], float, int]] = deque()
        # The queue's estimated bytes: added on the agent's thread, taken on the export thread, each
        # counter written by one thread only (a shared `+=`/`-=` could lose updates and drift).
        self._queued_bytes = 0
        self._taken_bytes = 0
        self._done = threading.Event()  # set by the export thread once a closed sink is drained
        self._closed = False
        self._worker: _ExportWorker | None = None
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
        size = _event_bytes(k, ev) if k == "blob" or k == "error" else _KIND_BYTES.get(k, 1_024)
        if self._closed or self._queued_bytes - self._taken_bytes + size > self.MAX_QUEUE_BYTES:
            self.dropped += 1
            return
        self._queued_bytes += size
        self._queue.append((ev, at, size))
        worker = self._worker
        if worker is None:
            # (A sink a forked child inherited keeps its parent's worker, whose thread the child does not
            # have: it exports nothing there, as the parent's spans are not the child's to send.)
            worker = self._worker = _export_worker(self)
        if len(self._queue) == 1:
            worker.wake.set()

    def _take(self, ev: Mapping[str, Any], at: float | None = None) -> None:
        try:
            data = self.fold.take(ev, at)
            if data is not None:
                self.emitter.emit(data)
                self.spans += 1
        except Exception:  # the agent must never notice the exporter
            self.errors += 1

    def _drain(self) -> None:
        queue = self._queue
        while queue:
            ev, at, size = queue.popleft()
            self._taken_bytes += size
            self._take(ev, at)
        self.emitter.flush()

    def _end_session(self) -> None:
        """The session is over: its invoke_agent span, and what is left sent."""
        self._drain()
        try:
            data = self.fold.agent()
            if data is not None:
                self.emitter.emit(data)
        except Exception:
            self.errors += 1
        self.emitter.flush()

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is left, waiting at most `timeout_s` for the receiver. A receiver that is down or
        slow used to hold the agent's Pipeline.close() for the exporter's whole retry budget (10 s and
        more); now only the export thread touches the queue, and past the timeout the exporter is shut
        down (which ends its retries) and what did not arrive is counted, not waited for."""
        if self._start_close():
            self._finish_close(timeout_s)

    def _start_close(self) -> bool:
        """Mark the sink closed and have its export thread end the session; False if it already was.
        Apart from the wait so that the exit handler can start every sink's close before waiting on any
        (each endpoint's thread then ends its sessions at once, not after a slow endpoint's wait)."""
        if self._closed:
            return False
        self._closed = True
        _OPEN.discard(self)
        worker = self._worker
        try:
            if worker is not None and worker.pid == os.getpid():
                worker.cut.set()
                worker.wake.set()
        except Exception:
            self.errors += 1
        return True

    def _finish_close(self, timeout_s: float) -> None:
        worker = self._worker
        try:
            if worker is None or worker.pid != os.getpid():
                self._end_session()  # nothing queued (threaded=False, or no relevant event): nothing in flight
            else:
                # Up to the timeout; less once the export thread is retrying (the receiver is failing).
                start = time.monotonic()
                while not self._done.wait(0.05):
                    waited = time.monotonic() - start
                    if waited >= timeout_s or (worker.thread.ident in _RETRYING and waited >= RETRYING_GRACE_S):
                        break
        except Exception:
            self.errors += 1
        try:
            self.emitter.exporter.shutdown()
        except Exception:
            self.errors += 1
        self.lost = max(0, self.turns - self.emitter.exported_calls)
        if self.lost or self.dropped:
            import warnings

            parts = []
            if self.lost:
                parts.append(f"{self.lost} of {counted(self.turns, 'span')} did not reach "
                             f"{exporter_url(self.emitter.exporter)} ({self.emitter.failed_calls} refused or "
                             f"timed out, {max(0, self.lost - self.emitter.failed_calls)} unsent when the "
                             "session closed); "
                             "is a collector listening there?")
            if self.dropped:
                parts.append(f"{self.dropped} journal events were dropped while the export queue was full "
                             f"(it holds {self.MAX_QUEUE_BYTES // 2**20} MiB: the receiver was slower than "
                             "the agent), so some spans lack their usage or times")
            # (3: the caller of close(), whose _finish_close this is.)
            warnings.warn("OpenTelemetry export: " + "; ".join(parts), RuntimeWarning, stacklevel=3)


# Rough bytes a queued event holds, by kind (deep sizes measured on a real engine turn: a turn's trace
# ~14-16 KB, a request ~1.3 KB plus its sections, the rest about 1 KB); a blob adds its text. An estimate
# taken in O(1) on the agent's thread: sizing the event itself would cost more than queuing it.
_KIND_BYTES = {"turn": 16_384, "session": 4_096, "request": 2_048, "msg": 1_536, "source": 1_536,
               "content": 1_536}


def _event_bytes(kind: Any, ev: Mapping[str, Any]) -> int:
    if kind == "blob":
        data = ev.get("data")
        return 512 + (len(data) if isinstance(data, str | bytes | bytearray) else 0)
    if kind == "error":
        message = ev.get("message")
        return 1_024 + (len(message) if isinstance(message, str) else 0)
    return _KIND_BYTES.get(kind, 1_024)


class _ExportWorker:
    """The thread that folds and exports for every live sink of one endpoint in this process. One per
    session (the proxy serves each conversation as its own session) meant a thread and its stack per
    conversation, each waking on its own; one for the whole process meant that an endpoint that answers
    slowly (or not: each batch then takes the exporter's whole timeout and retries, 10 s by default)
    held every other endpoint's spans behind it. So sinks share the thread of their endpoint, which
    sleeps while none of them has anything queued and ends once its last sink has closed."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.pid = os.getpid()
        self.wake = threading.Event()
        self.cut = threading.Event()  # cuts the gather wait short: a sink is closing
        self._lock = threading.Lock()
        self._sinks: weakref.WeakSet[OtelSink] = weakref.WeakSet()  # a sink dropped unclosed goes too
        _quiet_exporter_logs()
        self.thread = threading.Thread(target=self._run, name=_THREAD_NAME, daemon=True)
        self.thread.start()

    def add(self, sink: OtelSink) -> None:
        with self._lock:
            self._sinks.add(sink)

    def _run(self) -> None:
        _RETRYING.discard(threading.get_ident())  # a dead thread's ident, given to this one, is not it
        while True:
            with _WORKER_LOCK, self._lock:
                # Under the registry's lock, so a sink cannot be handed this worker as it leaves.
                if not self._sinks and not self.wake.is_set():
                    if _WORKERS.get(self.key) is self:
                        del _WORKERS[self.key]
                    return
            self.wake.wait()
            self.wake.clear()
            with self._lock:
                sinks = list(self._sinks)
            if not any(s._closed for s in sinks):
                gather = min((s.GATHER_S for s in sinks if s._queue), default=0.0)
                if gather > 0:
                    self.cut.wait(gather)
            self.cut.clear()
            for sink in sinks:
                closing = sink._closed  # read before draining: what was queued by then is all there is
                try:
                    if closing:
                        sink._end_session()
                    elif sink._queue:
                        sink._drain()
                except Exception:
                    sink.errors += 1
                if closing:
                    with self._lock:
                        self._sinks.discard(sink)
                    sink._done.set()
            del sinks


_WORKERS: dict[str, _ExportWorker] = {}  # by endpoint (exporter_url)
_WORKER_LOCK = threading.Lock()


def _export_worker(sink: OtelSink) -> _ExportWorker:
    """The export thread of `sink`'s endpoint, started when a sink of it first has something to send,
    with the sink added to it. A forked child does not have its parent's threads (only their objects):
    it gets its own. An exporter that names no endpoint (a test's in-memory one) is an endpoint of its
    own: nothing says two of them share a receiver."""
    endpoint = getattr(sink.emitter.exporter, "_endpoint", None)
    key = str(endpoint) if endpoint else f"{type(sink.emitter.exporter).__name__}@{id(sink.emitter.exporter):x}"
    with _WORKER_LOCK:
        worker = _WORKERS.get(key)
        if worker is None or worker.pid != os.getpid():
            worker = _WORKERS[key] = _ExportWorker(key)
        worker.add(sink)
        return worker


# Sinks not yet closed. An agent that ends without Pipeline.close() (a script that returns, sys.exit)
# lost every span still queued or batched: the export thread is a daemon, stopped mid-wait at exit, so a
# short session reached the receiver with none of its calls and nothing said so. At exit each open sink
# is closed, all of them within one EXIT_TIMEOUT_S. Weak: a sink dropped unclosed is not kept alive.
_OPEN: weakref.WeakSet[OtelSink] = weakref.WeakSet()
EXIT_TIMEOUT_S = 5.0


@atexit.register
def _close_open_sinks() -> None:
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    # A forked child inherits its parent's open sinks (and their queues, not their threads): closing
    # them there would send the parent's spans twice and warn about spans that are not the child's.
    sinks = [sink for sink in list(_OPEN) if sink._pid == os.getpid()]
    # Every close is started before any is waited for, so each endpoint's thread sends its sessions'
    # ends at once: one after another, a slow endpoint's wait came first and left the others 0.1 s.
    started = [sink for sink in sinks if sink._start_close()]
    for sink in started:
        sink._finish_close(max(0.1, deadline - time.monotonic()))


def export_events(events: Iterable[Mapping[str, Any]], header: Mapping[str, Any], emitter: SpanEmitter,
                  *, content: bool = False, redact: bool = False,
                  blob_lookup: Callable[[str], str | None] | None = None) -> int:
    """Export a recorded session through `emitter`: a span per model call, then the session's
    invoke_agent span (their parent). Returns the number of model-call spans (the invoke_agent span,
    sent when there was a call, comes on top). `blob_lookup`: a text by its hash, from the recording
    (RecordingReader.blob), for the content fold's texts it let go (see FoldTexts)."""
    fold = SessionFold(str(header.get("provider") or "") or None, content=content, redact=redact,
                       model=str(header.get("model") or "") or None, blob_lookup=blob_lookup)
    n = 0
    for ev in events:
        data = fold.take(ev)
        if data is not None:
            emitter.emit(data)
            n += 1
    agent = fold.agent()
    if agent is not None:
        emitter.emit(agent)
    return n
