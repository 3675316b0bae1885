"""The tap and a background Responses stream the agent resumes (`background: true, stream: true`).

A background call's stream that breaks off (or that the agent stops reading) is not the call's end: the
response goes on on the server, and the agent picks it up again with
`responses.retrieve(id, stream=True, starting_after=N)` (or the SDK's `responses.stream(response_id=...)`
helper, which calls it), or polls it with a plain retrieve. The recording must hold the outcome under the
call's own turn, as the proxy records it (tests/capture/test_responses_api.py), not an incomplete stream.
Real openai SDK (sync and async) against the stand-in, which speaks the real SSE event sequence.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
import pytest

from engine.capture.tap import tap
from tests.capture.conftest import Proxied, errors, events_of, usages, verify_ok
from tests.capture.standin import StandIn

SYSTEM = "You are a careful coding agent."
R_USAGE = {"input_tokens": 1500, "output_tokens": 9, "cache_read_tokens": 1024, "cache_write_tokens": 0}


def _client(standin: StandIn, rec: Path, is_async: bool) -> Any:
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return tap(cls(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec)


async def _drain(stream: Any, is_async: bool, upto: int | None = None) -> list[Any]:
    """The events of a stream (the first `upto`, then it is closed); a break-off ends the list."""
    seen: list[Any] = []
    try:
        if is_async:
            async for ev in stream:
                seen.append(ev)
                if upto is not None and len(seen) == upto:
                    await stream.close()
                    break
        else:
            for ev in stream:
                seen.append(ev)
                if upto is not None and len(seen) == upto:
                    stream.close()
                    break
    except openai.APIError:
        pass
    return seen


@pytest.mark.parametrize("is_async", [False, True])
def test_a_resumed_background_stream_is_followed_to_its_outcome(
    standin: StandIn, tmp_path: Path, is_async: bool
) -> None:
    standin.script = []
    rec = tmp_path / "t.cpsession"
    client = _client(standin, rec, is_async)

    async def call(x: Any) -> Any:
        return await x if is_async else x

    async def run() -> None:
        # 1. the stream breaks off half-way; the agent resumes it after the last event it read
        first = await _drain(
            await call(client.responses.create(model="gpt-4.1-cut", instructions=SYSTEM, input="Summarise.",
                                               background=True, stream=True)),
            is_async,
        )
        assert first and first[-1].type != "response.completed"
        rid = first[0].response.id
        resumed = await call(client.responses.retrieve(rid, stream=True, starting_after=first[-1].sequence_number))
        rest = await _drain(resumed, is_async)
        assert rest[-1].type == "response.completed" and rest[0].sequence_number == first[-1].sequence_number + 1
        # the conversation goes on from the server's copy: the resumed reply was fed to the shadow history
        r2 = await call(client.responses.create(model="gpt-4.1", input="Thanks.", previous_response_id=rid))
        assert r2.status == "completed"

        # 2. cut again; a resume the agent stops reading after one event leaves it pending; a poll ends it
        cut = await _drain(
            await call(client.responses.create(model="gpt-4.1-cut", instructions=SYSTEM, input="Again.",
                                               background=True, stream=True)),
            is_async,
        )
        rid2 = cut[0].response.id
        partial = await _drain(
            await call(client.responses.retrieve(rid2, stream=True, starting_after=cut[-1].sequence_number)),
            is_async,
            upto=1,
        )
        assert len(partial) == 1 and partial[0].type != "response.completed"
        r = await call(client.responses.retrieve(rid2))
        while r.status in ("queued", "in_progress"):
            r = await call(client.responses.retrieve(rid2))
        assert r.status == "completed"

        # 3. the SDK's own resume helper (responses.stream(response_id=...), which calls retrieve)
        cut3 = await _drain(
            await call(client.responses.create(model="gpt-4.1-cut", instructions=SYSTEM, input="Once more.",
                                               background=True, stream=True)),
            is_async,
        )
        rid3 = cut3[0].response.id
        helper = client.responses.stream(response_id=rid3, starting_after=cut3[-1].sequence_number)
        if is_async:
            async with helper as s:
                final = await s.get_final_response()
        else:
            with helper as s:
                final = s.get_final_response()
        assert final.status == "completed"

    asyncio.run(run())
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    assert errors(rec) == [], errors(rec)
    # each call's outcome under its own turn: the resumed reply, its follow-up, the polled one, the helper's
    assert usages(rec) == [R_USAGE] * 4, usages(rec)
    assert [e["turn"] for e in events_of(rec) if e["k"] == "usage"] == [0, 1, 2, 3]
    verify_ok(rec)


def test_a_resumed_stream_that_is_never_finished_says_so(standin: StandIn, tmp_path: Path) -> None:
    # The agent resumes the stream but stops reading before its end and never comes back: the recording
    # says the outcome was not seen, with the response's id, not that the agent's first stream broke.
    standin.script = []
    rec = tmp_path / "t.cpsession"
    client = _client(standin, rec, False)
    first = asyncio.run(_drain(client.responses.create(model="gpt-4.1-cut", input="Summarise.", background=True,
                                                       stream=True), False))
    rid = first[0].response.id
    asyncio.run(_drain(client.responses.retrieve(rid, stream=True, starting_after=first[-1].sequence_number),
                       False, upto=1))
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    (err,) = errors(rec)
    assert err["kind"] == "unobserved" and rid in err["message"] and "still in_progress" in err["message"], err
    assert not usages(rec)
    verify_ok(rec)


def test_a_background_call_polled_through_with_raw_response_is_followed(standin: StandIn, tmp_path: Path) -> None:
    # `responses.with_raw_response.retrieve(id)` (an agent that reads the headers too): the parsed reply
    # is the outcome, as a plain retrieve's is; the raw response object is not taken for the reply
    # (that was a tap error, and the call said it was still queued).
    standin.script = []
    rec = tmp_path / "t.cpsession"
    client = _client(standin, rec, False)
    r = client.responses.create(model="gpt-4.1", input="Summarise.", background=True)
    while r.status in ("queued", "in_progress"):
        r = client.responses.with_raw_response.retrieve(r.id).parse()
    assert r.status == "completed"
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    assert errors(rec) == [] and usages(rec) == [R_USAGE]
    verify_ok(rec)


@pytest.mark.parametrize("path", ["tap", "proxy"])
def test_a_resumed_stream_that_ends_in_an_error_event_ends_the_call(
    standin: StandIn, tmp_path: Path, request: pytest.FixtureRequest, path: str
) -> None:
    # The resumed stream carries the API's own `error` event (the SDK yields it as an event): the call is
    # over, journaled as an incomplete stream in the API's words (as the proxy journals it), not left
    # pending until the recording closes (which would say its outcome was never fetched).
    standin.script = []
    rec = tmp_path / "t.cpsession"
    if path == "tap":
        client = _client(standin, rec, False)
    else:
        proxied: Proxied = request.getfixturevalue("proxied")
        client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    first = asyncio.run(_drain(client.responses.create(model="gpt-4.1-overloaded-cut", input="Summarise.",
                                                       background=True, stream=True), False))
    rid = first[0].response.id
    rest = asyncio.run(_drain(client.responses.retrieve(rid, stream=True, starting_after=first[-1].sequence_number),
                              False))
    assert rest and rest[-1].type == "error", [e.type for e in rest]
    if path == "tap":
        assert rid not in client.contextpipe_tap.background
        client.contextpipe_tap.close()
        assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    else:
        (rec,) = proxied.finish()
    (err,) = errors(rec)
    assert err["kind"] == "incomplete_stream" and "overloaded" in err["message"], err
    assert not usages(rec)
    verify_ok(rec)
