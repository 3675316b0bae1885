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


def test_reasoning_tokens_are_exported_as_the_conventions_name_them(tmp_path: Path) -> None:
    """gen_ai.usage.reasoning.output_tokens (Recommended when applicable): the reasoning part of the
    output that OpenAI and DeepSeek report in completion_tokens_details was dropped when the usage was
    read, so no span carried it. Two calls of deepseek-reasoner through
    the tap (one reply whole, one streamed), the recording exported with `cp-inspect export`."""
    import openai

    from engine.capture.tap import tap
    from tests.capture.standin import USAGE_DEEPSEEK, StandIn

    reasoning = USAGE_DEEPSEEK["completion_tokens_details"]["reasoning_tokens"]
    rec = tmp_path / "t.cpsession"
    standin = StandIn().start()
    try:
        client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec)
        msgs: list[dict[str, str]] = [{"role": "user", "content": "Reason."}]
        client.chat.completions.create(model="deepseek-reasoner", messages=msgs)  # type: ignore[arg-type]
        msgs += [{"role": "assistant", "content": "Hello from the stand-in."}, {"role": "user", "content": "Again."}]
        list(client.chat.completions.create(model="deepseek-reasoner", messages=msgs,  # type: ignore[arg-type]
                                            stream=True, stream_options={"include_usage": True}))
        client.contextpipe_tap.close()
        assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    finally:
        standin.stop()
    with OtlpReceiver() as rx:
        out = subprocess.run([sys.executable, "-m", "inspector.cli", "export", str(rec), "--otlp", rx.url],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        calls = sorted(rx.calls, key=lambda s: s["attributes"]["contextpipe.turn"])
        (agent,) = rx.agents
    key = "gen_ai.usage.reasoning.output_tokens"
    got = [s["attributes"].get(key) for s in calls]
    assert got == [reasoning, reasoning], got  # the reply, and the streamed one's final chunk
    assert agent["attributes"][key] == 2 * reasoning
    assert all(s["attributes"]["gen_ai.usage.output_tokens"] >= s["attributes"][key] for s in calls)


def test_an_in_process_export_leaves_the_sdk_logging_as_it_found_it() -> None:
    """`export` quiets the OpenTelemetry SDK's per-attempt log lines while it runs. It left the
    "opentelemetry" logger at CRITICAL for the rest of the process: run in-process (a Python caller, the
    test suite), every later OtelSink lost the SDK's retry records it reads to tell a receiver that is
    down (tests/fleet/test_otel_failures.py failed after tests/capture/test_fold_texts.py's export)."""
    import logging

    from typer.testing import CliRunner

    from inspector.cli import app

    sdk_log = logging.getLogger("opentelemetry")
    before = sdk_log.level
    sdk_log.setLevel(logging.INFO)
    try:
        with OtlpReceiver() as rx:
            res = CliRunner().invoke(app, ["export", str(DEMO), "--otlp", rx.url])
        assert res.exit_code == 0, res.output
        assert sdk_log.level == logging.INFO
        res = CliRunner().invoke(app, ["export", str(DEMO), "--otlp", "http://127.0.0.1:9", "--timeout", "1"])
        assert res.exit_code != 0  # nothing listens there: the command fails, and still restores the level
        assert sdk_log.level == logging.INFO
    finally:
        sdk_log.setLevel(before)
