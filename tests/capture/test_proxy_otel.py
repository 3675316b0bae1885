"""The proxy's live OpenTelemetry export (OTEL_EXPORTER_OTLP_ENDPOINT set where the proxy runs), received
by the test receiver. The proxy journals an exchange once its answer has ended, request and outcome
together, so the live sink's clock (when each event was journaled) put both ends of a call's span at the
same instant: every call lasted 0.1 ms whatever the model took; and the session (the invoke_agent span,
the calls' parent) began when the first exchange was journaled, after the first call had started, so the
first call stuck out before its parent. The recorded times say when the call was sent and when its
answer came (not when the recorder's worker, which lags a fast agent, journaled it): the spans say so too."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the otel extra is not installed")

from tests.capture.conftest import Proxied  # noqa: E402
from tests.capture.standin import StandIn  # noqa: E402
from tests.fleet.otlp_receiver import OtlpReceiver  # noqa: E402

DELAY_S = 0.4


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
                 "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        yield rx


def test_proxied_calls_span_as_long_as_the_model_took_under_their_session(
    receiver: OtlpReceiver, proxied: Proxied, standin: StandIn, tmp_path: Path
) -> None:
    standin.script = []
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    messages = [{"role": "system", "content": "You are careful."},
                {"role": "user", "content": f"First. [standin tokens=5 delay={DELAY_S}]"}]
    # Each span is held to the wall-clock instants around its own call (a fixed upper bound on its length
    # was a bet on how late a loaded host journals it): it starts once the call is sent and ends by the
    # time the proxy has finished; 1 us of rounding either way (float seconds in the journal).
    sent = [time.time_ns() - 1_000]
    client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    messages += [{"role": "assistant", "content": "Hello from the stand-in."},
                 {"role": "user", "content": f"Second. [standin tokens=6 delay={DELAY_S}]"}]
    sent.append(time.time_ns() - 1_000)
    list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True,  # type: ignore[arg-type]
                                        stream_options={"include_usage": True}))
    proxied.finish()
    finished = time.time_ns() + 1_000
    calls = sorted(receiver.calls, key=lambda s: s["start_ns"])
    (agent,) = receiver.agents
    assert len(calls) == 2
    for span, at in zip(calls, sent, strict=True):
        took = (span["end_ns"] - span["start_ns"]) / 1e9
        assert DELAY_S * 0.9 <= took, (span["attributes"]["contextpipe.turn"], took)
        assert at <= span["start_ns"] <= span["end_ns"] <= finished, (at, span, finished)
        assert span["parent_span_id"] == agent["span_id"]
    # the agent sent its second call once it had the first's answer: the first span ended before (its
    # end was when the recorder's worker journaled it, which lags the answer: the first exchange opens
    # the session's recording)
    assert calls[0]["end_ns"] <= calls[1]["start_ns"], (calls[0]["end_ns"] - calls[1]["start_ns"]) / 1e6
    assert agent["start_ns"] <= calls[0]["start_ns"], "the first call starts within its session"
    assert agent["end_ns"] >= calls[-1]["end_ns"]
