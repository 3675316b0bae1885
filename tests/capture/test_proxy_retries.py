"""A call the SDK retries (429, Anthropic's 529, 5xx) is one turn, its failed attempts kept on its trace.

The real anthropic and openai SDKs, with their own retries on (max_retries), through the proxy to the
stand-in answering 429 (or 529, or both) before its reply, streamed and not, sync and async. Each
attempt used to be journaled as a turn of its own, the failed ones as failed turns: a conversation of
three calls read as five. Now the recording has the agent's calls as turns; a retried turn's trace lists
the attempts before it (status, error, when, the SDK's `x-stainless-retry-count`), `explain` says so,
and a call whose retries all failed is one failed turn.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from typer.testing import CliRunner

from engine.capture.proxy import retries
from engine.recording.journal import trace_of
from engine.sim.simulate import simulate_file
from inspector.cli import app
from tests.capture.conftest import Proxied, errors, events_of, usages, verify_ok
from tests.capture.standin import StandIn

SYSTEM = "You are a careful coding agent."
RETRY_AFTER = "0.01"  # honoured by both SDKs (a float of seconds): the retries come at once


def _traces(path: Path) -> dict[int, dict[str, Any]]:
    return {e["turn"]: trace_of(e) for e in events_of(path) if e["k"] == "turn"}


def _attempts(standin: StandIn, since: int) -> list[str | None]:
    """The x-stainless-retry-count of each request the stand-in got since `since`."""
    return [h.get("x-stainless-retry-count") for _, h, _ in standin.requests[since:]]


@pytest.fixture
def failing(standin: StandIn) -> Any:
    standin.retry_after = RETRY_AFTER
    yield standin
    standin.retry_after = ""
    standin.failures.clear()


def _anthropic_calls(url: str, standin: StandIn) -> None:
    """Three calls of one conversation: the first met 529 then 429 (streamed), the second nothing, the
    third 429 (async, not streamed)."""
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=2)
    msgs: list[Any] = [{"role": "user", "content": "List the files."}]
    common: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 256, "system": SYSTEM}
    standin.failures[:] = [529, 429]
    with client.messages.stream(messages=msgs, **common) as s:
        text = "".join(s.text_stream).strip()
    assert text == "Hello from the stand-in."
    msgs += [{"role": "assistant", "content": text}, {"role": "user", "content": "Again."}]
    r = client.messages.create(messages=msgs, **common)
    msgs += [{"role": "assistant", "content": r.content[0].text}, {"role": "user", "content": "Async."}]  # type: ignore[union-attr]

    async def run_async() -> None:
        ac = anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=2)
        standin.failures[:] = [429]
        r2 = await ac.messages.create(messages=msgs, **common)
        assert r2.stop_reason == "tool_use"
        await ac.close()

    asyncio.run(run_async())


def test_anthropic_sdk_retries_are_attempts_of_one_turn(proxied: Proxied, failing: StandIn) -> None:
    since = len(failing.requests)
    _anthropic_calls(proxied.url, failing)
    # the SDK did retry: six requests went upstream, each retry counted in its header
    assert _attempts(failing, since) == ["0", "1", "2", "0", "0", "1"]
    (path,) = proxied.finish()
    traces = _traces(path)
    assert sorted(traces) == [0, 1, 2], "three calls, three turns (not six)"
    assert not errors(path), "no turn failed: each call got its reply in the end"
    assert len(usages(path)) == 3
    first = traces[0]["retries"]
    assert [a["status"] for a in first] == [529, 429]
    assert [a["sdk_retry_count"] for a in first] == [0, 1] and [a["attempt"] for a in first] == [0, 1]
    assert first[0]["error"].startswith("HTTP 529 (retry-after: 0.01): ") and "overloaded_error" in first[0]["error"]
    assert first[0]["sent"] <= first[0]["ended"] <= first[1]["sent"]
    assert "retries" not in traces[1]
    assert [a["status"] for a in traces[2]["retries"]] == [429]
    assert verify_ok(path) == 3
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", "0"])
    assert res.exit_code == 0, res.output
    assert "retried: 2 failed attempts before this one (HTTP 529, HTTP 429), the same request sent again" in res.stdout
    assert "call failed" not in res.stdout
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", "2", "--format", "json"])
    assert [a["status"] for a in json.loads(res.stdout)["retries"]] == [429]
    # simulate: three turns simulated, the three attempts said and in no column (never billed)
    report = simulate_file(path)
    assert report.simulated_turns == 3, report.notes
    assert "3 failed attempts sent again (rate limits, overloads) not billed, left out of every column: before turns [0, 2]" in report.notes
    assert not any("failed call" in n for n in report.notes), report.notes


def test_openai_sdk_retries_streamed_and_not(proxied: Proxied, failing: StandIn) -> None:
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=2)
    history: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Say hello."}]
    since = len(failing.requests)
    failing.failures[:] = [429]
    r = client.chat.completions.create(model="gpt-4o", messages=history)
    history += [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Streamed."}]
    failing.failures[:] = [429, 500]
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o", messages=history, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].usage is not None
    assert _attempts(failing, since) == ["0", "1", "0", "1", "2"]
    (path,) = proxied.finish()
    traces = _traces(path)
    assert sorted(traces) == [0, 1] and not errors(path)
    assert [a["status"] for a in traces[0]["retries"]] == [429]
    assert [a["status"] for a in traces[1]["retries"]] == [429, 500]
    assert len(usages(path)) == 2 and verify_ok(path) == 2


def test_retries_that_all_failed_are_one_failed_turn(proxied: Proxied, failing: StandIn) -> None:
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=1)
    msgs: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hello?"}]
    failing.failures[:] = [429, 429]
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="gpt-4o", messages=msgs)
    # the agent goes on with another request: the failed call is a turn before it
    client.chat.completions.create(model="gpt-4o", messages=[*msgs, {"role": "user", "content": "Anyone?"}])
    (path,) = proxied.finish()
    traces = _traces(path)
    assert sorted(traces) == [0, 1]
    errs = errors(path)
    assert [e["turn"] for e in errs] == [0] and errs[0]["message"].startswith("HTTP 429 (retry-after: 0.01): ")
    assert [a["sdk_retry_count"] for a in traces[0]["retries"]] == [0]  # the first attempt; the turn's is the 2nd
    assert "retries" not in traces[1] and traces[1].get("usage")
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", "0"])
    assert "retried: 1 failed attempt before this one (HTTP 429)" in res.stdout and "call failed: " in res.stdout
    verify_ok(path)


def test_an_agent_sending_a_failed_call_again_is_a_retry_too(proxied: Proxied, failing: StandIn) -> None:
    """An agent's own retry loop (litellm's num_retries, mini-swe-agent's, or plain HTTP as here) sends the
    same body again without the SDK's count: the same turn all the same."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello?"}]}
    failing.failures[:] = [529]
    with httpx.Client(base_url=proxied.url) as http:
        assert http.post("/v1/chat/completions", json=body).status_code == 529
        assert http.post("/v1/chat/completions", json=body).status_code == 200
    (path,) = proxied.finish()
    traces = _traces(path)
    assert sorted(traces) == [0] and not errors(path)
    (attempt,) = traces[0]["retries"]
    assert attempt["status"] == 529 and "sdk_retry_count" not in attempt


def test_a_failed_attempt_nobody_retries_is_journaled_when_its_wait_ends(
    proxied: Proxied, failing: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held for its retry, a failed call is journaled as failed once the wait it was told (and a grace)
    has passed, while the proxy runs on: a live view sees it without the proxy closing."""
    monkeypatch.setattr(retries, "GRACE_S", 0.3)
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    failing.failures[:] = [429]
    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(model="claude-sonnet-4", max_tokens=9, messages=[{"role": "user", "content": "x"}])
    assert proxied.recorder.flush(30)
    (info, tap) = next(iter(proxied.recorder.sessions.values()))
    deadline = time.monotonic() + 30
    while (tap.pipe is None or tap.pipe.turn == 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tap.pipe is not None and tap.pipe.turn == 1 and not tap.held, "journaled once its wait ran out"
    (path,) = proxied.finish()
    assert [e["turn"] for e in errors(path)] == [0] and "retries" not in _traces(path)[0]
    assert info.errors == 1 and info.retried == 0
    verify_ok(path)
