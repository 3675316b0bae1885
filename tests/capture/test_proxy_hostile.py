"""A hostile user of the proxy, after capture21's audit: upstream redirects, a second proxy on a taken port,
HTTP/1.1 pipelining, an IPv6 listener, an upstream whose TLS certificate does not verify. Real sockets,
the real SDK, the stand-in upstream; each test names what it found on the old proxy."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import ssl
import subprocess
import threading
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import web

from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.server import ProxyError, ProxyServer
from tests.capture.conftest import errors, usages, verify_ok
from tests.capture.standin import StandIn


class Upstream:
    """A small aiohttp upstream in its own thread, for behaviours the stand-in does not have."""

    def __init__(self, app: web.Application, ssl_context: ssl.SSLContext | None = None) -> None:
        self.port = 0
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
            loop.run_until_complete(site.start())
            server: Any = site._server
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "moved"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}


@pytest.fixture
def redirecting() -> Iterator[tuple[Upstream, list[str]]]:
    """Redirects /v1/chat/completions to its own /v1/chat/completions/ (a trailing-slash redirect, as
    gateways send), with an absolute Location on itself; answers there."""
    seen: list[str] = []
    up: Upstream

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        seen.append(request.path)
        if request.path == "/v1/chat/completions":
            raise web.HTTPTemporaryRedirect(location=f"http://127.0.0.1:{up.port}/v1/chat/completions/")
        return web.json_response(REPLY)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    up = Upstream(app)
    yield up, seen
    up.stop()


def test_redirect_on_the_upstream_comes_back_through_the_proxy(
    redirecting: tuple[Upstream, list[str]], tmp_path: Path
) -> None:
    """Old proxy: the 307 was passed on with the upstream's absolute Location, so the SDK re-sent the call
    (and its API key) straight to the upstream, unrecorded, and the recording held one failed turn
    ('response is not JSON') for a call that succeeded."""
    up, seen = redirecting
    rec = Recorder(tmp_path / "rec", serve=False)
    with ProxyServer({"openai": f"http://127.0.0.1:{up.port}"}, rec) as px:
        client = openai.OpenAI(base_url=px.url + "/v1", api_key="k", max_retries=0)
        r = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content == "moved"
        raw = client.chat.completions.with_raw_response.create(  # what the agent was told
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
        assert raw.http_request.url == px.url + "/v1/chat/completions/"  # httpx followed it to the proxy
    rec.close()
    assert seen == ["/v1/chat/completions", "/v1/chat/completions/"] * 2
    # the two calls, each once, not the redirect hops; the same one-message request twice is two
    # conversations with one opening (engine.capture.lineage), a session each
    infos = [info for info, _ in rec.sessions.values()]
    assert [(info.calls, info.errors) for info in infos] == [(1, 0), (1, 0)]
    for info in infos:
        assert errors(info.path) == [] and len(usages(info.path)) == 1
        verify_ok(info.path)
    # noted once, though both calls were redirected
    assert len(rec.skipped) == 1 and "HTTP 307 to " + px.url + "/v1/chat/completions/" in rec.skipped[0]


def test_redirect_elsewhere_is_passed_on_and_noted(standin: StandIn, tmp_path: Path) -> None:
    """A Location on another host is left alone (the agent goes there itself); the redirect is not
    recorded as a failed call, and the proxy says it was not recorded."""
    target = standin.url + "/v1/chat/completions"

    async def handle(request: web.Request) -> web.Response:
        raise web.HTTPPermanentRedirect(location=target)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    up = Upstream(app)
    try:
        rec = Recorder(tmp_path / "rec", serve=False)
        with ProxyServer({"openai": f"http://127.0.0.1:{up.port}"}, rec) as px:
            client = openai.OpenAI(base_url=px.url + "/v1", api_key="k", max_retries=0)
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        rec.close()
    finally:
        up.stop()
    assert rec.sessions == {}  # no turn: the call went around the proxy
    assert rec.skipped == [
        f"a request to /v1/chat/completions was redirected (HTTP 308 to {target}); "
        "the call is recorded where the agent re-sent it, if through the proxy"
    ]


def test_second_proxy_on_a_taken_port_says_so_and_leaks_nothing(standin: StandIn) -> None:
    """Old proxy: the error was clear, but the failed start left its upstream client session unclosed
    (aiohttp's 'Unclosed client session' at the next collection) and its event loop open."""
    gc.collect()  # what earlier tests left behind is not this test's
    with ProxyServer({"openai": standin.url}) as px:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            second = ProxyServer({"openai": standin.url}, port=px.port)
            with pytest.raises(ProxyError, match=f"could not listen on 127.0.0.1:{px.port}.*address already in use"):
                second.start()
            del second
            gc.collect()
        leaks = [
            str(w.message)
            for w in caught
            if issubclass(w.category, ResourceWarning) and ("client session" in str(w.message) or "event loop" in str(w.message))
        ]
        assert leaks == []


def test_pipelined_requests_are_answered_in_order_and_recorded(proxied: Any) -> None:
    """HTTP/1.1 pipelining: two calls written back to back on one connection before any answer."""
    def post(messages: list[dict[str, str]], extra: str = "") -> bytes:
        body = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n"
        )
        return head.encode() + body

    one = [{"role": "user", "content": "one"}]
    two = [*one, {"role": "assistant", "content": "Hello from the stand-in."}, {"role": "user", "content": "two"}]
    host, port = proxied.server.host, proxied.server.port
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(post(one) + post(two, "Connection: close\r\n"))
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    assert out.count(b"HTTP/1.1 200 OK") == 2
    [path] = proxied.finish()
    assert verify_ok(path) == 2 and len(usages(path)) == 2


