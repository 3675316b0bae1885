"""Concurrent calls on one tapped client: each call's request and its own response must make one turn.

The stand-in upstream answers a request holding `[standin tokens=N delay=S]` with usage of its own
(N output tokens) S seconds late, so the calls below finish in the reverse of the order they started
and every recorded turn can be checked against its own request: the user text the turn's actual request
carries names the usage that turn must have. Real SDKs, real sockets, no mocks."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from engine.capture.tap import tap
from engine.capture.tap_session import MAX_HELD
from engine.recording.journal import trace_of
from tests.capture.standin import StandIn
from tests.test_tap_clients import _check, _events, _sent, _usages

N = 6
A_KW: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 100, "system": "Be terse."}


@pytest.fixture(scope="module")
def upstream() -> Iterator[StandIn]:
    s = StandIn().start()
    yield s
    s.stop()


def _prompt(k: int, delay: float) -> str:
    return f"Task {k}: summarise file {k}. [standin tokens={10 + k} delay={delay}]"


def _delay(k: int) -> float:
    return round(0.08 * (N - k), 2)  # the first call started finishes last


def _tokens_asked(ev: list[dict[str, Any]], turn: int) -> int:
    texts = [m["content"] for m in _sent(ev, turn) if m["role"] == "user"]
    found = re.search(r"tokens=(\d+)", texts[-1])
    assert found, texts
    return int(found.group(1))


def _each_turn_has_its_own_usage(rec: Path, calls: int, input_base: int) -> list[dict[str, Any]]:
    """Every call one turn; each turn's usage event *and* its trace carry the usage its request asked for."""
    ev = _check(rec, calls)
    usages = _usages(ev)
    traces = {e["turn"]: trace_of(e) for e in ev if e["k"] == "turn"}
    asked = [_tokens_asked(ev, t) for t in range(calls)]
    assert sorted(asked) == sorted(10 + k for k in range(calls))  # every request recorded once
    for t, n in enumerate(asked):
        assert usages[t]["output_tokens"] == n, (t, n, usages[t])
        assert usages[t]["input_tokens"] == input_base + n
        assert (traces[t].get("usage") or {}).get("output_tokens") == n, (t, traces[t].get("usage"))
    return ev


