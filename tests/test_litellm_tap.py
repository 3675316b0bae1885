"""litellm-based agents tapped with one line: real litellm calls (sync, async, streamed; OpenAI, Anthropic
and DeepSeek routes) against the stand-in upstream on loopback. No network: litellm's cost map is the
local copy (LITELLM_LOCAL_MODEL_COST_MAP)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer
from tests.capture.standin import StandIn

if TYPE_CHECKING:
    from engine.capture.litellm import ContextPipeLogger

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# litellm and the tap built on it (engine.capture.litellm imports litellm), imported when this file's first
# test runs (_imports), not when pytest collects the suite: imported at collection, litellm's ~270,000
# objects (~120 MB) sat in the suite's process from its first test on, and every full collection scanned
# them.
litellm: Any = None
tap: Any = None


@pytest.fixture(scope="module", autouse=True)
def _imports() -> None:
    global litellm, tap
    litellm = pytest.importorskip("litellm")
    import engine.capture.litellm as tap


TOOLS = [
    {"type": "function", "function": {"name": "bash", "description": "Run", "parameters": {"type": "object"}}}
]
A_USAGE = {
    "input_tokens": 4621,
    "output_tokens": 17,
    "cache_read_tokens": 3400,
    "cache_write_tokens": 1200,
    "cache_write_1h_tokens": 200,
    "finish_reason": "tool_calls",  # why the model stopped, kept with the usage (litellm's OpenAI shape)
}
O_USAGE = {
    "input_tokens": 2048,
    "output_tokens": 12,
    "cache_read_tokens": 1920,
    "cache_write_tokens": 0,
    "finish_reason": "stop",
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[StandIn]:
    s = StandIn().start()
    yield s
    s.stop()


@pytest.fixture
def logger(tmp_path: Path) -> Iterator[ContextPipeLogger]:
    # (split=False: these calls ask the same opening again and again; one recording holds them all)
    lg = tap.ContextPipeLogger(record=tmp_path / "lite.cpsession", split=False)
    litellm.callbacks.append(lg)
    yield lg
    tap.uninstall(lg)
    lg.close()


def _wait_for(lg: ContextPipeLogger, calls: int) -> None:
    """litellm runs success callbacks off the caller's thread: wait (generously) until they ran."""
    deadline = time.monotonic() + 60
    while lg.stats.calls < calls and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lg.stats.calls >= calls, lg.stats


def _events(path: Path) -> list[dict[str, Any]]:
    return [unpack_event(e) for e in RecordingReader.open(path).events()]


def _finish(lg: ContextPipeLogger, path: Path, turns: int) -> list[dict[str, Any]]:
    lg.close()
    ev = _events(path)
    assert sorted(e["turn"] for e in ev if e["k"] == "actual") == list(range(turns))
    report = Replayer(ev).verify()
    assert report.ok, report.mismatches[:1]
    return ev


def test_litellm_openai_sync_and_stream(upstream: StandIn, logger: ContextPipeLogger, tmp_path: Path) -> None:
    kw: dict[str, Any] = {"model": "openai/gpt-4o", "api_base": upstream.url + "/v1", "api_key": "k"}
    msgs: list[Any] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    r = litellm.completion(messages=msgs, tools=TOOLS, **kw)
    _wait_for(logger, 1)
    msgs.append(r.choices[0].message)  # litellm's Message object in the history
    msgs.append({"role": "user", "content": "and now?"})
    chunks = list(
        litellm.completion(
            messages=msgs, tools=TOOLS, stream=True, stream_options={"include_usage": True}, **kw
        )
    )
    assert chunks
    _wait_for(logger, 2)
    assert logger.stats.errors == 0, logger.stats.last_error
    ev = _finish(logger, tmp_path / "lite.cpsession", 2)
    assert [e["usage"] for e in ev if e["k"] == "usage"] == [O_USAGE, O_USAGE]
    # the second request is the first plus the reply and the new user message (delta-encoded)
    actual = [e for e in ev if e["k"] == "actual"]
    assert actual[1]["base"] == 2 and len(actual[1]["add"]) == 2


def test_litellm_anthropic_cache_writes_and_streams(
    upstream: StandIn, logger: ContextPipeLogger, tmp_path: Path
) -> None:
    kw: dict[str, Any] = {
        "model": "anthropic/claude-sonnet-4",
        "api_base": upstream.url,
        "api_key": "k",
        "max_tokens": 50,
    }
    litellm.completion(messages=[{"role": "user", "content": "hi"}], **kw)
    list(litellm.completion(messages=[{"role": "user", "content": "hi"}], stream=True, **kw))
    _wait_for(logger, 2)
    assert logger.stats.errors == 0, logger.stats.last_error
    ev = _finish(logger, tmp_path / "lite.cpsession", 2)
    assert [e["usage"] for e in ev if e["k"] == "usage"] == [A_USAGE, A_USAGE]
    assert logger.tap is not None and logger.tap.provider == "anthropic"  # the shadow plans for Anthropic