def test_ipv6_listener(standin: StandIn) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        px = ProxyServer({"openai": standin.url}, host="::1").start()
    except ProxyError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    try:
        assert px.url.startswith("http://[::1]:")
        client = openai.OpenAI(base_url=px.url + "/v1", api_key="k", max_retries=0)
        r = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content == "Hello from the stand-in."
    finally:
        px.stop()


def test_upstream_tls_failure_names_the_upstream_and_the_cause(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost"],
        capture_output=True,
    )
    if made.returncode != 0:
        pytest.skip("openssl could not make a certificate")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    app = web.Application()
    async def reply(request: web.Request) -> web.Response:
        return web.json_response(REPLY)

    app.router.add_route("*", "/{tail:.*}", reply)
    up = Upstream(app, ctx)
    try:
        rec = Recorder(tmp_path / "rec", serve=False)
        url = f"https://127.0.0.1:{up.port}"
        with ProxyServer({"openai": url}, rec) as px:
            client = openai.OpenAI(base_url=px.url + "/v1", api_key="k", max_retries=0)
            with pytest.raises(openai.APIStatusError) as info:
                client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        rec.close()
    finally:
        up.stop()
    said = info.value.message
    assert info.value.status_code == 502
    assert f"could not reach the upstream {url}/v1/chat/completions" in said
    assert "CERTIFICATE_VERIFY_FAILED" in said and "self-signed certificate" in said
    [(session, _)] = rec.sessions.values()
    assert "CERTIFICATE_VERIFY_FAILED" in errors(session.path)[0]["message"]


