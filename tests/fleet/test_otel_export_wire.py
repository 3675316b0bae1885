"""The export over the real OTLP/HTTP wire: Pipeline(otel=True) driven by the standard environment
variable, and `cp-inspect export FILE --otlp URL`, received and decoded as protobuf."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the otel extra is not installed")

from engine import Pipeline  # noqa: E402

from .otlp_receiver import OtlpReceiver  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo_sessions" / "scout-openai.cpsession"


def test_pipeline_exports_when_the_standard_variable_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        pipe.identity("You are careful.")
        pipe.user("Fix it.")
        for i in range(3):
            req = pipe.next_request()
            pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 12,
                               "prompt_tokens_details": {"cached_tokens": 64 * i}})
            pipe.assistant(f"step {i}")
            pipe.user("go on")
        pipe.close()  # flushes the batch
        spans = sorted(rx.calls, key=lambda s: s["attributes"]["contextpipe.turn"])
    assert [s["attributes"]["contextpipe.turn"] for s in spans] == [0, 1, 2]
    assert spans[2]["attributes"]["gen_ai.usage.cache_read.input_tokens"] == 128
    assert spans[0]["attributes"]["gen_ai.provider.name"] == "openai"
    assert spans[0]["scope"] == "contextpipe"
    assert spans[0]["resource"]["service.name"] == "contextpipe"


def test_export_command_sends_every_turn_of_a_recording() -> None:
    from engine.recording.cpsession import RecordingReader

    with RecordingReader.open(DEMO) as r:
        turns = r.turn_count
    assert turns >= 30
    with OtlpReceiver() as rx:
        out = subprocess.run([sys.executable, "-m", "inspector.cli", "export", str(DEMO), "--otlp", rx.url],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert f"exported {turns} model-call spans" in out.stdout
        assert len(rx.calls) == turns
        assert len({s["trace_id"] for s in rx.calls}) == 1


def test_export_to_a_closed_port_says_so(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "inspector.cli", "export", str(DEMO), "--otlp",
                          "http://127.0.0.1:9", "--timeout", "2"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert "127.0.0.1:9" in (out.stderr + out.stdout)
