"""Running the proxy: `ProxyServer` owns an event loop in a thread; `start()` returns once it listens.

with ProxyServer(upstreams, Recorder(Path("cpsessions"))) as px:
    print(px.url)            # http://127.0.0.1:<port>
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from typing import Any

from aiohttp import web

from engine.capture.proxy import peer
from engine.capture.proxy.forward import MAX_BODY, SERVER_OPTIONS, Hook, make_app
from engine.capture.proxy.routes import DEFAULT_UPSTREAMS
from engine.errors import ContextPipeError


class ProxyError(ContextPipeError):
    """The proxy could not start (the port is taken, the address is not local...)."""


class ProxyServer:
    def __init__(
        self,
        upstreams: dict[str, str] | None = None,
        hook: Hook | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_body: int = MAX_BODY,
    ) -> None:
        self.upstreams = dict(upstreams or DEFAULT_UPSTREAMS)
        self.hook, self.host, self.port, self.max_body = hook, host, port, max_body
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 15.0) -> ProxyServer:
        self._thread = threading.Thread(target=self._run, name="contextpipe-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise ProxyError(f"the proxy did not start within {timeout:g} s")
        if self._error is not None:
            raise ProxyError(f"the proxy could not listen on {self.host}:{self.port}: {_why(self._error)}")
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:
            self._error = exc
            loop.close()
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._shutdown())
        loop.close()

    async def _serve(self) -> None:
        app = make_app(self.upstreams, self.hook, self.max_body)
        # access_log off: one log line per call is noise here, and it would be written on the hot path.
        runner = web.AppRunner(app, access_log=None, handle_signals=False, **SERVER_OPTIONS)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            # (the port is taken): close what setup opened (the upstream client session), or it is
            # left unclosed and warned about at exit, in a process that goes on (tests, an embedder)
            await runner.cleanup()
            raise
        self._runner = runner
        peer.warm()  # who makes each call is looked up through an index of descriptors: fill it now
        server: Any = site._server
        if self.port == 0 and server is not None and server.sockets:
            self.port = int(server.sockets[0].getsockname()[1])

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self, timeout: float = 10.0) -> None:
        loop, t = self._loop, self._thread
        if loop is None or t is None or not t.is_alive():
            return
        loop.call_soon_threadsafe(loop.stop)
        t.join(timeout)

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _why(error: BaseException) -> str:
    """Why a listen failed, as a person reads it: asyncio's own text repeats the address and the errno
    ("[Errno 98] error while attempting to bind on address ('127.0.0.1', 8765): address already in use")."""
    if isinstance(error, OSError) and error.errno is not None:
        if error.errno == errno.EADDRINUSE:
            return "address already in use: another program listens there"
        if error.errno == errno.EACCES:
            return "permission denied (a port below 1024 needs privileges)"
        return os.strerror(error.errno).lower()
    return str(error) or type(error).__name__
