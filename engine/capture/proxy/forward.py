"""The forwarding core: an aiohttp handler that relays a request to its upstream and the response back.

Thin on purpose (recording is a hook that gets the finished `Exchange`): the body is read whole (it is
needed for the recording, and agents send bodies of kilobytes to a few megabytes) and forwarded as
sent, still compressed if the agent compressed it (see SERVER_OPTIONS), headers pass
through untouched except hop-by-hop ones and `X-ContextPipe-Session`, so API keys go to the upstream
and nowhere else. The response streams back chunk by chunk as it arrives (`iter_any`: whatever bytes
the socket has, no line or event buffering), still compressed if the upstream compressed it, so the
agent receives byte for byte what the upstream sent, with no added wait for the first token.

When the upstream cannot be reached the agent gets a 502 in its API's own error shape, naming the
upstream and what to check. When the agent goes away (mid-stream, or before the upstream answered)
the upstream request is closed at once (as it would be without the proxy) and the exchange is recorded
as incomplete. A WebSocket handshake (Codex's first try at `/v1/responses`) is answered 426 at once,
which tells the client to use HTTP (see refuse_websocket).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

from engine.capture.proxy.exchange import Exchange
from engine.capture.proxy.peer import look_up
from engine.capture.proxy.retries import RETRY_COUNT_HEADER, retry_count
from engine.capture.proxy.routes import (
    HOP_BY_HOP,
    SESSION_HEADER,
    Route,
    match,
    unrecorded_call,
    upstream_url,
)

Hook = Callable[[Exchange], None]
UPSTREAMS_KEY: web.AppKey[dict[str, str]] = web.AppKey("upstreams", dict)
HOOK_KEY: web.AppKey[Any] = web.AppKey("hook", object)
CLIENT_KEY: web.AppKey[aiohttp.ClientSession] = web.AppKey("client", aiohttp.ClientSession)
MAX_BODY = 512 * 1024 * 1024  # the proxy's own ceiling on a request body; upstreams enforce theirs
# How the aiohttp server must run for this handler (web.AppRunner's keyword arguments):
# - auto_decompress off: a compressed request body (Content-Encoding: gzip, zstd...) is read and forwarded
#   as the agent sent it, with its Content-Encoding header; decoded, it would reach the upstream labelled
#   with a coding it no longer has, and be refused. The recorder decodes its own copy.
# - handler_cancellation on: when the agent disconnects, the handler is cancelled wherever it waits, so
#   the upstream request is closed at once, as the agent's own disconnect would close it. Without it the
#   handler only notices on its next write, which for a model thinking silently (or a non-streamed call
#   the agent timed out on) is when the upstream has finished the whole, billed, generation.
SERVER_OPTIONS: dict[str, Any] = {"auto_decompress": False, "handler_cancellation": True}
GONE = "the agent disconnected before the response ended"
# How long the end of a call's answer may wait for the look-up of who made it (peer.py), on the first call
# of a connection answered faster than the look-up: see _peer_known. A look-up took 1-60 ms at load 7-13
# here; the bound is for a starved host, or a burst of new connections queued on the one look-up thread.
PEER_WAIT_S = 0.5


def error_body(route: Route, status: int, message: str) -> bytes:
    """An error in the shape the agent's SDK parses, so its message reaches the user."""
    if route.wire == "anthropic" or route.provider == "anthropic":
        obj: dict[str, Any] = {"type": "error", "error": {"type": "api_error", "message": message}}
    else:
        obj = {"error": {"message": message, "type": "proxy_error", "code": f"proxy_{status}"}}
    return json.dumps(obj).encode()


def is_websocket_upgrade(headers_lc: dict[str, str]) -> bool:
    """A WebSocket opening handshake (RFC 6455 4.1: `Upgrade: websocket`, `Connection: Upgrade`)."""
    return any(t.strip().lower() == "websocket" for t in headers_lc.get("upgrade", "").split(","))


