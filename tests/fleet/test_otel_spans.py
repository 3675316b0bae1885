"""OpenTelemetry export: one span per model call with the GenAI attributes and the engine's own, through
the real SDK (its in-memory exporter), from a live Pipeline and from a recording, with equal figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed: pip install -e '.[otel]'")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from engine import Pipeline  # noqa: E402
from engine.export.optin import otel_requested  # noqa: E402
from engine.export.otel import OtelSink, SpanEmitter, export_events  # noqa: E402
from engine.export.otlp_exporter import traces_url  # noqa: E402
from engine.recording.cpsession import RecordingReader  # noqa: E402
from engine.recording.journal import unpack_event  # noqa: E402
from engine.sim.pricing import usage_cost  # noqa: E402
from engine.sim.simulate import SimSettings, simulate_events  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
SECRET = "PLANTED-SECRET-7731"


def _session(pipe: Pipeline, turns: int = 4) -> None:
    pipe.identity(f"You are careful. {SECRET}")
    pipe.goal("Fix the bug.")
    pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user(f"It fails. {SECRET}")
    for i in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"] // 2, "cache_read_input_tokens": 100 * i,
                           "cache_creation_input_tokens": 50, "output_tokens": 30, "stop_reason": "tool_use"})
        calls = pipe.assistant("Looking.", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": '{"cmd":"ls"}'}])
        pipe.tool_result(calls[0].id, f"file{i}.py\n" * 40)


def _live_spans(content: bool = False, redact: bool = False) -> tuple[list[Any], Pipeline]:
    exporter = InMemorySpanExporter()
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=6000)
    sink = OtelSink({"provider": "anthropic"}, exporter=exporter, threaded=False, content=content, redact=redact)
    for ev in pipe.journal.events:
        sink(ev)
    pipe.journal.subscribe(sink)
    _session(pipe)
    pipe.close()
    sink.close()
    assert sink.errors == 0
    return _calls(exporter), pipe


def _calls(exporter: InMemorySpanExporter) -> list[Any]:
    """The model calls' spans, without the session's invoke_agent span (exported last, on close)."""
    from opentelemetry.trace import SpanKind

    return [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CLIENT]


def test_one_span_per_model_call_with_genai_and_engine_attributes() -> None:
    spans, pipe = _live_spans()
    assert [s.attributes["contextpipe.turn"] for s in spans] == [0, 1, 2, 3]
    assert len({s.context.trace_id for s in spans}) == 1, "a session is one trace"
    first = spans[1].attributes
    assert spans[1].name == "chat claude-sonnet-4"
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "anthropic"
    assert first["gen_ai.request.model"] == "claude-sonnet-4"
    # Anthropic's input_tokens is the uncached part; the convention's input_tokens is the whole prompt.
    assert first["gen_ai.usage.cache_read.input_tokens"] == 100
    assert first["gen_ai.usage.cache_creation.input_tokens"] == 50
    assert first["gen_ai.usage.input_tokens"] == spans[1].attributes["contextpipe.tokens.sent"] // 2 + 150
    assert first["gen_ai.usage.output_tokens"] == 30
    assert first["contextpipe.tier"] in ("Normal", "TrimSchemas", "CompactHistory", "AggressivePrune")
    assert 0 < first["contextpipe.pressure.raw"] < 5
    assert first["contextpipe.section.identity.tokens"] > 0
    assert first["contextpipe.cost.usd"] > 0
    assert "gen_ai.input.messages" not in first, "prompt text is exported only when asked"


def test_cost_attribute_equals_simulate_actual_for_a_recording() -> None:
    reader = RecordingReader.open(DEMO)
    events = [unpack_event(ev) for _, ev in reader.event_frames()]
    exporter = InMemorySpanExporter()
    emitter = SpanEmitter(exporter, batch=False)
    n = export_events(events, reader.header, emitter)
    emitter.close()
    spans = _calls(exporter)
    assert n == len(spans) == len(reader.turn_numbers())
    report = simulate_events(events, SimSettings())
    actual = {f.turn: f for f in report.policies["actual"].turns}
    checked = 0
    for s in spans:
        turn = s.attributes["contextpipe.turn"]
        if turn in actual:
            assert s.attributes["contextpipe.cost.usd"] == pytest.approx(actual[turn].cost_usd, abs=1e-9)
            assert s.attributes["gen_ai.usage.cache_read.input_tokens"] == actual[turn].cache_read_tokens
            checked += 1
    assert checked >= 10
    alerts = [e for s in spans for e in s.events if e.name == "contextpipe.alert"]
    assert alerts, "the demo session raises alerts; they travel as span events"


def test_live_and_recorded_exports_of_one_session_share_the_trace_id(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    path = tmp_path / "s.cpsession"
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=6000, record=path, clock=lambda: 1000.0)
    sink = OtelSink({"provider": "anthropic"}, exporter=exporter, threaded=False)
    for ev in pipe.journal.events:
        sink(ev)
    pipe.journal.subscribe(sink)
    _session(pipe, turns=2)
    pipe.close()
    sink.close()
    live = exporter.get_finished_spans()
    reader = RecordingReader.open(path)
    again = InMemorySpanExporter()
    emitter = SpanEmitter(again, batch=False)
    export_events((unpack_event(e) for _, e in reader.event_frames()), reader.header, emitter)
    emitter.close()
    assert {s.context.trace_id for s in live} == {s.context.trace_id for s in again.get_finished_spans()}
    assert [dict(s.attributes) for s in live] == [dict(s.attributes) for s in again.get_finished_spans()]


def test_content_only_when_asked_and_never_under_redaction() -> None:
    spans, _ = _live_spans(content=True)
    assert SECRET in spans[-1].attributes["gen_ai.input.messages"]
    redacted, _ = _live_spans(content=True, redact=True)
    for s in redacted:
        for value in s.attributes.values():
            assert SECRET not in str(value)
        for e in s.events:
            assert "message" not in e.attributes


def test_a_failing_exporter_never_reaches_the_agent() -> None:
    class Broken(InMemorySpanExporter):
        def export(self, spans: Any) -> Any:
            raise RuntimeError("collector exploded")

    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=6000)
    sink = OtelSink({"provider": "anthropic"}, exporter=Broken(), threaded=False)
    pipe.journal.subscribe(sink)
    _session(pipe, turns=2)  # would raise if the sink let the error through
    pipe.close()
    sink.close()


def test_opt_in_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert otel_requested(None) is False
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert otel_requested(None) is True
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert otel_requested(None) is False
    assert otel_requested(True) is True
    assert traces_url("http://h:4318/") == "http://h:4318/v1/traces"
    assert traces_url("http://h:4318/v1/traces") == "http://h:4318/v1/traces"


def test_usage_cost_unknown_model_is_none() -> None:
    assert usage_cost("no-such-model-xyz", {"input_tokens": 10, "output_tokens": 1}) is None


def test_long_content_is_valid_json_and_keeps_the_newest_messages() -> None:
    """gen_ai.input.messages is JSON (semantic-conventions docs/gen-ai/gen-ai-spans.md, the input messages
    schema). Past 64 KiB it was cut mid-string: invalid JSON a backend cannot parse, and it kept the
    session's oldest messages, so every later call showed the same first 64 KiB and never its own prompt."""
    import json

    from engine.export.spans import CONTENT_CAP

    exporter = InMemorySpanExporter()
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000)
    sink = OtelSink({"provider": "anthropic"}, exporter=exporter, threaded=False, content=True)
    for ev in pipe.journal.events:
        sink(ev)
    pipe.journal.subscribe(sink)
    pipe.identity("You are careful.")
    for i in range(12):
        pipe.user(f"request {i}: " + "x" * 9000)
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 3})
        pipe.assistant(f"answer {i}")
    pipe.close()
    sink.close()
    last = _calls(exporter)[-1].attributes["gen_ai.input.messages"]
    assert len(last) <= CONTENT_CAP
    messages = json.loads(last)  # valid JSON, however long the session
    assert messages[-1]["role"] == "user" and messages[-1]["parts"][0]["content"].startswith("request 11: ")
    assert _calls(exporter)[-1].attributes["contextpipe.input.messages_omitted"] > 0