def test_connect_is_refused_with_what_to_do(
    proxied: Any, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent given the proxy as HTTPS_PROXY (instead of its base URL) asks it for a CONNECT tunnel.
    Old proxy: a bare '404: Not Found', the connection left open, the SDK's 'Connection error.' and
    nothing anywhere saying why no call was recorded."""
    host, port = proxied.server.host, proxied.server.port
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n")
        out = b""
        while chunk := sock.recv(65536):  # the proxy closes the connection: no wait for a timeout
            out += chunk
    status = out.split(b"\r\n", 1)[0].decode()
    assert status == "HTTP/1.1 405 Not a forward proxy: set the agent's base URL to this proxy, not HTTPS_PROXY"
    monkeypatch.setenv("HTTPS_PROXY", proxied.url)
    before = len(standin.requests)
    with openai.OpenAI(api_key="k", max_retries=0, base_url="https://api.openai.com/v1", timeout=5) as client:
        with pytest.raises(openai.APIConnectionError) as info:
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert "405 Not a forward proxy" in str(info.value.__cause__)  # where httpx puts the reason
    assert len(standin.requests) == before
    proxied.finish()
    assert proxied.recorder.skipped == [  # once, though asked twice
        "a CONNECT to api.openai.com:443 was refused: the agent uses this proxy as its HTTPS_PROXY; "
        "set its base URL instead (ANTHROPIC_BASE_URL, OPENAI_BASE_URL), or use `cp-inspect run`"
    ]


def test_azure_openai_client_through_the_proxy(proxied: Any, standin: StandIn) -> None:
    """An AzureOpenAI client pointed at the proxy sends /openai/deployments/{name}/chat/completions. Old
    proxy: it took the leading /openai for its own provider prefix and stripped it, so the upstream (an
    Azure resource) was asked for /deployments/... and answered 404."""
    with openai.AzureOpenAI(
        azure_endpoint=proxied.url, api_version="2024-10-21", api_key="k", max_retries=0
    ) as client:
        r = client.chat.completions.create(model="gpt-4o-dep", messages=[{"role": "user", "content": "azure"}])
    assert r.choices[0].message.content == "Hello from the stand-in."
    path, headers, _ = standin.requests[-1]
    assert path == "/openai/deployments/gpt-4o-dep/chat/completions"
    assert headers["api-key"] == "k"
    [rec_path] = proxied.finish()
    assert verify_ok(rec_path) == 1 and errors(rec_path) == []


def test_azure_v1_paths_are_kept_for_an_azure_upstream() -> None:
    from engine.capture.proxy.routes import DEFAULT_UPSTREAMS, match, upstream_url

    azure = {**DEFAULT_UPSTREAMS, "openai": "https://res.openai.azure.com"}
    r = match("/openai/v1/chat/completions", "", {}, azure)
    assert (r.wire, upstream_url(r, azure)) == ("openai-chat", "https://res.openai.azure.com/openai/v1/chat/completions")
    # elsewhere /openai stays the proxy's provider prefix before OpenAI's own path
    r = match("/openai/v1/chat/completions", "", {}, DEFAULT_UPSTREAMS)
    assert upstream_url(r, DEFAULT_UPSTREAMS) == "https://api.openai.com/v1/chat/completions"


def test_many_sessions_keep_descriptors_bounded(proxied: Any) -> None:
    """A harness running many tasks through one proxy: each task is a session. Old proxy: every session
    was served live on its own probe socket (five descriptors and a thread each, on top of its recording
    file), so a few dozen to a few hundred tasks ran a 256- or 1024-descriptor process out of them, and
    then new calls could not be accepted. Only the most recently active sessions are served now."""
    from engine.capture.proxy import recording
    from engine.probe.client import list_agents

    cap = getattr(recording, "MAX_SERVED", 16)
    n = cap + 12

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    url = proxied.url + "/v1/chat/completions"
    before = fds()
    for i in range(n):
        body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": f"task {i}"}]}).encode()
        req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
    assert proxied.recorder.flush(30)
    grown = fds() - before
    served = sorted(a.session for a in list_agents() if a.session is not None)
    assert served == list(range(n - cap + 1, n + 1))  # the most recent ones
    # a recording file per session, a probe's few per served one (and a little slack for the loop)
    assert grown <= n + 5 * cap + 8, grown
    infos = [info for info, _ in proxied.recorder.sessions.values()]
    assert "no longer served live" in " ".join(infos[0].notes)
    for path in proxied.finish():
        assert verify_ok(path) == 1
