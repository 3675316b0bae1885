"""The exporter as an SRE wires it: the OTEL_EXPORTER_OTLP_* variables as the OTLP exporter specification
defines them, span times that are the model call's, and a receiver that is slow, refusing or absent.
Everything goes over real sockets to the test receiver through the real SDK exporter."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the otel extra is not installed")

from engine import Pipeline  # noqa: E402
from engine.errors import ConfigError  # noqa: E402
from engine.export.otel import OtelSink  # noqa: E402

from .otlp_receiver import OtlpReceiver  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OTEL_VARS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_TRACES_EXPORTER",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in OTEL_VARS:
        monkeypatch.delenv(name, raising=False)
    yield


def _turns(pipe: Pipeline, n: int, call_s: float = 0.0) -> None:
    pipe.identity("You are careful.")
    pipe.user("Fix it.")
    for i in range(n):
        req = pipe.next_request()
        if call_s:
            time.sleep(call_s)
        pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 12})
        pipe.assistant(f"step {i}")
        pipe.user("go on")


def test_the_traces_endpoint_variable_is_used_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """exporter.md: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used without modification (a collector behind a
    path prefix, a vendor's ingest path); only the base variable gets v1/traces. The exporter appended
    /v1/traces to both, so every span went to a path the receiver does not serve."""
    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rx.url + "/otlp/ingest")
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        _turns(pipe, 2)
        pipe.close()
        assert set(rx.paths) == {"/otlp/ingest"}, rx.paths
        assert len(rx.calls) == 2
    with OtlpReceiver() as rx:
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url + "/collector")
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        _turns(pipe, 1)
        pipe.close()
        assert set(rx.paths) == {"/collector/v1/traces"}, rx.paths


def test_an_endpoint_without_a_scheme_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """`localhost:4318` was taken, then every export failed in requests (MissingSchema) behind one SDK log
    line per batch: the whole session's spans lost with no error the user would connect to the cause."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")
    with pytest.raises(ConfigError, match=r"OTEL_EXPORTER_OTLP_ENDPOINT.*http://"):
        Pipeline("gpt-4o", provider="openai", window=8000, otel=True)
    with pytest.warns(RuntimeWarning, match="OpenTelemetry export is off.*http://"):
        Pipeline("gpt-4o", provider="openai", window=8000).close()  # implied by the variable: a warning
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(ConfigError, match="http/json.*http/protobuf"):
        Pipeline("gpt-4o", provider="openai", window=8000, otel=True)


def test_the_timeout_variable_is_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """configuration/common.md: a Timeout is milliseconds. The Python exporters read the variable as
    seconds, so OTEL_EXPORTER_OTLP_TIMEOUT=500 waited 500 s for a batch; now it gives up after 0.5 s.
    The receiver holds the batch until the test ends (60 s at the most: then it answers), so the batch
    can only fail by the exporter's own timeout: read as 500 s, it would have been answered instead. No
    clock bound: a loaded machine only makes the 0.5 s longer, never turns the answer into a failure."""
    release = threading.Event()
    with OtlpReceiver(hold=release) as rx:
        try:
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
            pipe = Pipeline("gpt-4o", provider="openai", window=8000, otel=True)
            sink = pipe.otel
            sink.GATHER_S = 0.0
            _turns(pipe, 1)
            give_up = time.monotonic() + 90  # past the receiver's own 60 s hold: it has answered by then
            while sink.emitter.exported + sink.emitter.failed == 0 and time.monotonic() < give_up:
                time.sleep(0.05)
            assert sink.emitter.failed == 1 and sink.emitter.exported == 0, (
                "the batch should have timed out, not waited for the held receiver"
            )
            assert not rx.calls  # the receiver never answered it
        finally:
            release.set()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            pipe.close()


def test_a_span_lasts_as_long_as_the_model_call() -> None:
    """The span of a call started at its request and ended when its outcome (usage or error) was recorded;
    it was zero-length (the turn event carries no time), so a backend's latency view showed nothing."""
    with OtlpReceiver() as rx:
        pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=8000)
        sink = OtelSink({"provider": "anthropic"}, endpoint=rx.url)
        pipe.journal.subscribe(sink)
        for ev in pipe.journal.events:
            sink(ev)
        pipe.identity("You are careful.")
        pipe.user("hi")
        # Each call's span is checked against the wall-clock instants around its own request and outcome
        # (a fixed upper bound on its length was a bet on how long a loaded host oversleeps). The journal
        # keeps times as float seconds since 1970 (~0.2 us apart there): 1 us of rounding either way.
        before_ok = time.time_ns() - 1_000
        pipe.next_request()
        time.sleep(0.3)
        pipe.record_usage({"input_tokens": 100, "output_tokens": 5})
        after_ok = time.time_ns() + 1_000
        pipe.assistant("ok")
        pipe.user("more")
        before_failed = time.time_ns() - 1_000
        pipe.next_request()
        time.sleep(0.2)
        pipe.record_error("overloaded", "529 overloaded")
        after_failed = time.time_ns() + 1_000
        pipe.close()
        sink.close()
        spans = sorted(rx.calls, key=lambda s: s["attributes"]["contextpipe.turn"])
    assert len(spans) == 2
    ok, failed = spans
    assert 0.3 <= (ok["end_ns"] - ok["start_ns"]) / 1e9
    assert before_ok <= ok["start_ns"] <= ok["end_ns"] <= after_ok, (before_ok, ok, after_ok)
    assert 0.2 <= (failed["end_ns"] - failed["start_ns"]) / 1e9
    assert before_failed <= failed["start_ns"] <= failed["end_ns"] <= after_failed, (before_failed, failed)
    assert ok["end_ns"] <= failed["start_ns"], "the second call started after the first ended"
    assert ok["kind"] == 3 and failed["kind"] == 3  # SPAN_KIND_CLIENT
    assert (
        failed["status"][0] == 2 and failed["attributes"]["error.type"] == "overloaded"
    )  # STATUS_CODE_ERROR
    assert ok["status"][0] == 0


