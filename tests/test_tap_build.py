"""The serving build (`system_fingerprint`) of tapped and proxied DeepSeek calls reaches simulate.

DeepSeek's cache persistence differs by build (engine.sim.cachesim.DEEPSEEK_PERSIST_BY_FINGERPRINT). The
tap and the proxy journal a request's `actual` event before its reply names the build, so the build is
journaled after the reply as a `build` event; simulate reads it as it reads an import's. Real SDKs against
the stand-in upstream, streamed and not, sync and async."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from engine.capture.tap import tap
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer
from engine.sim.simulate import simulate_file
from tests.capture.standin import StandIn

OLD_BUILD = "fp_eaab8d114b_prod0820_fp8_kvcache_new_kvcache"  # persisted about half the requests' cache


@pytest.fixture(scope="module")
def upstream() -> Iterator[StandIn]:
    s = StandIn(fingerprint=OLD_BUILD).start()
    yield s
    s.stop()


def _events(path: Path) -> list[dict[str, Any]]:
    return [unpack_event(e) for e in RecordingReader.open(path).events()]


def _check(path: Path, turns: int) -> None:
    ev = _events(path)
    assert [e["turn"] for e in ev if e["k"] == "actual"] == list(range(turns))
    # journaled once (it did not change), under the first turn, before that turn's usage
    builds = [e for e in ev if e["k"] == "build"]
    assert builds == [{"k": "build", "turn": 0, "system_fingerprint": OLD_BUILD}]
    kinds = [e["k"] for e in ev if e.get("turn") == 0 and e["k"] in ("build", "usage")]
    assert kinds == ["build", "usage"]
    report = Replayer(ev).verify()
    assert report.ok, report.mismatches[:1]
    notes = simulate_file(path).notes
    assert f"DeepSeek build {OLD_BUILD}: persist probability 0.5" in notes


MSGS: list[Any] = [{"role": "user", "content": "List the files."}]


def test_sync_tap_records_the_build(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "s.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url + "/v1", max_retries=0), record=rec)
    r = client.chat.completions.create(model="deepseek-chat", messages=MSGS)
    assert r.system_fingerprint == OLD_BUILD  # the agent's reply is untouched
    history = [*MSGS, {"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "go"}]
    stream = client.chat.completions.create(
        model="deepseek-chat", messages=history, stream=True, stream_options={"include_usage": True}
    )
    assert [c.system_fingerprint for c in stream][0] == OLD_BUILD
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0
    _check(rec, 2)


def test_async_tap_records_the_build(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "a.cpsession"

    async def run() -> None:
        client = tap(openai.AsyncOpenAI(api_key="k", base_url=upstream.url + "/v1", max_retries=0), record=rec, split=False)
        stream = await client.chat.completions.create(
            model="deepseek-chat", messages=MSGS, stream=True, stream_options={"include_usage": True}
        )
        async for _ in stream:
            pass
        await client.chat.completions.create(model="deepseek-chat", messages=MSGS)
        client.contextpipe_tap.close()
        assert client.contextpipe_stats.errors == 0

    asyncio.run(run())
    _check(rec, 2)


def test_proxy_records_the_build(upstream: StandIn, tmp_path: Path) -> None:
    from engine.capture.proxy.recording import Recorder
    from engine.capture.proxy.server import ProxyServer

    rec = Recorder(tmp_path / "rec", serve=False)
    with ProxyServer({"deepseek": upstream.url, "openai": upstream.url}, rec) as px:
        client = openai.OpenAI(base_url=px.url + "/deepseek", api_key="k", max_retries=0)
        r = client.chat.completions.create(model="deepseek-chat", messages=MSGS)
        # the conversation goes on (the same request again would be another conversation: a session of its own)
        more = [*MSGS, {"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "More."}]
        stream = client.chat.completions.create(
            model="deepseek-chat", messages=more, stream=True, stream_options={"include_usage": True}
        )
        list(stream)
    rec.close()
    [(info, _)] = rec.sessions.values()
    _check(info.path, 2)
