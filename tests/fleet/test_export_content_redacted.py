"""`cp-inspect export --content` under CONTEXTPIPE_REDACT=1: the environment wins (no prompt text leaves),
and the command says that the option it was given is not followed, over the real OTLP/HTTP wire."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the otel extra is not installed")

from .otlp_receiver import OtlpReceiver  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo_sessions" / "scout-openai.cpsession"


def _export(url: str, redact: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTPIPE_REDACT"}
    if redact:
        env["CONTEXTPIPE_REDACT"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "inspector.cli", "export", str(DEMO), "--otlp", url, "--content"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": str(ROOT)},
    )


def test_content_under_redact_is_said_and_not_sent() -> None:
    # The spans went out without the text and the command said nothing of the --content it was given.
    with OtlpReceiver() as rx:
        out = _export(rx.url, redact=True)
        assert out.returncode == 0 and out.stdout.startswith("exported "), out.stderr
        assert out.stderr == (
            "cp-inspect: warning: --content is ignored: CONTEXTPIPE_REDACT is set, which keeps prompt text out of every export\n"
        )
        assert rx.calls and not any("gen_ai.input.messages" in s["attributes"] for s in rx.calls)
    with OtlpReceiver() as rx:  # without it, the text goes, and nothing is said
        out = _export(rx.url, redact=False)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        assert all("gen_ai.input.messages" in s["attributes"] for s in rx.calls)