def test_close_waits_no_longer_than_its_timeout_for_a_slow_receiver_and_counts_the_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A receiver that sits on its batch: close(timeout_s=1) used to join for 1 s, then drain the rest on
    the agent's thread (another full export) alongside the still-running export thread, holding
    Pipeline.close() for the receiver's delay and more. What did not arrive was counted nowhere.
    The receiver holds the first batch until the test lets it go (after close() has returned; at most
    60 s, then it answers), and the exporter would wait 120 s for it: a close() that waited for the
    receiver returns only after the receiver answered, so it is told by the receiver's own record, not
    by a clock (how far past its 1 s a loaded machine makes close() is not the property)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "120000")
    release = threading.Event()
    with OtlpReceiver(hold=release) as rx:
        try:
            pipe = Pipeline("gpt-4o", provider="openai", window=8000)
            sink = OtelSink({"provider": "openai"}, endpoint=rx.url)
            sink.GATHER_S = 0.0
            pipe.journal.subscribe(sink)
            for ev in pipe.journal.events:
                sink(ev)
            _turns(pipe, 1)
            give_up = time.monotonic() + 60
            while not rx.paths and time.monotonic() < give_up:  # the first batch is now in flight
                time.sleep(0.02)
            assert rx.paths, "the receiver never got the first batch"
            _turns(pipe, 5)
            pipe.close()
            with pytest.warns(
                RuntimeWarning, match=rf"OpenTelemetry export: \d+ of 6 spans did not reach {rx.url}"
            ):
                sink.close(timeout_s=1.0)
            assert not rx.calls, "close() waited for the receiver's answer"
        finally:
            release.set()
    assert sink.turns == 6 and 1 <= sink.lost <= 6