def refuse_websocket(request: web.Request, route: Route, hook: Hook | None) -> web.Response:
    """Answer a WebSocket handshake at once with 426 Upgrade Required, and say so to the recorder.

    The proxy records HTTP exchanges; a WebSocket carries the calls in frames it would pass unseen. Codex
    opens `GET /v1/responses` as a WebSocket first and takes a 426 answer to its handshake as "use HTTP
    here", switching to POST + SSE in the same turn (other failures, such as the plain GET this was
    forwarded as, went through its retry budget first: seconds of "Reconnecting..."). A non-101 answer
    refuses the handshake (RFC 6455 4.1, 4.2.2); 426 (RFC 9110 15.5.22) is the one Codex acts on at
    once. No Upgrade header names another protocol to switch to: there is none, the client should stay
    on HTTP. The connection is closed, so nothing the client may already send as frames is read as HTTP.
    """
    where = f"{request.method} {request.path}"
    msg = (
        f"cp-inspect proxy: WebSocket is not supported here ({where}); it records HTTP only. "
        "Use HTTP (POST with stream: true): Codex switches to it by itself on this answer"
    )
    note = getattr(hook, "note", None)
    if callable(note):
        note(
            f"a WebSocket upgrade ({where}) was answered 426 Upgrade Required: the agent was told to use HTTP"
        )
    resp = web.Response(
        status=426,
        reason="Upgrade Required",
        body=error_body(route, 426, msg),
        content_type="application/json",
    )
    resp.force_close()  # Connection: close, and the server ends the connection once it is sent
    return resp


NOT_A_FORWARD_PROXY = "Not a forward proxy: set the agent's base URL to this proxy, not HTTPS_PROXY"


@web.middleware
async def refuse_connect(request: web.Request, handler: Any) -> web.StreamResponse:
    """CONNECT: the agent was pointed at the proxy with HTTPS_PROXY (or HTTP_PROXY) instead of its base
    URL, and asks for a tunnel to the API. A tunnel would carry TLS the proxy cannot read, so nothing
    would be recorded; the router answered a bare 404 (the target has no path) and kept the connection,
    and the SDK said only "Connection error". Refused with 405 and a reason phrase that says what to do
    (httpx puts it in its ProxyError), and noted, so `cp-inspect proxy` says it when it stops."""
    if request.method != "CONNECT":
        return await handler(request)  # type: ignore[no-any-return]
    note = getattr(request.app[HOOK_KEY], "note", None)
    if callable(note):
        note(
            f"a CONNECT to {request.raw_path} was refused: the agent uses this proxy as its HTTPS_PROXY; "
            "set its base URL instead (ANTHROPIC_BASE_URL, OPENAI_BASE_URL), or use `cp-inspect run`"
        )
    resp = web.Response(
        status=405, reason=NOT_A_FORWARD_PROXY, text=f"cp-inspect proxy: {NOT_A_FORWARD_PROXY}\n"
    )
    resp.force_close()
    return resp


def _address(request: web.Request, which: str) -> tuple[str, int] | None:
    """(host, port) of one end of the request's connection, None when its transport does not say."""
    transport = request.transport
    got = transport.get_extra_info(which) if transport is not None else None
    if isinstance(got, tuple) and len(got) >= 2 and isinstance(got[1], int):
        return str(got[0]), got[1]
    return None


