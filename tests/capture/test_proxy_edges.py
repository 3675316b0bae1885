"""The proxy at its edges: compressed bodies both ways, an agent that goes away while the upstream is
silent, and OpenAI paths that end like Anthropic's. Real sockets, the stand-in upstream, real SDKs."""

from __future__ import annotations

import gzip
import json
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest

from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.server import ProxyServer
from tests.capture.conftest import Proxied, errors, usages, verify_ok
from tests.capture.standin import USAGE_OPENAI, StandIn

CHAT = {
    "model": "gpt-4o",
    "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}],
}


def _wait(cond: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _established_to(port: int) -> int:
    """Open TCP connections to `port` on this host (the proxy's connections to its upstream)."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "01" and int(f[2].rsplit(":", 1)[1], 16) == port:  # 01 = ESTABLISHED
                n += 1
    return n


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_request_body_reaches_the_upstream_and_the_recording(
    proxied: Proxied, standin: StandIn, encoding: str
) -> None:
    raw = json.dumps(CHAT).encode()
    packed = gzip.compress(raw) if encoding == "gzip" else zlib.compress(raw)
    headers = {"content-type": "application/json", "content-encoding": encoding, "authorization": "Bearer k"}
    with httpx.Client(timeout=30) as c:
        r = c.post(proxied.url + "/v1/chat/completions", content=packed, headers=headers)
    # The upstream decodes what it was sent as the agent labelled it: the same request, answered
    assert r.status_code == 200, r.text
    assert standin.requests[-1][2] == raw and standin.requests[-1][1]["content-encoding"] == encoding
    assert r.json()["usage"] == USAGE_OPENAI
    paths = proxied.finish()
    assert proxied.recorder.skipped == []
    assert len(paths) == 1 and len(usages(paths[0])) == 1 and not errors(paths[0])
    verify_ok(paths[0])


def test_zstd_response_is_passed_on_and_recorded(proxied: Proxied, standin: StandIn) -> None:
    # httpx (under both SDKs) lists zstd in Accept-Encoding when zstandard is installed; a CDN answers so
    body = {**CHAT, "model": "gpt-4o-zstd"}
    with httpx.Client(timeout=30) as c:
        r = c.post(proxied.url + "/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.headers["content-encoding"] == "zstd"
    assert r.json()["usage"] == USAGE_OPENAI  # httpx decoded the upstream's bytes, passed on unchanged
    paths = proxied.finish()
    assert not errors(paths[0]), errors(paths[0])
    assert usages(paths[0]) == [
        {"input_tokens": 2048, "output_tokens": 12, "cache_read_tokens": 1920, "cache_write_tokens": 0}
    ]
    verify_ok(paths[0])


def test_agent_gone_while_the_stream_is_silent_closes_the_upstream_at_once(
    proxied: Proxied, standin: StandIn
) -> None:
    # The stream pauses 8 s half-way (a model thinking without a word): the agent reads the first
    # event, then gives up. The upstream must be let go now, not when its next event arrives.
    body = {**CHAT, "stream": True, "messages": [{"role": "user", "content": "[standin tokens=5 delay=8]"}]}
    with (
        httpx.Client(timeout=30) as c,
        c.stream("POST", proxied.url + "/v1/chat/completions", json=body) as r,
    ):
        assert next(r.iter_raw()).startswith(b"data: ")
        assert _established_to(standin.port) == 1
    assert _wait(lambda: _established_to(standin.port) == 0, 3), "the upstream call outlived the agent"
    assert _wait(lambda: sum(i.errors for i, _ in proxied.recorder.sessions.values()) == 1, 3)
    paths = proxied.finish()
    errs = errors(paths[0])
    assert len(errs) == 1 and "agent disconnected" in errs[0]["message"], errs
    verify_ok(paths[0])


def test_agent_timing_out_before_the_answer_cancels_the_upstream_call(
    proxied: Proxied, standin: StandIn
) -> None:
    # A non-streamed call the SDK gives up on after 1 s (it would retry): the proxy must not keep the
    # first call running upstream, nor record it later as an answer the agent never read.
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0, timeout=1.0)
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "[standin tokens=5 delay=8]"}]
        )
    assert _wait(lambda: _established_to(standin.port) == 0, 3), "the upstream call outlived the agent"
    assert _wait(lambda: sum(i.errors for i, _ in proxied.recorder.sessions.values()) == 1, 3)
    paths = proxied.finish()
    errs = errors(paths[0])
    assert len(errs) == 1 and "agent disconnected before the upstream answered" in errs[0]["message"], errs
    assert usages(paths[0]) == []


def test_openai_messages_resources_go_to_openai_unrecorded(
    standin: StandIn, tmp_path: Path, rtdir: Path
) -> None:
    # Anthropic's upstream is somewhere else entirely: nothing of an OpenAI call (its key least of all)
    # may be sent there. The stored completions' /chat/completions/{id}/messages ends like /v1/messages.
    rec = Recorder(tmp_path / "rec", serve=False)
    with ProxyServer({"anthropic": "http://127.0.0.1:9", "openai": standin.url}, rec) as px:
        client = openai.OpenAI(base_url=px.url + "/v1", api_key="sk-openai-key", max_retries=0)
        with pytest.raises(openai.BadRequestError):  # the stand-in has no stored completions: 400
            client.chat.completions.messages.list("chatcmpl-1")
        path, headers, _ = standin.requests[-1]
        assert path == "/v1/chat/completions/chatcmpl-1/messages"
        assert headers["authorization"] == "Bearer sk-openai-key"
        with pytest.raises(openai.BadRequestError):  # a GET on a model-call path lists, it is no call
            client.chat.completions.list()
        assert standin.requests[-1][0] == "/v1/chat/completions"
    rec.close()
    assert rec.sessions == {} and rec.skipped == []
