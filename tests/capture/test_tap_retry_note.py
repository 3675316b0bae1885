"""A tapped call's failed attempt keeps its error as the proxy keeps a held attempt's: the status, the
retry-after, then the body, cut at the one length both use (proxy.retries.NOTE_CHARS)."""

from __future__ import annotations

import httpx

from engine.capture import tap_retries
from engine.capture.proxy.retries import NOTE_CHARS


def test_a_long_error_body_is_cut_at_the_proxys_length() -> None:
    req = httpx.Request(
        "POST", "https://api.anthropic.com/v1/messages", headers={"x-stainless-retry-count": "0"}
    )
    body = b'{"type":"error","error":{"type":"rate_limit_error","message":"' + b"slow down " * 200 + b'"}}'
    failed = httpx.Response(429, headers={"retry-after": "2"}, content=body, request=req)
    ok = httpx.Response(200, content=b"{}", request=req)
    tries: list[dict[str, object]] = []
    token = tap_retries.running(tries)
    try:  # the hooks the tap puts on the SDK's httpx client, as it sends two attempts
        for resp in (failed, ok):
            tap_retries._on_request(req)
            tap_retries._on_response(resp)
    finally:
        tap_retries.done(token)
    (note,) = tap_retries.attempts_before(tries)
    assert note["status"] == 429 and note["retry_after"] == "2" and note["sdk_retry_count"] == 0
    error = note["error"]
    assert isinstance(error, str) and len(error) == NOTE_CHARS
    assert error.startswith('HTTP 429 (retry-after: 2): {"type":"error"')
