"""The GenAI semantic conventions' request, response and server attributes on a captured call's span
(gen-ai-spans.md, "Inference"): gen_ai.request.max_tokens / temperature / top_p / stop_sequences /
seed / choice.count / stream, gen_ai.output.type, gen_ai.response.id / model / finish_reasons,
server.address / server.port. The capture paths knew them (the agent's request and the reply pass
through them) but journaled none, so no span had them: a backend could not tell a call at
temperature 0 from one at 1, find a reply by its id, or say which host served it. Now each captured
turn's trace keeps them, and the spans carry them, live (the proxy's sink and the tap's) and when the
recording is exported later. Real SDKs through the proxy and the tap, against the stand-in, received by
the test OTLP receiver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the otel extra is not installed")

from engine.capture.tap import tap  # noqa: E402
from engine.export.otel import SpanEmitter, export_events  # noqa: E402
from engine.recording.cpsession import RecordingReader  # noqa: E402
from tests.capture.conftest import Proxied, events_of  # noqa: E402
from tests.capture.standin import StandIn  # noqa: E402
from tests.fleet.otlp_receiver import OtlpReceiver  # noqa: E402


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
                 "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        yield rx


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def _chat_calls(client: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "system", "content": "You are careful."}, {"role": "user", "content": "Hi."}]
    client.chat.completions.create(model="gpt-4o", messages=messages, max_completion_tokens=300, temperature=0.2,
                                   top_p=0.9, stop=["END"], seed=7, n=2,
                                   response_format={"type": "json_object"})
    messages += [{"role": "assistant", "content": "Hello from the stand-in."}, {"role": "user", "content": "Again."}]
    # a stream without usage: its finish reason still reaches the span
    list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True, temperature=1))


def _check_chat(calls: list[dict[str, Any]], standin: StandIn) -> None:
    assert len(calls) == 2, calls
    first, second = (c["attributes"] for c in sorted(calls, key=lambda c: c["attributes"]["contextpipe.turn"]))
    assert first["gen_ai.request.max_tokens"] == 300
    assert first["gen_ai.request.temperature"] == pytest.approx(0.2)
    assert first["gen_ai.request.top_p"] == pytest.approx(0.9)
    assert first["gen_ai.request.stop_sequences"] == ["END"]
    assert first["gen_ai.request.seed"] == 7
    assert first["gen_ai.request.choice.count"] == 2
    assert first["gen_ai.output.type"] == "json"
    assert "gen_ai.request.stream" not in first
    assert first["gen_ai.response.id"] == "chatcmpl-standin"
    assert first["gen_ai.response.model"] == "gpt-4o"
    assert first["gen_ai.response.finish_reasons"] == ["stop"]
    assert first["server.address"] == "127.0.0.1" and first["server.port"] == _port(standin.url)
    assert second["gen_ai.request.stream"] is True
    assert second["gen_ai.request.temperature"] == 1.0
    assert "gen_ai.request.max_tokens" not in second and "gen_ai.output.type" not in second
    assert second["gen_ai.response.finish_reasons"] == ["stop"]
    assert second["gen_ai.response.id"] == "chatcmpl-standin"


def test_the_proxy_exports_the_request_response_and_server_attributes(
    receiver: OtlpReceiver, proxied: Proxied, standin: StandIn
) -> None:
    standin.script = []
    _chat_calls(openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0))
    (path,) = proxied.finish()
    # server.address is the upstream behind the proxy, as the conventions ask of an intermediary
    _check_chat(receiver.calls, standin)
    # the recording keeps them: an export of it later says the same
    with OtlpReceiver() as later:
        r = RecordingReader.open(path)
        emitter = SpanEmitter(endpoint=later.url)
        export_events(events_of(path), r.header, emitter)
        emitter.close()
        _check_chat(later.calls, standin)
    # under CONTEXTPIPE_REDACT the agent's stop sequences (its own text) stay home, the settings do not
    with OtlpReceiver() as redacted:
        emitter = SpanEmitter(endpoint=redacted.url)
        export_events(events_of(path), r.header, emitter, redact=True)
        emitter.close()
        first = min(redacted.calls, key=lambda c: c["attributes"]["contextpipe.turn"])["attributes"]
        assert "gen_ai.request.stop_sequences" not in first and first["gen_ai.request.max_tokens"] == 300


def test_the_proxy_exports_anthropic_stop_sequences_and_responses_settings(
    receiver: OtlpReceiver, proxied: Proxied, standin: StandIn
) -> None:
    standin.script = []
    a = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    # (this SDK takes no sampling settings: temperature, top_p and top_k went with Claude's newest models)
    a.messages.create(model="claude-sonnet-4", max_tokens=512, stop_sequences=["</done>", "STOP"],
                      output_config={"format": {"type": "json_schema", "schema": {"type": "object"}}},
                      messages=[{"role": "user", "content": "Hi."}])
    o = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    o.responses.create(model="gpt-4.1", input="Hi there.", max_output_tokens=128, temperature=0.5,
                       text={"format": {"type": "text"}})
    proxied.finish()
    by_model = {c["attributes"]["gen_ai.request.model"]: c["attributes"] for c in receiver.calls}
    claude, gpt = by_model["claude-sonnet-4"], by_model["gpt-4.1"]
    assert claude["gen_ai.request.max_tokens"] == 512
    assert "gen_ai.request.temperature" not in claude
    assert claude["gen_ai.output.type"] == "json"
    assert claude["gen_ai.request.stop_sequences"] == ["</done>", "STOP"]
    assert claude["gen_ai.response.id"] == "msg_standin_1"
    assert claude["gen_ai.provider.name"] == "anthropic"
    assert claude["server.port"] == _port(standin.url)
    assert gpt["gen_ai.request.max_tokens"] == 128 and gpt["gen_ai.request.temperature"] == 0.5
    assert gpt["gen_ai.output.type"] == "text"
    assert isinstance(gpt.get("gen_ai.response.id"), str) and gpt["gen_ai.response.id"]


def test_the_tap_exports_them_with_the_sdk_clients_server(
    receiver: OtlpReceiver, standin: StandIn, tmp_path: Path
) -> None:
    standin.script = []
    client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0),
                 record=tmp_path / "t.cpsession")
    _chat_calls(client)
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    _check_chat(receiver.calls, standin)


def test_a_structured_output_parse_is_json_and_still_journaled(
    receiver: OtlpReceiver, standin: StandIn, tmp_path: Path
) -> None:
    """parse(response_format=Model) passes a class: read as a JSON schema request, never a tap error."""
    from pydantic import BaseModel

    class Answer(BaseModel):
        text: str

    standin.script = ['{"text": "ok"}']
    client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0),
                 record=tmp_path / "t.cpsession")
    client.chat.completions.parse(model="gpt-4o", messages=[{"role": "user", "content": "Hi."}],
                                  response_format=Answer)
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    (span,) = receiver.calls
    assert span["attributes"]["gen_ai.output.type"] == "json"


def test_an_engine_built_request_says_its_max_tokens(receiver: OtlpReceiver, tmp_path: Path) -> None:
    """The engine's own requests ask for the session's max_output_tokens (their body's max_tokens):
    live and from the recording, while a captured session's turns say only what the agent set."""
    from engine import Pipeline

    path = tmp_path / "own.cpsession"
    pipe = Pipeline("claude-sonnet-4", "anthropic", 200_000, max_output_tokens=1234, record=path, serve=False)
    pipe.identity("You are careful.")
    pipe.user("Hi.")
    req = pipe.next_request()
    assert req.body["max_tokens"] == 1234
    pipe.record_usage({"input_tokens": 10, "output_tokens": 2}, finish_reason="end_turn")
    pipe.close()
    (live,) = receiver.calls
    assert live["attributes"]["gen_ai.request.max_tokens"] == 1234
    with OtlpReceiver() as later:
        emitter = SpanEmitter(endpoint=later.url)
        export_events(events_of(path), RecordingReader.open(path).header, emitter)
        emitter.close()
        (span,) = later.calls
        assert span["attributes"]["gen_ai.request.max_tokens"] == 1234
        assert "server.address" not in span["attributes"]