def test_a_slow_endpoint_does_not_hold_another_endpoints_spans() -> None:
    """Every sink of the process shared one export thread: while it waited on a slow receiver, the spans
    of a session exporting to a healthy one waited too (a proxy with one slow tenant's collector delayed
    every tenant's). Each endpoint has its own thread now: the healthy endpoint's span arrives within
    GATHER_S (0.5 s) and its own receiver's answer, whatever the slow one does. The slow receiver sits on
    its batch until the test lets it go (after the healthy span has arrived) or for 60 s: a healthy span
    that waited behind the slow batch arrives only after the slow one is answered, which the test sees
    in the slow receiver's record, whatever the machine's load (no clock bound)."""
    release = threading.Event()
    with OtlpReceiver(hold=release) as slow_rx, OtlpReceiver() as fast_rx:
        try:
            slow_pipe = Pipeline("gpt-4o", provider="openai", window=8000)
            slow = OtelSink({"provider": "openai"}, endpoint=slow_rx.url)
            fast_pipe = Pipeline("gpt-4o", provider="openai", window=8000)
            fast = OtelSink({"provider": "openai"}, endpoint=fast_rx.url)
            for pipe, sink in ((slow_pipe, slow), (fast_pipe, fast)):
                for ev in pipe.journal.events:
                    sink(ev)
                pipe.journal.subscribe(sink)
            _turns(slow_pipe, 1)
            deadline = time.monotonic() + 5
            while not slow_rx.paths and time.monotonic() < deadline:  # the slow batch is in flight
                time.sleep(0.02)
            assert slow_rx.paths, "the slow receiver got its batch"
            _turns(fast_pipe, 1)
            give_up = time.monotonic() + 90  # past the slow receiver's 60 s hold
            while not fast_rx.calls and time.monotonic() < give_up:
                time.sleep(0.02)
            assert fast_rx.calls, "the healthy endpoint's span never arrived"
            assert not slow_rx.calls, "the healthy span arrived only once the slow batch was answered"
        finally:
            release.set()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for pipe, sink in ((slow_pipe, slow), (fast_pipe, fast)):
                pipe.close()
                sink.close(timeout_s=20.0)  # the slow batch arrives once it is let go
    assert sorted(s["attributes"]["contextpipe.turn"] for s in fast_rx.calls) == [0]
    assert sorted(s["attributes"]["contextpipe.turn"] for s in slow_rx.calls) == [0]


def test_a_receiver_that_refuses_is_retried_then_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """429 with Retry-After: the SDK retries within its budget; the spans it gave up on are reported."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2500")
    with OtlpReceiver(status=429, retry_after=1) as rx:
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        sink = OtelSink({"provider": "openai"}, exporter=None, endpoint=rx.url, threaded=False)
        for ev in pipe.journal.events:
            sink(ev)
        pipe.journal.subscribe(sink)
        _turns(pipe, 1)
        pipe.close()
        with pytest.warns(RuntimeWarning, match="1 of 1 span did not reach.*1 refused or timed out"):
            sink.close()
        assert len(rx.paths) >= 2, "a 429 with Retry-After is retried"


def test_the_service_name_comes_from_the_environment_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_SERVICE_NAME names the service (the SDK environment variables); "contextpipe" is only the
    fallback. The fixed name overrode it, so every agent of a fleet was one service in the backend."""
    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "billing-agent")
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod")
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        _turns(pipe, 1)
        pipe.close()
        monkeypatch.delenv("OTEL_SERVICE_NAME")
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        _turns(pipe, 1)
        pipe.close()
        first, second = rx.calls
    assert first["resource"]["service.name"] == "billing-agent"
    assert first["resource"]["deployment.environment"] == "prod"
    assert second["resource"]["service.name"] == "contextpipe"


AGENT_WITHOUT_CLOSE = """
from engine import Pipeline
pipe = Pipeline("gpt-4o", provider="openai", window=8000)
pipe.identity("You are careful.")
pipe.user("Fix it.")
for i in range(3):
    req = pipe.next_request()
    pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 12})
    pipe.assistant(f"step {i}")
    pipe.user("go on")
# no pipe.close(): the script just ends, as many agents do
"""


