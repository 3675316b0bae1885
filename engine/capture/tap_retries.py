"""An SDK's own retries, seen from inside a tapped client: the attempts of one call, not calls.

The anthropic and openai SDKs retry a failed call themselves (429, 408, 409, 5xx and Anthropic's 529,
or the server not reached) inside `create()`, so the tap, which wraps `create()`, saw one call: a turn
that took 9 s with no word of the two rate limits it met, or a failed turn whose earlier attempts were
gone. Through the proxy each attempt is a request of its own, and engine/capture/proxy/retries.py makes
the failed ones attempts of the turn their retry becomes. Here the same: each HTTP attempt the SDK
sends for a tapped call is seen through the SDK's httpx client's event hooks (a `request` hook and a
`response` hook, the documented way to watch each request an httpx client sends), tied to its call by
a context variable set while the call runs (a thread's, or an asyncio task's own copy), so concurrent
calls keep their attempts apart. When the call ends, the attempts before its last one go on its turn's
trace under the proxy's key (RETRIES_KEY, one note each: status, error, when, the SDK's
`x-stainless-retry-count`) and as the proxy's `retried` diag event; the last attempt is the call's own
outcome (its reply, or the failure it ended with).

A failed attempt's body is read in the hook (only for a status of 400 and up: an error's few hundred
bytes; httpx's documented way, `response.read()`, caches it for the SDK, which reads it again or
closes it). Every hook is guarded: nothing here can fail the agent's call.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from typing import Any

# (an attempt noted as the proxy notes it: its error cut at the same length)
from engine.capture.proxy.retries import NOTE_CHARS, RETRY_COUNT_HEADER, retry_count

# The attempts list of the tapped call running in this thread or task (None: not a tapped call)
_TRIES: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "contextpipe_tap_tries", default=None
)
_HOOKED = "_contextpipe_tries_hooked"  # set on an httpx client once its hooks are in


def running(tries: list[dict[str, Any]]) -> contextvars.Token[list[dict[str, Any]] | None]:
    """While a tapped call runs: its attempts go to `tries` (reset with the token when it returns)."""
    return _TRIES.set(tries)


def done(token: contextvars.Token[list[dict[str, Any]] | None]) -> None:
    _TRIES.reset(token)


def _sent(request: Any) -> None:
    tries = _TRIES.get()
    if tries is None:
        return
    try:
        n = retry_count(request.headers.get(RETRY_COUNT_HEADER))
    except Exception:
        n = None
    tries.append({"sent": time.time(), "status": None, "sdk_retry_count": n})


def _answered(response: Any, body: bytes) -> None:
    tries = _TRIES.get()
    if not tries:
        return
    last = tries[-1]
    last["status"] = int(response.status_code)
    last["ended"] = time.time()
    wait = response.headers.get("retry-after") or ""
    if wait:
        last["retry_after"] = str(wait)[:100]
    if last["status"] >= 400:
        said = f" (retry-after: {wait})" if wait else ""
        last["error"] = f"HTTP {last['status']}{said}: {body[:2000].decode('utf-8', 'replace')}"[:NOTE_CHARS]


def _on_request(request: Any) -> None:
    try:
        _sent(request)
    except Exception:  # the agent's call must not fail for the tap
        pass


def _on_response(response: Any) -> None:
    try:
        body = response.read() if response.status_code >= 400 and _TRIES.get() is not None else b""
        _answered(response, body)
    except Exception:
        pass


async def _aon_request(request: Any) -> None:
    _on_request(request)


async def _aon_response(response: Any) -> None:
    try:
        body = b""
        if response.status_code >= 400 and _TRIES.get() is not None:
            body = await response.aread()
        _answered(response, body)
    except Exception:
        pass


def hook(client: Any, is_async: bool) -> bool:
    """Put the attempt hooks on an SDK client's httpx client (`client._client`, both SDKs' name for it;
    once, however many taps share it). False if it has none the tap can hook (the calls are journaled
    as before, without their attempts)."""
    http = getattr(client, "_client", None)
    hooks = getattr(http, "event_hooks", None)
    if http is None or not isinstance(hooks, dict):
        return False
    if getattr(http, _HOOKED, False):
        return True
    on_request: Callable[[Any], Any] = _aon_request if is_async else _on_request
    on_response: Callable[[Any], Any] = _aon_response if is_async else _on_response
    try:
        http.event_hooks = {
            "request": [*hooks.get("request", ()), on_request],
            "response": [*hooks.get("response", ()), on_response],
        }
        setattr(http, _HOOKED, True)
    except Exception:
        return False
    return True


def attempts_before(tries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace's RETRIES_KEY value of a call whose SDK sent `tries`: every attempt before the last
    (the last is the call's own outcome), numbered from 0 as the proxy's notes are; [] for one attempt."""
    out: list[dict[str, Any]] = []
    for i, t in enumerate(tries[:-1]):
        note: dict[str, Any] = {
            "attempt": i,
            "status": t.get("status"),
            "error": t.get("error") or "the upstream was not reached",
            "sent": t.get("sent"),
            "ended": t.get("ended", t.get("sent")),
        }
        if t.get("retry_after"):
            note["retry_after"] = t["retry_after"]
        if t.get("sdk_retry_count") is not None:
            note["sdk_retry_count"] = t["sdk_retry_count"]
        out.append(note)
    return out