def test_litellm_async_deepseek(upstream: StandIn, logger: ContextPipeLogger, tmp_path: Path) -> None:
    async def run() -> None:
        await litellm.acompletion(
            model="deepseek/deepseek-chat",
            api_base=upstream.url + "/v1",
            api_key="k",
            messages=[{"role": "user", "content": "hi"}],
        )
        deadline = time.monotonic() + 60  # async callbacks are tasks on this loop: keep it running
        while logger.stats.calls < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    asyncio.run(run())
    assert logger.stats.errors == 0, logger.stats.last_error
    ev = _finish(logger, tmp_path / "lite.cpsession", 1)
    (u,) = [e["usage"] for e in ev if e["k"] == "usage"]
    assert u == {
        "input_tokens": 900,
        "output_tokens": 30,
        "cache_read_tokens": 640,
        "cache_write_tokens": 0,
        "finish_reason": "stop",
        "reasoning_tokens": 20,
    }  # (DeepSeek's completion_tokens_details)


def test_litellm_failure_is_journaled_and_install_is_idempotent(upstream: StandIn, tmp_path: Path) -> None:
    lg = tap.install(record=tmp_path / "inst.cpsession")
    try:
        assert (
            tap.install() is lg and sum(isinstance(c, tap.ContextPipeLogger) for c in litellm.callbacks) == 1
        )
        with pytest.raises(litellm.exceptions.RateLimitError):
            litellm.completion(
                model="openai/gpt-4o-error429",
                api_base=upstream.url + "/v1",
                api_key="k",
                num_retries=0,
                messages=[{"role": "user", "content": "hi"}],
            )
        _wait_for(lg, 1)
        ev = _finish(lg, tmp_path / "inst.cpsession", 1)
        assert [e["kind"] for e in ev if e["k"] == "error"] == ["error"]
    finally:
        tap.uninstall(lg)


def test_litellm_call_is_stamped_when_it_was_made(
    upstream: StandIn, logger: ContextPipeLogger, tmp_path: Path
) -> None:
    # litellm calls its loggers once a call has ended; the as-sent request's time must be when it was
    # made (simulate reads the gaps between requests against the cache's lifetime), not 4 s later (the
    # answer's delay; 2 s of room for a loaded machine between the call and the stamp).
    kw: dict[str, Any] = {"model": "openai/gpt-4o", "api_base": upstream.url + "/v1", "api_key": "k"}
    made = time.time()
    litellm.completion(messages=[{"role": "user", "content": "[standin tokens=3 delay=4]"}], **kw)
    _wait_for(logger, 1)
    ev = _finish(logger, tmp_path / "lite.cpsession", 1)
    (actual,) = [e for e in ev if e["k"] == "actual"]
    assert made - 0.01 <= actual["time"] < made + 2.0, actual["time"] - made


def test_litellm_legacy_functions(upstream: StandIn, logger: ContextPipeLogger, tmp_path: Path) -> None:
    """The legacy function-calling API through litellm: its functions are the request's tools, the reply's
    function_call its call, and the function message its result (see tests/test_tap_legacy_functions.py)."""
    functions = [{"name": "bash", "description": "Run", "parameters": {"type": "object"}}]
    kw: dict[str, Any] = {
        "model": "openai/gpt-4o-functions",
        "api_base": upstream.url + "/v1",
        "api_key": "k",
    }
    msgs: list[Any] = [{"role": "user", "content": "List the files."}]
    r = litellm.completion(messages=msgs, functions=functions, **kw)
    _wait_for(logger, 1)
    fc = r.choices[0].message.function_call
    msgs += [
        {"role": "assistant", "content": None, "function_call": {"name": fc.name, "arguments": fc.arguments}},
        {"role": "function", "name": "bash", "content": "a.py"},
    ]
    litellm.completion(messages=msgs, functions=functions, **kw)
    _wait_for(logger, 2)
    assert logger.stats.errors == 0, logger.stats.last_error
    ev = _finish(logger, tmp_path / "lite.cpsession", 2)
    first = next(e for e in ev if e["k"] == "actual" and e["turn"] == 0)
    assert first.get("tool_names") == ["bash"], {k: v for k, v in first.items() if k != "add"}
    results = [e["part"] for e in ev if e["k"] == "part" and e["part"]["t"] == "result"]
    # (the id the tap gives a legacy function call, as the session's provider takes it: OpenAI takes ':';
    # engine/providers/call_ids.py, the one rule the importer and the pipeline share)
    assert [p["id"] for p in results] == ["function_call:bash"]


