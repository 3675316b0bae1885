"""A WebSocket opening handshake to the proxy (Codex opens `GET /v1/responses` as one before it uses HTTP)
is answered at once with 426 Upgrade Required, never forwarded, and the recorder notes it. A real
handshake over a real socket, written byte by byte as RFC 6455 4.1 gives it, and the websockets client."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest

from tests.capture.conftest import Proxied
from tests.capture.standin import StandIn

HANDSHAKE = (
    "GET /v1/responses HTTP/1.1\r\n"
    "Host: {host}\r\n"
    "Upgrade: websocket\r\n"
    "Connection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\n"
    "Authorization: Bearer sk-proj-SECRET\r\n"
    "OpenAI-Beta: responses_websockets=2026-02-06\r\n"
    "\r\n"
)


def _read_all(sock: socket.socket, limit: float = 30.0) -> bytes:
    """Everything until the proxy closes the connection (a refused upgrade ends it). A connection the
    proxy kept open would end at the server's keep-alive timeout (aiohttp's 75 s), past `limit`: the
    recv then raises, so "closed at once" is told without a clock bound a loaded host could break."""
    sock.settimeout(limit)
    out = b""
    while True:
        data = sock.recv(65536)
        if not data:
            return out
        out += data


def test_websocket_handshake_is_refused_with_426(proxied: Proxied, standin: StandIn) -> None:
    before = len(standin.requests)
    u = urlsplit(proxied.url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as sock:
        sock.sendall(HANDSHAKE.format(host=u.netloc).encode())
        raw = _read_all(sock)  # (closed after the answer: no wait for a client or keep-alive timeout)
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *headers = head.decode("latin-1").split("\r\n")
    assert status == "HTTP/1.1 426 Upgrade Required", raw[:200]
    lowered = {h.split(":", 1)[0].lower(): h.split(":", 1)[1].strip() for h in headers}
    assert lowered["connection"].lower() == "close"
    assert "sec-websocket-accept" not in lowered  # not a 101: the handshake is refused
    assert b"WebSocket is not supported here (GET /v1/responses)" in body
    assert b"proxy_426" in body  # in the OpenAI error shape the agent's SDK reads
    assert len(standin.requests) == before  # never forwarded (the upstream would have seen a plain GET)
    proxied.finish()
    assert any("WebSocket upgrade (GET /v1/responses)" in s and "426" in s for s in proxied.recorder.skipped)


def test_websocket_client_sees_the_refusal(proxied: Proxied) -> None:
    sync_client = pytest.importorskip("websockets.sync.client")
    from websockets.exceptions import InvalidStatus

    ws_url = proxied.url.replace("http://", "ws://") + "/v1/responses"
    with pytest.raises(InvalidStatus) as info:
        sync_client.connect(ws_url, open_timeout=5)
    assert info.value.response.status_code == 426


def test_plain_get_still_forwarded(proxied: Proxied, standin: StandIn) -> None:
    """Only an upgrade is refused: a GET without one (listing a stored response) still goes upstream."""
    u = urlsplit(proxied.url)
    before = len(standin.requests)
    with socket.create_connection((u.hostname, u.port), timeout=5) as sock:
        sock.sendall(f"GET /v1/responses/resp_1 HTTP/1.1\r\nHost: {u.netloc}\r\nConnection: close\r\n\r\n".encode())
        raw = _read_all(sock)
    assert raw.startswith(b"HTTP/1.1 404")  # the stand-in's answer: no such response
    assert len(standin.requests) == before + 1