async def test_async_anthropic_gather_creates(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "gather.cpsession"
    client = tap(anthropic.AsyncAnthropic(api_key="k", base_url=upstream.url, max_retries=0), record=rec)

    async def one(k: int) -> int:
        r = await client.messages.create(
            messages=[{"role": "user", "content": _prompt(k, _delay(k))}], **A_KW
        )
        return r.usage.output_tokens

    got = await asyncio.gather(*(one(k) for k in range(N)))
    assert got == [10 + k for k in range(N)]  # the agent's own view: each call got its own answer
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    # Anthropic input = uncached (1000 + n) + 3400 read + 1200 written
    ev = _each_turn_has_its_own_usage(rec, N, 1000 + 3400 + 1200)
    assert [_tokens_asked(ev, t) for t in range(N)] == [10 + k for k in range(N)]  # in start order


async def test_async_anthropic_gather_streams_and_helpers(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "streams.cpsession"
    client = tap(anthropic.AsyncAnthropic(api_key="k", base_url=upstream.url, max_retries=0), record=rec)

    async def raw_stream(k: int) -> None:
        msgs = [{"role": "user", "content": _prompt(k, _delay(k))}]
        stream = await client.messages.create(messages=msgs, stream=True, **A_KW)
        async for _ in stream:
            pass

    async def helper(k: int) -> None:
        msgs = [{"role": "user", "content": _prompt(k, _delay(k))}]
        async with client.messages.stream(messages=msgs, **A_KW) as s:
            await s.get_final_message()

    async def plain(k: int) -> None:
        await client.messages.create(messages=[{"role": "user", "content": _prompt(k, _delay(k))}], **A_KW)

    kinds = [raw_stream, helper, plain]
    await asyncio.gather(*(kinds[k % 3](k) for k in range(N)))
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    _each_turn_has_its_own_usage(rec, N, 1000 + 3400 + 1200)


async def test_async_openai_gather_streams(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "ostreams.cpsession"
    client = tap(openai.AsyncOpenAI(api_key="k", base_url=upstream.url + "/v1", max_retries=0), record=rec)

    async def one(k: int) -> None:
        msgs = [{"role": "user", "content": _prompt(k, _delay(k))}]
        if k % 2:
            stream = await client.chat.completions.create(
                model="gpt-4o", messages=msgs, stream=True, stream_options={"include_usage": True}
            )
            async for _ in stream:
                pass
        else:
            await client.chat.completions.create(model="gpt-4o", messages=msgs)

    await asyncio.gather(*(one(k) for k in range(N)))
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    _each_turn_has_its_own_usage(rec, N, 2000)


def test_sync_client_from_threads(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "threads.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url + "/v1", max_retries=0), record=rec)

    def one(k: int) -> int:
        r = client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": _prompt(k, _delay(k))}]
        )
        assert r.usage is not None
        return r.usage.completion_tokens

    with ThreadPoolExecutor(N) as pool:
        got = list(pool.map(one, range(N)))
    assert got == [10 + k for k in range(N)]
    client.contextpipe_tap.close()
    _each_turn_has_its_own_usage(rec, N, 2000)


def test_a_caller_that_leaves_its_stream_unread_does_not_hold_its_next_call(
    upstream: StandIn, tmp_path: Path
) -> None:
    """Sequential agent, stream left open (not closed, not read to the end), next call: the next call is
    its own turn at once; when the first stream is read after all, its usage lands on its own turn."""
    rec = tmp_path / "left.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url + "/v1", max_retries=0), record=rec)
    first = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": _prompt(1, 0)}],
        stream=True,
        stream_options={"include_usage": True},
    )
    next(iter(first))  # read one chunk, then go on without it
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": _prompt(2, 0)}])
    live = client.contextpipe_tap.pipe.journal.events
    assert [e["turn"] for e in live if e.get("k") == "actual"] == [0, 1]  # not held behind the open stream
    for _ in first:  # the agent comes back to it (interleaved streams)
        pass
    client.contextpipe_tap.close()
    ev = _check(rec, 2)
    assert {t: u["output_tokens"] for t, u in _usages(ev).items()} == {0: 11, 1: 12}


def test_a_stream_left_open_by_one_thread_holds_others_only_briefly(
    upstream: StandIn, tmp_path: Path
) -> None:
    """One thread opens a stream and never finishes it; another keeps calling. Its turns are held at most
    MAX_HELD calls behind the open one, then journaled live; the open one is closed as unobserved."""
    rec = tmp_path / "held.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url + "/v1", max_retries=0), record=rec)
    opened = threading.Event()
    box: list[Any] = []

    def opener() -> None:
        box.append(
            client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": _prompt(0, 0)}], stream=True
            )
        )
        opened.set()

    threading.Thread(target=opener).start()
    assert opened.wait(10)
    for k in range(1, MAX_HELD + 1):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": _prompt(k, 0)}])
    live = [e["turn"] for e in client.contextpipe_tap.pipe.journal.events if e.get("k") == "actual"]
    assert live == list(range(MAX_HELD + 1))  # all journaled before anything closed
    box[0].close()
    client.contextpipe_tap.close()
    ev = _check(rec, MAX_HELD + 1)
    usages = _usages(ev)
    assert 0 not in usages and all(usages[t]["output_tokens"] == 10 + t for t in range(1, MAX_HELD + 1))
    errors = [e for e in _events(rec) if e["k"] == "error"]
    assert [(e["turn"], e["kind"]) for e in errors] == [(0, "incomplete_stream")]


def test_a_call_held_behind_another_keeps_the_time_it_was_made(upstream: StandIn, tmp_path: Path) -> None:
    # Thread A's call takes 4 s; thread B calls 0.3 s in and is answered at once, but its turn is
    # journaled only after A's. Its time must be when B called (simulate reads the gaps between the
    # requests' times against the cache's lifetime), not when the journal got to it. A stamp is checked
    # to lie between the call's own start and its return: B's call returned ~3 s before A's turn ended,
    # which is when the journal got to B (a fixed bound on the stamp's lateness was a bet on the load).
    rec = tmp_path / "held.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url + "/v1", max_retries=0), record=rec)
    made: dict[int, float] = {}
    returned: dict[int, float] = {}

    def one(k: int) -> None:
        time.sleep(0.3 * k)
        made[k] = time.time()
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": _prompt(k, 0.5 if k else 4.0)}]
        )
        returned[k] = time.time()

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, range(2)))
    client.contextpipe_tap.close()
    ev = _check(rec, 2)
    assert made[0] < made[1] and returned[1] < returned[0], (made, returned)  # B was held behind A
    times = {e["turn"]: e["time"] for e in ev if e["k"] == "actual"}
    assert all(made[k] - 0.01 <= times[k] <= returned[k] for k in (0, 1)), (times, made, returned)