def test_litellm_anthropic_thinking_keeps_signatures(
    upstream: StandIn, logger: ContextPipeLogger, tmp_path: Path
) -> None:
    """litellm hands Anthropic's thinking back as `reasoning_content` (text) and `thinking_blocks` (with
    the signature and the redacted data): the shadow engine sends the blocks back as they came."""
    from tests.capture.standin import REDACTED, SIGNATURE, THINKING

    kw: dict[str, Any] = {
        "model": "anthropic/claude-sonnet-4-thinking",
        "api_base": upstream.url,
        "api_key": "k",
        "max_tokens": 50,
    }
    msgs: list[Any] = [{"role": "user", "content": "hi"}]
    r = litellm.completion(messages=msgs, tools=TOOLS, **kw)
    _wait_for(logger, 1)
    reply = r.choices[0].message
    assert reply.thinking_blocks and reply.thinking_blocks[0]["signature"] == SIGNATURE
    msgs.append(reply)
    msgs.append({"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "a.py"})
    litellm.completion(messages=msgs, tools=TOOLS, **kw)
    _wait_for(logger, 2)
    assert logger.stats.errors == 0, logger.stats.last_error
    path = tmp_path / "lite.cpsession"
    _finish(logger, path, 2)
    body = json.loads(Replayer(_events(path)).replan(1).serialized.body)
    content = [m for m in body["messages"] if m["role"] == "assistant"][0]["content"]
    assert content[:2] == [
        {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED},
    ]


def test_litellm_request_settings_and_server_are_on_the_turn(
    upstream: StandIn, logger: ContextPipeLogger, tmp_path: Path
) -> None:
    """What the OpenTelemetry export reads for gen_ai.request.* and server.*: litellm separates the
    settings out of the request (optional_params) and names the URL it called (api_base)."""
    from urllib.parse import urlsplit

    from engine.recording.journal import trace_of

    kw: dict[str, Any] = {"model": "openai/gpt-4o", "api_base": upstream.url + "/v1", "api_key": "k"}
    litellm.completion(
        messages=[{"role": "user", "content": "hi"}], max_tokens=50, temperature=0.3, stop=["END"], **kw
    )
    _wait_for(logger, 1)
    assert logger.stats.errors == 0, logger.stats.last_error
    ev = _finish(logger, tmp_path / "lite.cpsession", 1)
    (trace,) = [trace_of(e) for e in ev if e["k"] == "turn"]
    assert trace["request_params"] == {"max_tokens": 50, "temperature": 0.3, "stop_sequences": ["END"]}
    assert trace["server"] == {"address": "127.0.0.1", "port": urlsplit(upstream.url).port}
    assert trace["response_meta"]["id"] == "chatcmpl-standin"


def test_litellm_attempts_of_one_task_are_recorded_apart(upstream: StandIn, tmp_path: Path) -> None:
    """A batch runner in one process (one litellm callback for all) running a task twice, the second time
    while the first goes on: each run its own recording (the second lite-s2.cpsession, noted as the first's
    opening again), as the proxy files them. They were one recording, each start a history rewrite."""
    lg = tap.ContextPipeLogger(record=tmp_path / "lite.cpsession")
    litellm.callbacks.append(lg)
    try:
        kw: dict[str, Any] = {"model": "openai/gpt-4o", "api_base": upstream.url + "/v1", "api_key": "k"}
        runs: list[list[Any]] = [
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Fix the test."}]
            for _ in range(2)
        ]
        done = 0
        for step in range(3):
            for msgs in runs:
                upstream.script = [f"Run step {done}."]
                r = litellm.completion(messages=msgs, **kw)
                done += 1
                _wait_for(lg, done)
                msgs += [
                    {"role": "assistant", "content": r.choices[0].message.content},
                    {"role": "user", "content": f"output {step}"},
                ]
        assert lg.stats.errors == 0, lg.stats.last_error
    finally:
        tap.uninstall(lg)
        lg.close()
    for path in (tmp_path / "lite.cpsession", tmp_path / "lite-s2.cpsession"):
        ev = _events(path)
        assert sorted(e["turn"] for e in ev if e["k"] == "actual") == [0, 1, 2]
        traces = {e["turn"]: e for e in ev if e["k"] == "turn"}
        assert not any("history_rewrite" in json.dumps(t) for t in traces.values())
        assert Replayer(ev).verify().ok
    second = [e for e in _events(tmp_path / "lite-s2.cpsession") if e["k"] == "turn" and e["turn"] == 0]
    assert '"same_opening"' in json.dumps(second)