def _recorded_spans(strip: tuple[str, ...]) -> list[Any]:
    """A live session's journal exported as a recording is, less `time` on the event kinds in `strip`."""
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=8000)
    _session(pipe, turns=3)
    events = [{k: v for k, v in ev.items() if not (k == "time" and ev.get("k") in strip)}
              for ev in pipe.journal.events]
    exporter = InMemorySpanExporter()
    emitter = SpanEmitter(exporter, batch=False)
    export_events(events, {"provider": "anthropic"}, emitter)
    emitter.close()
    return list(exporter.get_finished_spans())


def test_spans_without_a_recorded_duration_say_so() -> None:
    """A recording from before usage events had a time, or an import of a log without per-event times,
    exported every call as a zero-length span with nothing to tell it from a call that took no time: a
    trace viewer showed a lie. Those spans now carry contextpipe.timing, and the session's span counts them."""
    timed = _recorded_spans(())
    assert all("contextpipe.timing" not in s.attributes for s in timed), "a recording with times is not marked"

    old = _recorded_spans(("usage", "error"))
    calls = [s for s in old if s.kind.name == "CLIENT"]
    assert calls and all(s.end_time == s.start_time for s in calls)
    assert {s.attributes["contextpipe.timing"] for s in calls} == {"no_end"}
    agent = next(s for s in old if s.name == "invoke_agent")
    assert agent.attributes["contextpipe.timing"] == "no_end"
    assert agent.attributes["contextpipe.timing.calls"] == len(calls)

    imported = _recorded_spans(("usage", "error", "request"))
    calls = [s for s in imported if s.kind.name == "CLIENT"]
    assert {s.attributes["contextpipe.timing"] for s in calls} == {"no_times"}
    assert all(s.start_time > 0 for s in calls), "placed at the session's time, not at 1970"