async def handle(request: web.Request) -> web.StreamResponse:
    app = request.app
    upstreams = app[UPSTREAMS_KEY]
    hook: Hook | None = app[HOOK_KEY]
    started = time.time()
    headers_lc = {k.lower(): v for k, v in request.headers.items()}
    route = match(request.path, request.query_string, headers_lc, upstreams, request.method)
    if is_websocket_upgrade(headers_lc):
        return refuse_websocket(request, route, hook)
    # Who makes a recorded call is looked up before its body is read: a call answered in a few ms has
    # its connection closed by the client soon after, and the look-up needs it open (peer.py).
    peer_lookup = (
        look_up(request.transport, _address(request, "peername"), _address(request, "sockname"))
        if route.wire and request.transport is not None
        else None
    )
    body = await request.read()
    # Only the recorded endpoints keep the response; everything else just passes.
    ex = (
        Exchange(
            route,
            body,
            started,
            headers_lc.get(SESSION_HEADER.lower()),
            request_encoding=headers_lc.get("content-encoding", ""),
            retry_count=retry_count(headers_lc.get(RETRY_COUNT_HEADER)),
        )
        if route.wire or route.follows
        else None
    )
    if ex is None and hook is not None:
        _say_unrecorded(hook, route, request.method)
    out_headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
    url = upstream_url(route, upstreams)
    if ex is not None:
        ex.upstream = url
        ex.peer, ex.local = _address(request, "peername"), _address(request, "sockname")
        ex.peer_lookup = peer_lookup  # (a recorded call: who makes it, looked up while it waits)
    client = app[CLIENT_KEY]
    try:
        try:
            up_cm = client.request(request.method, url, data=body, headers=out_headers, allow_redirects=False)
            up = await up_cm.__aenter__()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            msg = (
                f"cp-inspect proxy: could not reach the upstream {url} ({type(exc).__name__}: {exc}); "
                "check --upstream and your network"
            )
            if ex is not None:
                ex.error = msg
            return web.Response(status=502, body=error_body(route, 502, msg), content_type="application/json")
        except asyncio.CancelledError:  # the agent went away while the upstream had not answered yet
            if ex is not None:
                ex.client_gone = True
                ex.error = "the agent disconnected before the upstream answered"
            raise
        try:
            return await _relay(request, up, ex, route, upstreams)
        except asyncio.CancelledError:  # the agent went away mid-response
            if ex is not None and not ex.client_gone and not ex.handed:  # (after the last byte: see _relay)
                ex.client_gone = True
                ex.error = GONE
            up.close()  # stop the upstream now (it may be silent), not when its next bytes arrive
            raise
        finally:
            await up_cm.__aexit__(None, None, None)
    finally:
        if ex is not None and hook is not None and not ex.handed:
            hook(ex)


async def _peer_known(ex: Exchange | None) -> None:
    """Before a recorded call's last bytes: let the look-up of the process that made it finish (at most
    PEER_WAIT_S). The look-up finds the client's socket among every process's descriptors, and a client
    whose call is answered faster than that (a local or cached upstream: a few ms) has closed its socket by
    the time it is reached, and `ps` said "unknown agent" for a process still running. Only such a call
    waits, once per connection (the look-up is kept for the connection); a model's answer takes longer
    than the look-up, which has ended by its last bytes."""
    lookup = ex.peer_lookup if ex is not None else None
    if lookup is None or lookup.done():
        return
    try:
        # Shielded: a wait that times out must not cancel the look-up itself (queued behind another).
        await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(lookup)), PEER_WAIT_S)
    except Exception:  # timed out, or the look-up failed: the recorder says "unknown"
        pass


def _say_unrecorded(hook: Hook, route: Route, method: str) -> None:
    """A model call forwarded but not recorded (the legacy Completions API) is said, once for each path:
    it used to pass in silence, and a user saw a session with fewer calls than the agent made."""
    what = unrecorded_call(route, method)
    note = getattr(hook, "note", None)
    if what is None or not callable(note):
        return
    path = route.upstream_path.partition("?")[0]
    note(
        f"calls to {path} ({what}) are forwarded but not recorded: the recorder journals chat "
        "(/v1/chat/completions), Messages and Responses calls",
        warn=True,
    )


def through_proxy(request: web.Request, route: Route, upstreams: dict[str, str], location: str) -> str:
    """A redirect's Location, pointed back at the proxy when it is on the upstream (as a reverse proxy
    rewrites it: nginx's proxy_redirect default). An absolute Location on the upstream would send the
    agent's next request, its API key and the call the recording is for, around the proxy; elsewhere
    (another host) and relative ones (which resolve against the proxy already) stay as they are."""
    base = upstreams[route.provider].rstrip("/")
    if not location.startswith(base) or location[len(base) : len(base) + 1] not in ("", "/", "?"):
        return location
    rest = route.upstream_path.partition("?")[0]
    prefix = request.path[: len(request.path) - len(rest)] if request.path.endswith(rest) else ""
    return f"{request.scheme}://{request.host}{prefix}{location[len(base) :]}"


