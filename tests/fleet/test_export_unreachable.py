"""`cp-inspect export --otlp URL` with nothing listening there: one line at once, not the SDK's backoff.

The OTLP exporter retries a refused connection (1 s, 2 s, 4 s within its timeout): the command took
~7-9 s before saying it failed. A refused port or an unknown host is said before any file is read."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from inspector.otlp_reach import unreachable

from .otlp_receiver import OtlpReceiver

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def _closed_port() -> int:
    """A port nothing listens on: bound, then closed (the kernel refuses connections to it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _export(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["PYTHONPATH"] = str(ROOT)
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", code, "export", *args], capture_output=True, text=True, env=env, timeout=60
    )
    return out, time.monotonic() - started


def test_a_refused_connection_is_one_line_at_once() -> None:
    port = _closed_port()
    out, took = _export(str(DEMO), "--otlp", f"http://127.0.0.1:{port}")
    assert out.returncode == 1, out.stderr
    assert out.stderr == (
        f"cp-inspect: the OTLP endpoint http://127.0.0.1:{port}/v1/traces refused the connection (nothing "
        f"listens on 127.0.0.1 port {port}): start a collector there, or give its address with --otlp; "
        "nothing was sent\n"
    )
    assert out.stdout == ""
    # The SDK's backoff alone is 1 + 2 + 4 s; the process itself starts in well under a second.
    assert took < 4.0, f"export took {took:.1f} s to say the collector refused"


def test_a_host_that_does_not_resolve_is_one_line() -> None:
    assert unreachable("http://no-such-host.invalid:4318/v1/traces") == (
        "names a host that does not resolve ('no-such-host.invalid')"
    )


def test_a_listening_collector_still_gets_the_spans() -> None:
    with OtlpReceiver() as rx:
        assert unreachable(rx.url) is None
        out, _ = _export(str(DEMO), "--otlp", rx.url)
        assert out.returncode == 0, out.stderr
        assert rx.spans
    assert "exported " in out.stdout


def test_what_the_check_cannot_judge_is_left_to_the_exporter() -> None:
    assert unreachable("localhost:4317") is None  # gRPC's host:port
    assert unreachable("http://127.0.0.1:notaport/v1/traces") is None
