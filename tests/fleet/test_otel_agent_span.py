"""OpenTelemetry leftovers (probeotel23): a session's invoke_agent span as the parent of its calls, the
finish reasons replies carry, spans from a recording that last as long as their calls, a live queue
bounded by bytes with its drops in the one warning, one export thread for every session of a process,
and `report`'s one line for sessions whose model has no price. Real SDK exporter, real OTLP receiver
over real sockets, real trajectories where they are available."""

from __future__ import annotations

import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the otel extra is not installed")

from engine import Pipeline  # noqa: E402
from engine.export.otel import OtelSink  # noqa: E402
from tests.support.console_script import run_cp_inspect  # noqa: E402

from ..conftest import TRAJECTORIES as TRAJ  # noqa: E402
from .otlp_receiver import OtlpReceiver  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OTEL_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
             "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
             "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_EXPORTER")
SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT = 1, 3


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in OTEL_VARS:
        monkeypatch.delenv(name, raising=False)
    yield


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cp_inspect(*args)  # the console script, as installed


def _turns(pipe: Pipeline, n: int, call_s: float = 0.0) -> None:
    pipe.identity("You are careful.")
    pipe.user("Fix it.")
    for i in range(n):
        def call(body: object, i: int = i) -> dict[str, object]:
            if call_s:
                time.sleep(call_s)
            # An OpenAI Chat Completions reply, as the SDK's model_dump() gives it.
            return {"choices": [{"index": 0, "finish_reason": "tool_calls" if i < n - 1 else "stop",
                                 "message": {"role": "assistant", "content": f"step {i}"}}],
                    "usage": {"prompt_tokens": 500 + i, "completion_tokens": 12}}

        pipe.send(call)
        pipe.assistant(f"step {i}")
        pipe.user("go on")


def test_a_session_is_one_invoke_agent_span_over_its_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """gen-ai-agent-spans.md, "Invoke agent internal span": an agent run in this process is one
    `invoke_agent` span (kind INTERNAL) whose children are its model calls. The calls were parentless
    spans side by side, so a backend showed no agent, only loose calls."""
    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        pipe = Pipeline("gpt-4o", provider="openai", window=8000)
        _turns(pipe, 3, call_s=0.05)
        pipe.close()
        calls, agents = rx.calls, rx.agents
    assert len(calls) == 3 and len(agents) == 1
    (agent,) = agents
    assert agent["name"] == "invoke_agent" and agent["kind"] == SPAN_KIND_INTERNAL
    assert {c["trace_id"] for c in calls} == {agent["trace_id"]}
    assert agent["parent_span_id"] == ""  # the root
    assert {c["parent_span_id"] for c in calls} == {agent["span_id"]}
    a = agent["attributes"]
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.provider.name"] == "openai" and a["gen_ai.request.model"] == "gpt-4o"
    assert a["gen_ai.conversation.id"] == calls[0]["attributes"]["gen_ai.conversation.id"]
    assert a["gen_ai.usage.input_tokens"] == sum(c["attributes"]["gen_ai.usage.input_tokens"] for c in calls)
    assert a["gen_ai.usage.output_tokens"] == 36 and a["contextpipe.calls"] == 3
    assert a["gen_ai.response.finish_reasons"] == ["stop"]  # the last call's: why the agent's run ended
    assert agent["start_ns"] <= min(c["start_ns"] for c in calls)
    assert agent["end_ns"] == max(c["end_ns"] for c in calls)


def test_finish_reasons_are_exported_from_the_reply() -> None:
    """gen_ai.response.finish_reasons (Recommended) was read from the usage event, which never had it:
    the replies' stop reasons were dropped on every path."""
    with OtlpReceiver() as rx:
        pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=8000)
        sink = OtelSink({"provider": "anthropic"}, endpoint=rx.url)
        for ev in pipe.journal.events:
            sink(ev)
        pipe.journal.subscribe(sink)
        pipe.identity("You are careful.")
        pipe.user("hi")
        reply = {"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                 "content": [{"type": "text", "text": "ok"}],
                 "usage": {"input_tokens": 50, "output_tokens": 3, "cache_read_input_tokens": 0}}
        pipe.send(lambda body: reply)  # an Anthropic Messages reply, as the SDK's model_dump() gives it
        pipe.assistant("ok")
        pipe.user("more")
        openai_reply = {"choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant"}}],
                        "usage": {"prompt_tokens": 60, "completion_tokens": 9}}
        pipe.send(lambda body: openai_reply)
        pipe.close()
        sink.close()
        calls = sorted(rx.calls, key=lambda s: s["attributes"]["contextpipe.turn"])
    assert [c["attributes"]["gen_ai.response.finish_reasons"] for c in calls] == [["end_turn"], ["length"]]


@pytest.mark.skipif(not (TRAJ / "mini-swe-agent-pr816").is_dir(), reason="the shared trajectories are absent")
def test_an_imported_trajectory_exports_its_recorded_finish_reasons(tmp_path: Path) -> None:
    src = TRAJ / "mini-swe-agent-pr816" / "deepseek_chat_dev__pydicom__pydicom-1413.traj.json"
    rec = tmp_path / "t.cpsession"
    out = _cli("import", "mini-swe-agent", str(src), "-o", str(rec))
    assert out.returncode == 0, out.stderr
    with OtlpReceiver() as rx:
        out = _cli("export", str(rec), "--otlp", rx.url)
        assert out.returncode == 0, out.stderr
        calls = rx.calls
    reasons = [c["attributes"].get("gen_ai.response.finish_reasons") for c in calls]
    assert reasons and all(r is not None for r in reasons), reasons  # every reply says why it stopped
    assert {r[0] for r in reasons} <= {"tool_calls", "stop", "length"}


