"""`cp-inspect export --otlp URL` with nothing listening there: one line at once, not the SDK's backoff.

The OTLP exporter retries a refused connection (1 s, 2 s, 4 s within its timeout): the command took
~7-9 s before saying it failed. A refused port or an unknown host is said before any file is read.

"At once" is told by what is said, not by a clock: the line ending "nothing was sent" is the up-front
check's (inspector/fleet_cli.export exits with it before an exporter sends anything), so the SDK's
retries cannot have run. A clock bound (20 s, between a loaded start-up and the retries' 24.8 s at the
least) was thin on both sides on the CI's 2 shared cores at load up to 14. The commands run with a 60 s
exporter timeout (OTEL_EXPORTER_OTLP_TIMEOUT, ms), so a test that did reach the exporter would take its
retries' ~31-34 s."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from inspector.otlp_reach import unreachable, unreachable_grpc

from .otlp_receiver import OtlpReceiver

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def _closed_port() -> int:
    """A port nothing listens on: bound, then closed (the kernel refuses connections to it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _export(*args: str, protocol: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["PYTHONPATH"] = str(ROOT)
    env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "60000"  # (see the module's doc)
    env.pop("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", None)
    if protocol is not None:
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "export", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_a_refused_connection_is_one_line_at_once() -> None:
    port = _closed_port()
    out = _export(str(DEMO), "--otlp", f"http://127.0.0.1:{port}")
    assert out.returncode == 1, out.stderr
    assert out.stderr == (
        f"cp-inspect: the OTLP endpoint http://127.0.0.1:{port}/v1/traces refused the connection (nothing "
        f"listens on 127.0.0.1 port {port}): start a collector there, or give its address with --otlp; "
        "nothing was sent\n"
    )
    assert out.stdout == ""


def test_a_host_that_does_not_resolve_is_one_line() -> None:
    assert unreachable("http://no-such-host.invalid:4318/v1/traces") == (
        "names a host that does not resolve ('no-such-host.invalid')"
    )


def test_a_listening_collector_still_gets_the_spans() -> None:
    with OtlpReceiver() as rx:
        assert unreachable(rx.url) is None
        out = _export(str(DEMO), "--otlp", rx.url)
        assert out.returncode == 0, out.stderr
        assert rx.spans
    assert "exported " in out.stdout


def test_what_the_check_cannot_judge_is_left_to_the_exporter() -> None:
    assert unreachable("localhost:4317") is None  # gRPC's host:port (unreachable_grpc)
    assert unreachable("http://127.0.0.1:notaport/v1/traces") is None


# ------------------------------------------------------------------ gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc)
# The same fast failure over gRPC: before, a closed port was ~8.7 s of the gRPC exporter's retries and
# then "did not accept the spans (is a collector listening there?)".


def test_a_refused_grpc_connection_is_one_line_at_once() -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    port = _closed_port()
    out = _export(str(DEMO), "--otlp", f"http://127.0.0.1:{port}", protocol="grpc")
    assert out.returncode == 1, out.stderr
    assert out.stderr == (
        f"cp-inspect: the OTLP/gRPC endpoint 127.0.0.1:{port} refused the connection (nothing listens on "
        f"127.0.0.1 port {port}): start a collector there, or give its address with --otlp; nothing was sent\n"
    )
    assert out.stdout == ""


def test_a_listening_grpc_collector_still_gets_the_spans() -> None:
    """A real gRPC OTLP trace service (grpcio, the collector's protocol) on a free port."""
    grpc = pytest.importorskip("grpc")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    from concurrent import futures

    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    got: list[str] = []

    class Service(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (the gRPC service's naming)
            got.extend(s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        assert unreachable_grpc(f"127.0.0.1:{port}") is None
        out = _export(str(DEMO), "--otlp", f"http://127.0.0.1:{port}", protocol="grpc")
    finally:
        server.stop(0)
    assert out.returncode == 0, out.stderr
    assert "exported " in out.stdout and got


def test_grpc_targets_as_the_exporter_dials_them() -> None:
    port = _closed_port()
    refused = f"refused the connection (nothing listens on 127.0.0.1 port {port})"
    assert unreachable_grpc(f"127.0.0.1:{port}") == refused
    assert (
        unreachable_grpc("no-such-host.invalid:4317")
        == "names a host that does not resolve ('no-such-host.invalid')"
    )
    # gRPC's own resolvers' forms, and a bad port: the exporter judges them.
    for target in ("dns:///localhost:4317", "unix:///tmp/otlp.sock", "localhost:notaport", "localhost:99999"):
        assert unreachable_grpc(target) is None, target


def test_a_grpc_target_behind_a_proxy_is_left_to_the_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("grpc_proxy", "http://127.0.0.1:9")
    assert unreachable_grpc(f"example.com:{_closed_port()}") is None
