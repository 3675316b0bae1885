"""OpenTelemetry export with the official SDK: one span per model call, one trace per session, the calls
under the session's invoke_agent span (see engine.export.spans).

    sink = OtelSink(header, endpoint="http://localhost:4318")   # or OTEL_EXPORTER_OTLP_ENDPOINT
    pipeline.journal.subscribe(sink)                             # Pipeline(otel=True) does this

The agent's thread only appends each journal event to a queue bounded in bytes; an export thread per
endpoint folds them into spans and exports them in batches, and a full queue drops events rather than
waiting. The endpoint, protocol and timeout follow the OTEL_EXPORTER_OTLP_* variables as the OTLP
exporter specification defines them. The SDK is imported lazily, so `import engine` never needs it.

Here: the sink (`OtelSink`) and its export threads, the SDK span emitter (`SpanEmitter`) and the export
of a recorded session (`export_events`); the fold of journal events into spans is `session_fold`, the
endpoint and the SDK's exporter `otlp_exporter`.
"""

from __future__ import annotations

import atexit
import logging
import os
import random
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from engine.export.otlp_exporter import _sdk, exporter_url, make_exporter
from engine.export.session_fold import SessionFold
from engine.export.spans import (
    SpanData,
    error_type,
)
from engine.wording import counted

SCOPE = "contextpipe"


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

    def __init__(
        self,
        exporter: Any = None,
        *,
        endpoint: str | None = None,
        batch: bool = True,
        service_name: str = "contextpipe",
    ) -> None:
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
        context = SpanContext(
            data.trace_id, data.span_id or random.getrandbits(64) or 1, is_remote=False, trace_flags=flags
        )
        parent = None
        if data.parent_span_id:
            parent = SpanContext(data.trace_id, data.parent_span_id, is_remote=False, trace_flags=flags)
        span = ReadableSpan(
            data.name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=attributes,
            events=[Event(name, attrs, when) for name, when, attrs in data.events],
            kind=SpanKind.INTERNAL if data.kind == "internal" else SpanKind.CLIENT,
            status=status,
            start_time=data.start_ns,
            end_time=data.end_ns,
            instrumentation_scope=self.scope,
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

    def __init__(
        self,
        header: Mapping[str, Any],
        *,
        endpoint: str | None = None,
        exporter: Any = None,
        content: bool = False,
        redact: bool = False,
        threaded: bool = True,
    ) -> None:
        """`threaded=False` exports each span as its turn ends, on the caller's thread (tests)."""
        self.emitter = SpanEmitter(exporter, endpoint=endpoint, batch=True)
        self.fold = SessionFold(
            str(header.get("provider") or "") or None,
            content=content,
            redact=redact,
            model=str(header.get("model") or "") or None,
        )
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
                    if waited >= timeout_s or (
                        worker.thread.ident in _RETRYING and waited >= RETRYING_GRACE_S
                    ):
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
                parts.append(
                    f"{self.lost} of {counted(self.turns, 'span')} did not reach "
                    f"{exporter_url(self.emitter.exporter)} ({self.emitter.failed_calls} refused or "
                    f"timed out, {max(0, self.lost - self.emitter.failed_calls)} unsent when the "
                    "session closed); "
                    "is a collector listening there?"
                )
            if self.dropped:
                parts.append(
                    f"{self.dropped} journal events were dropped while the export queue was full "
                    f"(it holds {self.MAX_QUEUE_BYTES // 2**20} MiB: the receiver was slower than "
                    "the agent), so some spans lack their usage or times"
                )
            # (3: the caller of close(), whose _finish_close this is.)
            warnings.warn("OpenTelemetry export: " + "; ".join(parts), RuntimeWarning, stacklevel=3)


# Rough bytes a queued event holds, by kind (deep sizes measured on a real engine turn: a turn's trace
# ~14-16 KB, a request ~1.3 KB plus its sections, the rest about 1 KB); a blob adds its text. An estimate
# taken in O(1) on the agent's thread: sizing the event itself would cost more than queuing it.
_KIND_BYTES = {
    "turn": 16_384,
    "session": 4_096,
    "request": 2_048,
    "msg": 1_536,
    "source": 1_536,
    "content": 1_536,
}


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
    key = (
        str(endpoint) if endpoint else f"{type(sink.emitter.exporter).__name__}@{id(sink.emitter.exporter):x}"
    )
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


def export_events(
    events: Iterable[Mapping[str, Any]],
    header: Mapping[str, Any],
    emitter: SpanEmitter,
    *,
    content: bool = False,
    redact: bool = False,
    blob_lookup: Callable[[str], str | None] | None = None,
) -> int:
    """Export a recorded session through `emitter`: a span per model call, then the session's
    invoke_agent span (their parent). Returns the number of model-call spans (the invoke_agent span,
    sent when there was a call, comes on top). `blob_lookup`: a text by its hash, from the recording
    (RecordingReader.blob), for the content fold's texts it let go (see FoldTexts)."""
    fold = SessionFold(
        str(header.get("provider") or "") or None,
        content=content,
        redact=redact,
        model=str(header.get("model") or "") or None,
        blob_lookup=blob_lookup,
    )
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