def _agent_env(endpoint: str) -> dict[str, str]:
    """This environment with the agent's OpenTelemetry export going to `endpoint` (and nowhere else)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, PYTHONPATH=str(ROOT))
    return env


def _run_agent(endpoint: str, script: str = AGENT_WITHOUT_CLOSE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script],
        env=_agent_env(endpoint),
        capture_output=True,
        text=True,
        timeout=120,  # (an exit that waited for spans with no bound ends the test here)
        cwd=ROOT,
    )


def test_an_agent_that_ends_without_close_still_exports_its_spans() -> None:
    """The export thread is a daemon: at exit it stopped mid-wait and the spans still queued were lost
    with no word (a three-call script delivered none). Open sinks are now closed at exit."""
    with OtlpReceiver() as rx:
        out = _run_agent(rx.url)
        assert out.returncode == 0, out.stderr
        assert sorted(s["attributes"]["contextpipe.turn"] for s in rx.calls) == [0, 1, 2]


def test_an_agent_that_ends_without_close_says_when_its_spans_were_lost() -> None:
    # The exit waits a bounded time for the receiver: an unbounded wait ends in _run_agent's timeout.
    out = _run_agent("http://127.0.0.1:9")  # nothing listens there
    assert out.returncode == 0, out.stderr
    assert "OpenTelemetry export: 3 of 3 spans did not reach http://127.0.0.1:9/v1/traces" in out.stderr, (
        out.stderr
    )


def test_traces_switched_off_by_the_standard_variable_are_not_exported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OTEL_TRACES_EXPORTER=none turns trace export off (SDK environment variables), e.g. in a process
    whose OTEL_EXPORTER_OTLP_ENDPOINT is there for its metrics and logs; the engine exported anyway."""
    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        assert pipe.otel is None
        _turns(pipe, 1)
        pipe.close()
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console,otlp")
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        _turns(pipe, 1)
        pipe.close()
        assert len(rx.calls) == 1


def test_timeout_zero_means_no_limit_and_a_bad_value_is_ignored_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """configuration/common.md, Timeout: 0 is no limit; a negative value is warned about and ignored."""
    from engine.export.otlp_exporter import resolve_timeout_s

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0")
    assert resolve_timeout_s() is not None and resolve_timeout_s() > 86400  # type: ignore[operator]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2500")
    assert resolve_timeout_s() == 2.5  # the signal's own variable wins
    for bad in ("-5", "ten"):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", bad)
        with pytest.warns(RuntimeWarning, match="OTEL_EXPORTER_OTLP_TRACES_TIMEOUT.*ignored"):
            assert resolve_timeout_s() is None


def test_the_grpc_protocol_variable_sends_over_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_EXPORTER_OTLP_PROTOCOL=grpc (exporter.md, "Specify Protocol"), to a collector's gRPC port: the
    exporter posted OTLP/HTTP protobuf there anyway, which a gRPC server cannot take."""
    grpc = pytest.importorskip("grpc")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    from concurrent import futures

    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    got: list[str] = []

    class Service(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (the gRPC service's naming)
            got.extend(
                span.name
                for rs in request.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
                if span.name != "invoke_agent"
            )
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        _turns(pipe, 2)
        pipe.close()
    finally:
        server.stop(0)
    assert got == ["chat gpt-4o", "chat gpt-4o"]


FORKING_AGENT = """
import os, sys
from engine import Pipeline
pipe = Pipeline("gpt-4o", provider="openai", window=8000)
pipe.identity("You are careful.")
pipe.user("Fix it.")
for i in range(3):
    req = pipe.next_request()
    pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 12})
    pipe.assistant(f"step {i}")
    pipe.user("go on")
child = os.fork()
if child == 0:
    sys.exit(0)  # a forked worker that ends normally: runs the atexit handlers it inherited
os.waitpid(child, 0)
pipe.close()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_leaves_its_parents_spans_alone() -> None:
    """The exit handler closed every open sink, a forked child's inherited ones too: the child warned
    that the parent's spans were lost (they were not; the parent sent them)."""
    with OtlpReceiver() as rx:
        out = _run_agent(rx.url, FORKING_AGENT)
        assert out.returncode == 0, out.stderr
        assert sorted(s["attributes"]["contextpipe.turn"] for s in rx.calls) == [0, 1, 2]
    assert "did not reach" not in out.stderr, out.stderr


def test_a_long_session_with_content_is_sent_in_posts_a_receiver_accepts() -> None:
    """Batches were 512 spans whatever their size: with content export (up to 64 KiB of prompt per span)
    a long session's recording went out in 32 MiB posts, past the Collector's OTLP/HTTP limit (20 MiB)
    and gRPC's (4 MiB), so each post was refused whole (413) and its 512 spans lost. Batches are now
    bounded in bytes too."""
    from engine.export.otel import SpanEmitter, export_events, make_exporter

    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000)
    pipe.identity("You are careful.")
    turns = 120
    for i in range(turns):
        pipe.user(f"request {i}: " + "x" * 9000)
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 3})
        pipe.assistant(f"answer {i}")
    pipe.close()
    limit = 4 * 2**20
    with OtlpReceiver(max_body=limit) as rx:
        emitter = SpanEmitter(make_exporter(rx.url, timeout_s=10), batch=True)
        sent = export_events(
            iter(list(pipe.journal.events)), {"provider": "anthropic"}, emitter, content=True
        )
        emitter.close()
        assert sent == turns
        assert emitter.failed == 0 and len(rx.calls) == turns and len(rx.agents) == 1, (
            emitter.failed,
            rx.sizes,
        )
        assert max(rx.sizes) <= limit and len(rx.sizes) > 1, rx.sizes