def test_live_spans_are_not_marked() -> None:
    spans, _ = _live_spans()
    assert spans and all("contextpipe.timing" not in s.attributes for s in spans)


def _long_content_session(turns: int) -> list[Any]:
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=400_000)
    pipe.identity("You are careful.")
    pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user("Fix the bug.")
    for i in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 3})
        calls = pipe.assistant(f"step {i}", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": '{"cmd":"ls"}'}])
        pipe.tool_result(calls[0].id, f"out {i} " + "y" * 700)
        if i % 3 == 0:
            pipe.user(f"note {i} " + "z" * 300)
    pipe.close()
    return list(pipe.journal.events)


def test_content_of_a_long_session_is_folded_in_time_per_turn_that_does_not_grow() -> None:
    """gen_ai.input.messages was rebuilt from every content event of the session at every turn: a long
    session's export was quadratic (2,000 turns: 18 s to fold; the live sink's export thread does the
    same work, holding the GIL against the agent). Each turn's span now costs about the same, early or
    late, and says the same as before: the newest messages that fit, and how many older ones did not."""
    import statistics
    import time

    from engine.export.session_fold import SessionFold
    from engine.export.spans import fit_messages, messages_content

    events = _long_content_session(1200)
    fold = SessionFold("anthropic", content=True)
    per_turn: list[float] = []
    spans = []
    # This thread's CPU time, not the wall clock: a neighbour's load arriving late in the run would
    # lengthen the late turns' wall time alone.
    for ev in events:
        t0 = time.thread_time()
        data = fold.take(ev)
        if data is not None:
            per_turn.append(time.thread_time() - t0)
            spans.append(data)
    early, late = statistics.median(per_turn[10:210]), statistics.median(per_turn[-200:])
    assert late < 3 * early, (early, late)  # (it was ~7x at 1,200 turns, growing with the session)
    assert "out 1198 " in spans[-1].attributes["gen_ai.input.messages"]
    # the same attributes as the whole-session rebuild, at a few turns early and late
    seen: list[Any] = []
    turn = 0
    for ev in events:
        seen.append(ev)
        if ev.get("k") == "turn":
            if turn in (0, 1, 5, 40, 600, 1199):
                blobs = {e["h"]: e["data"] for e in seen if e.get("k") == "blob" and isinstance(e.get("data"), str)}
                text, omitted = fit_messages(messages_content(seen, blobs))
                attrs = spans[turn].attributes
                assert attrs["gen_ai.input.messages"] == text, turn
                assert attrs.get("contextpipe.input.messages_omitted", 0) == omitted, turn
            turn += 1
