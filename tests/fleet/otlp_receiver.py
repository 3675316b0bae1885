"""A minimal OTLP/HTTP trace receiver for tests: accepts the real exporter's protobuf posts on any path
and keeps every span as a flat dict (name, trace id, times, kind, status, attributes, events) and every
post's path. It can also misbehave as collectors do: answer slowly (`delay_s`; or not until the test sets
`hold`, an Event, so a test that needs a batch in flight waits for no clock), or refuse with a status
and a Retry-After (`status`, `retry_after`), or refuse a post larger than `max_body` bytes with 413, as
the OpenTelemetry Collector's OTLP/HTTP receiver does past its max_request_body_size (20 MiB by default;
gRPC receivers refuse past 4 MiB). `sizes` holds every post's body size."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


class OtlpReceiver:
    def __init__(
        self,
        *,
        delay_s: float = 0.0,
        status: int = 200,
        retry_after: int | None = None,
        max_body: int | None = None,
        hold: threading.Event | None = None,
    ) -> None:
        self.spans: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.sizes: list[int] = []
        self.max_body = max_body
        self.delay_s = delay_s
        self.hold = hold
        self.status = status
        self.retry_after = retry_after
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    receiver.paths.append(self.path)
                    receiver.sizes.append(len(body))
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                if receiver.hold is not None:
                    receiver.hold.wait(60.0)  # (bounded: a test that fails before it sets hold ends)
                too_large = receiver.max_body is not None and len(body) > receiver.max_body
                if receiver.status != 200 or too_large:
                    self.send_response(413 if too_large else receiver.status)
                    if receiver.retry_after is not None:
                        self.send_header("Retry-After", str(receiver.retry_after))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                with receiver.lock:
                    for rs in req.resource_spans:
                        resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
                        for ss in rs.scope_spans:
                            for span in ss.spans:
                                receiver.spans.append(
                                    {
                                        "name": span.name,
                                        "trace_id": span.trace_id.hex(),
                                        "span_id": span.span_id.hex(),
                                        "parent_span_id": span.parent_span_id.hex(),
                                        "start_ns": span.start_time_unix_nano,
                                        "end_ns": span.end_time_unix_nano,
                                        "kind": span.kind,
                                        "status": (span.status.code, span.status.message),
                                        "attributes": {kv.key: _value(kv.value) for kv in span.attributes},
                                        "events": [
                                            (e.name, {kv.key: _value(kv.value) for kv in e.attributes})
                                            for e in span.events
                                        ],
                                        "resource": resource,
                                        "scope": ss.scope.name,
                                    }
                                )
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The model calls' spans (kind CLIENT), without each session's invoke_agent span (INTERNAL)."""
        with self.lock:
            return [s for s in self.spans if s["kind"] == 3]

    @property
    def agents(self) -> list[dict[str, Any]]:
        """Each session's invoke_agent span."""
        with self.lock:
            return [s for s in self.spans if s["name"].startswith("invoke_agent")]

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