async def test_a_cancelled_call_ends_its_turn_and_holds_no_one(upstream: StandIn, tmp_path: Path) -> None:
    # A task cancelled while it reads a stream, and a call given up by asyncio.wait_for: each is its
    # turn's end ("cancelled"), so the other tasks' calls are journaled (and shown live) at once; they
    # were held behind the cancelled turn, left open until the recording was closed.
    rec = tmp_path / "cancel.cpsession"
    client = tap(openai.AsyncOpenAI(api_key="k", base_url=upstream.url + "/v1", max_retries=0), record=rec)
    t = client.contextpipe_tap

    async def reader() -> None:
        msgs = [{"role": "user", "content": _prompt(0, 2.0)}]  # the stream pauses 2 s half-way
        stream = await client.chat.completions.create(model="gpt-4o", messages=msgs, stream=True)
        async for _ in stream:
            pass

    task = asyncio.create_task(reader())
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for k in (1, 2):
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": _prompt(k, 0)}]
        )
    with pytest.raises(TimeoutError):
        msgs = [{"role": "user", "content": _prompt(3, 2.0)}]
        await asyncio.wait_for(client.chat.completions.create(model="gpt-4o", messages=msgs), 0.5)
    await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": _prompt(4, 0)}]
    )
    assert t.stats.journaled == 5 and t._open_call is None and not t._waiting  # nothing held back
    t.close()
    ev = _check(rec, 5)
    errs = {e["turn"]: (e["kind"], e["message"]) for e in ev if e["k"] == "error"}
    assert errs == {
        0: ("incomplete_stream", "stream cancelled: the agent stopped reading it (CancelledError)"),
        3: ("error", "cancelled: the agent stopped waiting for the call (CancelledError)"),
    }
    assert sorted(_usages(ev)) == [1, 2, 4]


def test_a_call_held_behind_another_keeps_the_time_its_answer_came(upstream: StandIn, tmp_path: Path) -> None:
    # As above, B answered 0.2 s after it called, 3.5 s before A's turn ends and B's is journaled: B's
    # usage is stamped when its answer came (the OpenTelemetry export ends B's span there), not when the
    # journal got to it, after A's answer. A stamp is checked to lie between the call's start and its
    # return (B's call returned before A's answer came; a fixed 1 s of room was a bet on the load).
    rec = tmp_path / "held.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url + "/v1", max_retries=0), record=rec)
    made: dict[int, float] = {}
    answered: dict[int, float] = {}

    def one(k: int) -> None:
        time.sleep(0.3 * k)
        made[k] = time.time()
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": _prompt(k, 4.0 if k == 0 else 0.2)}]
        )
        answered[k] = time.time()

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, range(2)))
    client.contextpipe_tap.close()
    ev = _check(rec, 2)
    assert made[0] < made[1] and answered[1] < answered[0], (made, answered)  # B was held behind A
    ended = {e["turn"]: e["time"] for e in ev if e["k"] == "usage"}
    assert all(made[k] <= ended[k] <= answered[k] for k in (0, 1)), (ended, made, answered)
    assert ended[1] < ended[0] - 0.5
