"""Concurrent calls of one conversation while one of them waits for its SDK's retry (429, 529).

The proxy holds a failed attempt an SDK retries until a later request of its session says what it was
(engine/capture/proxy/retries.py): the same request again is its retry. Any other request used to mean
nobody retried it, but an agent that makes calls at once in one conversation (a fan-out over the same
history, a sub-call beside the main one) has other calls finish while the SDK waits out its backoff:
each released the held attempt as a failed turn that never was, and the retry after it was a turn of its
own. Here the real SDKs (threads, and asyncio) make concurrent calls through the proxy to the stand-in,
which answers the first attempts 429 or 529 (with a Retry-After that lets the other calls finish first).
Each call is recognised by the usage the stand-in gives it (`[standin tokens=N]` in its last message: N output tokens).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from engine.recording.journal import trace_of
from tests.capture.conftest import Proxied, errors, events_of, verify_ok
from tests.capture.standin import StandIn

SYSTEM = "You are a careful coding agent."


def _turns(paths: list[Path]) -> dict[int, dict[str, Any]]:
    """Every turn of the recordings by the output tokens of its usage (which call it was): its trace."""
    out: dict[int, dict[str, Any]] = {}
    for path in paths:
        traces = {e["turn"]: trace_of(e) for e in events_of(path) if e["k"] == "turn"}
        for e in events_of(path):
            if e["k"] == "usage":
                assert e["usage"]["output_tokens"] not in out, "each call once"
                out[e["usage"]["output_tokens"]] = traces[e["turn"]]
    return out


def _statuses(trace: dict[str, Any]) -> list[int]:
    return [a["status"] for a in trace.get("retries", ())]


@pytest.fixture
def failing(standin: StandIn) -> Any:
    yield standin
    standin.retry_after = ""
    standin.failures.clear()


def _wait_spent(standin: StandIn) -> None:
    """Until the stand-in has answered the failures it was given (the attempts meant to fail went out)."""
    deadline = time.monotonic() + 30
    while standin.failures and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not standin.failures


def test_a_call_finishing_during_anothers_backoff_does_not_release_its_429(
    proxied: Proxied, failing: StandIn
) -> None:
    """Two threads, one conversation: A is answered 429 and retried by its SDK 0.4 s later; B, sent once
    A had its 429, is answered before that. B is not A's retry, and does not say A was given up: it
    continues the history beside A (another last message). Before: A's 429 a failed turn, then B, then
    A's retry a branch of its own with no attempts (3 turns for 2 calls, one of them failed)."""
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=2)
    common: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 64, "system": SYSTEM}
    history: list[Any] = [{"role": "user", "content": "List the files."}]
    r = client.messages.create(messages=history, **common)
    history += [{"role": "assistant", "content": r.content[0].text}]  # type: ignore[union-attr]
    assert proxied.recorder.flush(30)
    failing.retry_after = "0.4"
    failing.failures[:] = [429]
    done: dict[str, Any] = {}

    def call_a() -> None:
        done["a"] = client.messages.create(
            messages=[*history, {"role": "user", "content": "Call A. [standin tokens=11]"}], **common
        )

    ta = threading.Thread(target=call_a)
    ta.start()
    _wait_spent(failing)
    done["b"] = client.messages.create(
        messages=[*history, {"role": "user", "content": "Call B. [standin tokens=22]"}], **common
    )
    ta.join(30)
    assert set(done) == {"a", "b"}
    paths = proxied.finish()
    assert not any(errors(p) for p in paths), "no call failed: A's 429 was retried"
    turns = _turns(paths)
    assert len(turns) == 3 and {11, 22} <= set(turns), "three calls, three turns"
    assert _statuses(turns[11]) == [429] and sum(map(len, map(_statuses, turns.values()))) == 1
    assert sum(1 for p in paths for e in events_of(p) if e["k"] == "turn") == 3
    for p in paths:
        verify_ok(p)


def test_concurrent_calls_both_rate_limited_wait_side_by_side(proxied: Proxied, failing: StandIn) -> None:
    """asyncio.gather of three calls over one history (a fan-out, as agents run sub-tasks): the first
    two sent are answered 429 and 529, each retried by its SDK. Before: each failed attempt released the
    other's as a failed turn (two failed turns, the retries turns without their attempts)."""
    history: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Plan the work."},
    ]
    sync = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=2)
    r = sync.chat.completions.create(model="gpt-4o", messages=history)
    history.append(r.choices[0].message.model_dump(exclude_none=True))
    assert proxied.recorder.flush(30)
    failing.retry_after = "0.3"

    async def fan_out() -> tuple[Any, ...]:
        client = openai.AsyncOpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=2)

        async def one(i: int, delay: float) -> Any:
            await asyncio.sleep(delay)  # sent in this order, so the failures go to the first two
            return await client.chat.completions.create(
                model="gpt-4o",
                messages=[*history, {"role": "user", "content": f"Sub-task {i}. [standin tokens={30 + i}]"}],
            )

        failing.failures[:] = [429, 529]
        try:
            return tuple(await asyncio.gather(one(1, 0.0), one(2, 0.05), one(3, 0.1)))
        finally:
            await client.close()

    assert len(asyncio.run(fan_out())) == 3
    paths = proxied.finish()
    assert not any(errors(p) for p in paths), "every call got its reply in the end"
    turns = _turns(paths)
    assert len(turns) == 4 and {31, 32, 33} <= set(turns)
    assert _statuses(turns[31]) == [429] and _statuses(turns[32]) == [529]
    assert sum(map(len, map(_statuses, turns.values()))) == 2
    assert sum(1 for p in paths for e in events_of(p) if e["k"] == "turn") == 4
    for p in paths:
        verify_ok(p)


def test_going_on_from_a_failed_call_still_journals_it_first(proxied: Proxied, failing: StandIn) -> None:
    """The agent gives up on a call whose retries all failed and goes on with a request that extends it:
    that says nobody sends it again, so it is the failed turn before the next, as before."""
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=1)
    msgs: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hello?"}]
    failing.retry_after = "0.01"
    failing.failures[:] = [429, 429]
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="gpt-4o", messages=msgs)
    client.chat.completions.create(
        model="gpt-4o", messages=[*msgs, {"role": "user", "content": "Anyone? [standin tokens=40]"}]
    )
    (path,) = proxied.finish()
    assert [e["turn"] for e in errors(path)] == [0]
    assert [e["turn"] for e in events_of(path) if e["k"] == "usage"] == [1]