def test_spans_exported_from_a_recording_last_as_long_as_their_calls(tmp_path: Path) -> None:
    """`cp-inspect export` of a recording gave every span zero length (the recording kept no end): the
    usage and error events now carry the outcome's time."""
    rec = tmp_path / "s.cpsession"
    pipe = Pipeline("gpt-4o", provider="openai", window=8000, record=rec, serve=False)
    pipe.identity("You are careful.")
    pipe.user("hi")
    pipe.next_request()
    time.sleep(0.3)
    pipe.record_usage({"prompt_tokens": 100, "completion_tokens": 5})
    pipe.assistant("ok")
    pipe.user("more")
    pipe.next_request()
    time.sleep(0.2)
    pipe.record_error("overloaded", "529 overloaded")
    pipe.close()
    with OtlpReceiver() as rx:
        out = _cli("export", str(rec), "--otlp", rx.url)
        assert out.returncode == 0, out.stderr
        ok, failed = sorted(rx.calls, key=lambda s: s["attributes"]["contextpipe.turn"])
        agents = rx.agents
    assert 0.3 <= (ok["end_ns"] - ok["start_ns"]) / 1e9 < 1.5
    assert 0.2 <= (failed["end_ns"] - failed["start_ns"]) / 1e9 < 1.5
    (agent,) = agents
    assert agent["end_ns"] == failed["end_ns"] and agent["status"][0] == 2  # its last call failed


def test_the_live_queue_is_bounded_by_bytes_and_its_drops_are_in_the_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the receiver stuck, the queue held up to 50,000 events (~175 MB of turn traces) and what it
    dropped past that was said nowhere. Now it holds some 8 MiB and the close warning counts the drops."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "4000")  # the stuck batch gives up after 4 s
    with OtlpReceiver(delay_s=30.0) as rx:  # accepts the first batch and sits on it
        pipe = Pipeline("gpt-4o", provider="openai", window=8000, serve=False)
        sink = OtelSink({"provider": "openai"}, endpoint=rx.url)
        sink.GATHER_S = 0.0
        for ev in pipe.journal.events:
            sink(ev)
        pipe.journal.subscribe(sink)
        _turns(pipe, 1)
        deadline = time.monotonic() + 30
        while not rx.paths and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rx.paths, "the first batch never reached the receiver"
        _turns(pipe, 700)  # ~13 MB of events by the sink's estimate, while the export thread waits
        assert sink.dropped > 0  # (none before: 700 turns are some 2,100 events, under 50,000)
        assert sink._queued_bytes - sink._taken_bytes <= OtelSink.MAX_QUEUE_BYTES
        pipe.close()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sink.close(timeout_s=0.5)
        said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        # The export thread is the process's: let it give up on the stuck batch before the next test.
        assert sink._done.wait(15)
    assert len(said) == 1, said
    assert f"{sink.dropped} journal events were dropped while the export queue was full" in said[0]
    assert "spans did not reach" in said[0]


def _export_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "contextpipe-otel" and t.is_alive()]


def test_sessions_of_one_process_share_one_export_thread() -> None:
    """The proxy serves each conversation as a session with its own sink: each started its own export
    thread. Now one thread exports for all, and each session's spans still arrive."""
    # Export threads of other endpoints that earlier tests left running (one retrying a receiver that is
    # gone, say) are not this test's: only the threads started here are counted.
    before = set(_export_threads())
    with OtlpReceiver() as rx:
        pipes, sinks = [], []
        for _ in range(4):
            pipe = Pipeline("gpt-4o", provider="openai", window=8000, serve=False)
            sink = OtelSink({"provider": "openai"}, endpoint=rx.url)
            for ev in pipe.journal.events:
                sink(ev)
            pipe.journal.subscribe(sink)
            _turns(pipe, 2)
            pipes.append(pipe)
            sinks.append(sink)
        threads = [t for t in _export_threads() if t not in before]
        assert len(threads) == 1, threads
        for pipe, sink in zip(pipes, sinks, strict=True):
            pipe.close()
            sink.close()
        assert len(rx.calls) == 8 and len(rx.agents) == 4
        assert len({s["trace_id"] for s in rx.calls}) == 4
        assert all(sink.lost == 0 for sink in sinks)


def test_report_names_unpriced_models_in_one_line(tmp_path: Path) -> None:
    """Each session whose model has no price printed its own long warning (the whole price table's model
    list, every time): a fleet of one unpriced model was a screen of the same line."""
    for i, model in enumerate(["mystery-1", "mystery-1", "other-x", "gpt-4o"]):
        p = Pipeline(model, provider="openai", window=8000, record=tmp_path / f"s{i}.cpsession", serve=False)
        p.identity("You are careful.")
        p.user("hi")
        p.next_request()
        p.record_usage({"prompt_tokens": 100, "completion_tokens": 5})
        p.assistant("ok")
        p.close()
    out = _cli("report", str(tmp_path))
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr
    assert "skipped 3 sessions whose model has no price: mystery-1 (2), other-x (1)" in lines[0]
    assert "--model" in lines[0] and "Known models" not in lines[0]
    assert "TOTAL (1 session)" in out.stdout
