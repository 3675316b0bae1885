"""A tapped client's SDK retries (429, Anthropic's 529, 5xx) are attempts of one turn, as through the proxy.

The SDKs retry inside `create()`, so the tap, which wraps it, saw one call: a turn with no word of the
rate limits it met, and a call whose retries all failed a failed turn without its earlier attempts. Here
the real anthropic and openai SDKs (sync, async, streamed, the messages.stream() helper), tapped in
process, call the stand-in upstream, which answers the first attempts 429, 529 or 500 before its reply.
The turn's trace lists the attempts before its last (status, error, when, the SDK's
`x-stainless-retry-count`) under the proxy's key, explain and simulate say them as for the proxy, and
concurrent calls (asyncio.gather) keep their attempts apart.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from typer.testing import CliRunner

from engine.capture.tap import tap
from engine.recording.journal import trace_of
from engine.sim.simulate import simulate_file
from inspector.cli import app
from tests.capture.conftest import errors, events_of, usages, verify_ok
from tests.capture.standin import StandIn

SYSTEM = "You are a careful coding agent."


def _traces(path: Path) -> dict[int, dict[str, Any]]:
    return {e["turn"]: trace_of(e) for e in events_of(path) if e["k"] == "turn"}


def _statuses(trace: dict[str, Any]) -> list[int | None]:
    return [a["status"] for a in trace.get("retries", ())]


@pytest.fixture
def failing(standin: StandIn) -> Any:
    standin.retry_after = "0.01"  # honoured by both SDKs: the retries come at once
    yield standin
    standin.retry_after = ""
    standin.failures.clear()


def test_anthropic_tapped_sync_async_and_streamed(tmp_path: Path, failing: StandIn) -> None:
    rec = tmp_path / "a.cpsession"
    client = tap(
        anthropic.Anthropic(base_url=failing.url, api_key="k", max_retries=2), record=rec, serve=False
    )
    common: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 64, "system": SYSTEM}
    msgs: list[Any] = [{"role": "user", "content": "List the files."}]
    failing.failures[:] = [529, 429]
    with client.messages.stream(messages=msgs, **common) as s:  # the helper: the request sent in __enter__
        text = "".join(s.text_stream).strip()
    msgs += [{"role": "assistant", "content": text}, {"role": "user", "content": "Again."}]
    r = client.messages.create(messages=msgs, **common)
    msgs += [{"role": "assistant", "content": r.content[0].text}, {"role": "user", "content": "Streamed."}]  # type: ignore[union-attr]
    failing.failures[:] = [500]
    events = list(client.messages.create(messages=msgs, stream=True, **common))
    assert events[-1].type == "message_stop"
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.retried == 3 and client.contextpipe_stats.errors == 0
    traces = _traces(rec)
    assert sorted(traces) == [0, 1, 2] and not errors(rec)
    first = traces[0]["retries"]
    assert [a["status"] for a in first] == [529, 429]
    assert [a["sdk_retry_count"] for a in first] == [0, 1] and [a["attempt"] for a in first] == [0, 1]
    assert (
        first[0]["error"].startswith("HTTP 529 (retry-after: 0.01): ")
        and "overloaded_error" in first[0]["error"]
    )
    assert first[0]["retry_after"] == "0.01" and first[0]["sent"] <= first[0]["ended"] <= first[1]["sent"]
    assert "retries" not in traces[1] and _statuses(traces[2]) == [500]
    assert len(usages(rec)) == 3 and verify_ok(rec) == 3
    res = CliRunner().invoke(app, ["explain", str(rec), "--turn", "0"])
    assert res.exit_code == 0, res.output
    assert (
        "retried: 2 failed attempts before this one (HTTP 529, HTTP 429), the same request sent again"
        in res.stdout
    )
    report = simulate_file(rec)
    assert report.simulated_turns == 3, report.notes
    assert any("3 failed attempts sent again" in n and "before turns [0, 2]" in n for n in report.notes), (
        report.notes
    )


def test_openai_async_gather_keeps_each_calls_attempts(tmp_path: Path, failing: StandIn) -> None:
    """Three concurrent calls of an AsyncOpenAI client: the first two sent meet 429 and 500, each retried.
    Each turn has its own call's attempts (by the usage the stand-in gives each: `[standin tokens=N]`)."""
    rec = tmp_path / "o.cpsession"

    async def run() -> None:
        client = tap(
            openai.AsyncOpenAI(base_url=failing.url + "/v1", api_key="k", max_retries=2),
            record=rec,
            serve=False,
            split=False,
        )

        async def one(i: int, delay: float) -> Any:
            await asyncio.sleep(delay)
            msgs = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Task {i} [standin tokens={40 + i}]"},
            ]
            return await client.chat.completions.create(model="gpt-4o", messages=msgs)

        failing.retry_after = "0.3"  # each retry comes after the three first attempts
        failing.failures[:] = [429, 500]
        await asyncio.gather(one(1, 0.0), one(2, 0.05), one(3, 0.1))
        # streamed, with a retry
        failing.retry_after = "0.01"
        failing.failures[:] = [429]
        msgs = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Stream [standin tokens=44]"},
        ]
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=msgs, stream=True, stream_options={"include_usage": True}
        )
        async for _ in stream:
            pass
        await client.close()
        client.contextpipe_tap.close()

    asyncio.run(run())
    traces = _traces(rec)
    by_tokens = {e["usage"]["output_tokens"]: traces[e["turn"]] for e in events_of(rec) if e["k"] == "usage"}
    assert sorted(by_tokens) == [41, 42, 43, 44] and not errors(rec)
    assert _statuses(by_tokens[41]) == [429] and _statuses(by_tokens[42]) == [500]
    assert _statuses(by_tokens[43]) == [] and _statuses(by_tokens[44]) == [429]
    assert verify_ok(rec) == 4


def test_a_tapped_call_whose_retries_all_failed_is_one_failed_turn(tmp_path: Path, failing: StandIn) -> None:
    rec = tmp_path / "f.cpsession"
    client = tap(
        openai.OpenAI(base_url=failing.url + "/v1", api_key="k", max_retries=1), record=rec, serve=False
    )
    failing.failures[:] = [429, 429]
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hello?"}])
    client.contextpipe_tap.close()
    traces = _traces(rec)
    assert sorted(traces) == [0]
    (err,) = errors(rec)
    assert err["turn"] == 0 and "429" in err["message"]
    (attempt,) = traces[0]["retries"]
    assert attempt["status"] == 429 and attempt["sdk_retry_count"] == 0
    res = CliRunner().invoke(app, ["explain", str(rec), "--turn", "0"])
    assert (
        "retried: 1 failed attempt before this one (HTTP 429)" in res.stdout and "call failed: " in res.stdout
    )


def test_an_upstream_not_reached_is_an_attempt_too(tmp_path: Path, failing: StandIn) -> None:
    """The SDK retries a connection it could not make: the attempt says so (no status)."""
    import socket

    with socket.socket() as s:  # a port nobody listens on, then the stand-in
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    rec = tmp_path / "d.cpsession"
    client = tap(
        anthropic.Anthropic(base_url=f"http://127.0.0.1:{dead}", api_key="k", max_retries=1),
        record=rec,
        serve=False,
    )
    with pytest.raises(anthropic.APIConnectionError):
        client.messages.create(
            model="claude-sonnet-4", max_tokens=9, messages=[{"role": "user", "content": "x"}]
        )
    client.contextpipe_tap.close()
    (trace,) = _traces(rec).values()
    (attempt,) = trace["retries"]
    assert attempt["status"] is None and attempt["error"] == "the upstream was not reached"