async def _relay(
    request: web.Request,
    up: aiohttp.ClientResponse,
    ex: Exchange | None,
    route: Route,
    upstreams: dict[str, str],
) -> web.StreamResponse:
    resp = web.StreamResponse(status=up.status, reason=up.reason)
    redirect = 300 <= up.status < 400
    for k, v in up.headers.items():
        if k.lower() not in HOP_BY_HOP:
            if redirect and k.lower() == "location":
                v = through_proxy(request, route, upstreams, v)
                if ex is not None:
                    ex.location = v
            resp.headers.add(k, v)
    if up.headers.get("Content-Length") and "Transfer-Encoding" not in up.headers:
        resp.content_length = int(up.headers["Content-Length"])
    if ex is not None:
        ex.status = up.status
        ex.content_type = up.headers.get("Content-Type", "")
        ex.content_encoding = up.headers.get("Content-Encoding", "")
        if up.status >= 400:
            ex.retry_after = up.headers.get("Retry-After", "")[:100]
    keep = ex.response if ex is not None else None
    try:
        await resp.prepare(request)
    except (ConnectionError, RuntimeError):
        if ex is not None:
            ex.client_gone = True
            ex.error = GONE
        up.close()
        return resp
    hook = request.app[HOOK_KEY]
    length, got = resp.content_length, 0
    try:
        async for chunk in up.content.iter_any():
            got += len(chunk)
            if keep is not None:
                keep.append(chunk)
            if length is not None and got >= length:
                await _peer_known(ex)
                _hand(ex, hook)  # the body's last bytes: the agent has its answer once they are written
            try:
                await resp.write(chunk)
            except (ConnectionError, RuntimeError):
                if ex is not None and not ex.handed:
                    ex.client_gone = True
                    ex.error = GONE
                up.close()  # stop the upstream, as the agent's own disconnect would have
                return resp
    except (TimeoutError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
        # The upstream ended early: end the agent's connection the same way (no clean terminator),
        # so the agent sees the truncation it would have seen directly. A reset is passed on as a reset
        # (closed with SO_LINGER 0, which sends RST): closed plainly, the agent saw an orderly close
        # (httpx: RemoteProtocolError) where without the proxy it would have seen ECONNRESET (ReadError).
        # aiohttp names the socket's error only in the message of the payload error it raises.
        reset = _was_reset(exc)
        if ex is not None:
            ex.upstream_cut = True
            how = "reset the connection" if reset else "ended the response early"
            ex.error = f"the upstream {how} ({type(exc).__name__}: {str(exc)[:300]})"
        if request.transport is not None:
            if reset:
                _reset_on_close(request.transport)
            request.transport.abort()
        return resp
    await _peer_known(ex)
    _hand(ex, hook)  # (a body without Content-Length ends with write_eof: its chunked terminator)
    try:
        await resp.write_eof()
    except (ConnectionError, RuntimeError, asyncio.CancelledError) as exc:
        # Every byte was passed on: an agent that hangs up now has its whole answer (not an error; and
        # the exchange, handed over, is the recorder's now: not changed after)
        if ex is not None and not ex.handed:
            ex.client_gone = True
        if isinstance(exc, asyncio.CancelledError):
            raise
    return resp


def _hand(ex: Exchange | None, hook: Hook | None) -> None:
    """Give the finished exchange to the recording hook before the response's end goes out (its last
    bytes, or the chunked terminator): once the agent has its whole answer, the exchange is the
    recorder's and flush() waits for it. Handed after (when the handler returned), an agent or a test
    that had read its answer could find the recorder idle, the call not journaled yet. Once handed, the
    exchange is not changed: it is read on the recorder's thread."""
    if ex is not None and hook is not None and not ex.handed:
        ex.handed = True
        hook(ex)


def _was_reset(exc: BaseException) -> bool:
    """Whether the upstream's connection was reset (RST), not closed, under `exc`."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionResetError) or "ConnectionResetError" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _reset_on_close(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:  # the socket is already gone: the plain close is all there is
        pass


def make_app(upstreams: dict[str, str], hook: Hook | None, max_body: int = MAX_BODY) -> web.Application:
    app = web.Application(client_max_size=max_body, middlewares=[refuse_connect])
    app[UPSTREAMS_KEY] = upstreams
    app[HOOK_KEY] = hook

    async def client_ctx(app: web.Application) -> Any:
        # No read timeout: a model may think for minutes; the agent's own client enforces its limits.
        # auto_decompress off: the agent gets the upstream's bytes exactly, compressed or not.
        # skip_auto_headers: the upstream sees the agent's headers, not aiohttp's defaults.
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=False),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
        )
        app[CLIENT_KEY] = session
        yield
        await session.close()

    app.cleanup_ctx.append(client_ctx)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