def test_a_refused_call_says_its_http_status_as_its_error_type() -> None:
    """error.type was the journal's error kind: "error" for every refusal the capture paths record (a
    429, a 529, a 400 alike). The conventions ask for the provider's code or a low-cardinality identifier;
    the status the provider answered with is both. Kinds that say more (overloaded, incomplete_stream)
    stay as they are; under redaction the status stays (it is no secret), the message goes."""
    messages = [
        ("error", 'HTTP 429 (retry-after: 7): {"error": {"message": "slow down"}}'),  # the proxy's
        ("error", "Error code: 529 - {'type': 'error', 'error': {'type': 'overloaded_error'}}"),  # an SDK's
        ("incomplete_stream", "the stream ended before message_stop (5 events)"),
        ("error", "the upstream was not reached"),
    ]
    for redact in (False, True):
        with OtlpReceiver() as rx:
            pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=8000)
            sink = OtelSink({"provider": "anthropic"}, endpoint=rx.url, threaded=False, redact=redact)
            for ev in pipe.journal.events:
                sink(ev)
            pipe.journal.subscribe(sink)
            pipe.identity("You are careful.")
            for kind, message in messages:
                pipe.user("go on")
                pipe.next_request()
                pipe.record_error(kind, message)
            pipe.close()
            sink.close()
            spans = sorted(rx.calls, key=lambda s: s["attributes"]["contextpipe.turn"])
        assert [s["attributes"]["error.type"] for s in spans] == ["429", "529", "incomplete_stream", "error"]
        assert all(s["status"][0] == 2 for s in spans)  # STATUS_CODE_ERROR
        if redact:
            assert all("slow down" not in s["status"][1] for s in spans)


def test_a_collector_that_is_down_costs_the_agent_no_noise_and_no_wait_at_close() -> None:
    """No collector where OTEL_EXPORTER_OTLP_ENDPOINT points: the SDK exporter logged every retry on the
    agent's stderr ("Transient error ... retrying in 2.11s", through Python's last-resort handler, into
    the agent's own output), and close() then waited out its whole timeout (5 s, at every exit) for
    spans that could not arrive. The loss is said once, in the one warning, and close() ends at once."""
    out = _run_agent("http://127.0.0.1:9")  # nothing listens there
    assert out.returncode == 0, out.stderr
    assert "Transient error" not in out.stderr and "retrying" not in out.stderr, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "OpenTelemetry export: 3 of 3 spans did not reach" in lines[0], out.stderr

    from engine.export import otel

    # A receiver that answers every attempt 503 (the SDK retries it as it does a refused connection) counts
    # the attempts: the SDK makes up to 6 (its backoffs 1, 2, 4, 8, 16 s, at least 24.8 s with jitter). A
    # close that waited the retries out would see them all made; one that ends at once (RETRYING_GRACE_S
    # after the retry is known) sees two at the most. Told by the receiver's count, not by a clock.
    with OtlpReceiver(status=503) as rx:
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        sink = OtelSink({"provider": "openai"}, endpoint=rx.url)
        for ev in pipe.journal.events:
            sink(ev)
        pipe.journal.subscribe(sink)
        _turns(pipe, 2)
        # This sink's own export thread met the refusal (_RETRYING is process-wide: another test's thread
        # still retrying would have ended the wait before this one got there).
        assert sink._worker is not None
        worker = sink._worker.thread
        give_up = time.monotonic() + 30
        while worker.ident not in otel._RETRYING and time.monotonic() < give_up:
            time.sleep(0.05)
        assert worker.ident in otel._RETRYING, "the exporter never retried"
        with pytest.warns(RuntimeWarning, match="2 of 2 spans did not reach"):
            sink.close(timeout_s=300.0)
        assert 1 <= len(rx.paths) < 6, rx.paths  # not every attempt: close did not wait for the retries
    pipe.close()
