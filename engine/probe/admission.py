"""Admitting connections to the probe socket without costing the agent its descriptors or its CPU: at
most `max_clients` clients (default 32, CONTEXTPIPE_PROBE_MAX_CLIENTS), none on a descriptor within
FD_RESERVE of the open-file limit (those are left to the agent), and accepts budgeted (ACCEPT_BURST,
then ACCEPT_RATE per second; the rest wait in the kernel's backlog). A connection refused for any of
these gets an error frame naming the reason ("too_many_clients", "too_many_open_files",
"permission_denied" for a peer with another uid) and is closed. `Admission` is a part of the probe
server (engine.probe.handshake.Handshake builds on it): what it admits, Handshake registers.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import select
import selectors
import socket
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.probe.endpoint import close_quietly, peer_uid
from engine.probe.optin import MAX_CLIENTS_ENV
from engine.probe.queues import ClientQueues
from engine.recording.frames import encode_frame
from engine.wording import counted

log = logging.getLogger("contextpipe.probe")

# Accepts: a burst, then a steady rate; ACCEPT_PER_PASS per loop pass at most.
ACCEPT_BURST = 32.0
ACCEPT_RATE = 5.0
ACCEPT_PER_PASS = 8
# After accept() fails (out of descriptors, say), the listener rests this long instead of spinning.
ACCEPT_BACKOFF = 0.5
# Descriptors at the top of the open-file limit that the probe never takes for a client.
FD_RESERVE_MIN = 16


def fd_ceiling() -> int:
    """The lowest descriptor number a client may not have: the soft limit minus a reserve for the agent
    (an eighth of the limit, at least FD_RESERVE_MIN). Descriptors are allocated lowest-first, so a
    client socket numbered above this means the process is close to running out."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 1 << 30
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 1 << 30
    return max(0, soft - max(FD_RESERVE_MIN, soft // 8))


def _open_reserve() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _hung_up(sock: socket.socket) -> bool:
    """The peer has closed its end entirely (POLLHUP; a half-close is not this), checked without
    reading or waiting."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)  # POLLHUP is reported whatever is asked for
    try:
        ready = poller.poll(0)
    except OSError:
        return False
    return bool(ready) and bool(ready[0][1] & select.POLLHUP)


def _refuse(sock: socket.socket, code: str, message: str) -> None:
    """Tell a connection why it is not served, and close it (a fresh socket: the small frame fits)."""
    try:
        sock.send(encode_frame({"k": "error", "code": code, "message": message}))
    except OSError:
        pass
    close_quietly(sock, reads=1)


class Admission(ClientQueues):
    # Set by ProbeServer.__init__ / start().
    max_clients: int
    _allowed_uid: int
    _listener: socket.socket | None

    if TYPE_CHECKING:

        def _register(self, sock: socket.socket, uid: int) -> None: ...

    def _init_admission(self) -> None:
        self._accept_tokens = ACCEPT_BURST
        self._accept_at = time.monotonic()
        self._listen_paused_until: float | None = None
        self._turns_src: Sequence[Any] | None = None
        self._turns_upto = 0
        self._turns = 0
        self._tap_errors = 0
        # Clients are refused before they could take the descriptors the agent itself needs.
        self._fd_ceiling = fd_ceiling()
        # One descriptor held in reserve: when accept() fails for want of descriptors it is closed, the
        # waiting connection accepted, told why and closed, and the reserve taken again; otherwise the
        # listener would stay readable and the loop spin on it. Taken by start() (_take_reserve), not
        # here: a server made and never started (or dropped) held it until it was collected.
        self._reserve_fd: int | None = None

    def _take_reserve(self) -> None:
        """Hold the reserve descriptor while the server listens (start(); the teardown gives it back)."""
        if self._reserve_fd is None:
            self._reserve_fd = _open_reserve()

    def _accept(self) -> None:
        listener = self._listener
        assert listener is not None
        now = time.monotonic()
        self._accept_tokens = min(ACCEPT_BURST, self._accept_tokens + (now - self._accept_at) * ACCEPT_RATE)
        self._accept_at = now
        for _ in range(ACCEPT_PER_PASS):
            if self._accept_tokens < 1.0 and len(self._clients) < self.max_clients:
                # Out of budget (connect/close churn): leave the rest in the kernel's backlog for now.
                # (With every client slot taken, what waits can only be refused, which costs no token.)
                self._pause_listener((1.0 - self._accept_tokens) / ACCEPT_RATE)
                return
            try:
                sock, _addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self._shed_with_reserve(listener)
                else:
                    log.warning("probe accept failed: %s", exc)
                self._pause_listener(ACCEPT_BACKOFF)
                return
            if _hung_up(sock):
                # Its client has already closed (a connect/close churn, a `ps` that gave up): nobody to
                # serve, so it costs no accept token. Charged, a backlog of them (the listener's 64, all
                # dead) took the budget's rate to drain, ~7 s, while the honest client queued behind them
                # timed out; now only the loop's CPU budget bounds what they cost.
                sock.close()
                continue
            sock.setblocking(False)
            uid = peer_uid(sock)
            if uid != self._allowed_uid:
                _refuse(
                    sock,
                    "permission_denied",
                    f"uid {uid} may not read this agent's probe (it serves uid {self._allowed_uid} only)",
                )
                continue
            if len(self._clients) >= self.max_clients:
                self._drop_hung_up()
            if len(self._clients) >= self.max_clients:
                _refuse(
                    sock,
                    "too_many_clients",
                    f"this agent already serves {counted(len(self._clients), 'probe client')} (the limit, "
                    f"{MAX_CLIENTS_ENV}={self.max_clients}); close one and retry",
                )
                continue
            if sock.fileno() >= self._fd_ceiling:
                _refuse(
                    sock,
                    "too_many_open_files",
                    "the agent is close to its open-file limit and keeps the rest for its own work; "
                    "close other probe clients or raise the agent's limit (ulimit -n)",
                )
                continue
            # Only a registration costs a token (a snapshot to send). A refusal is a small frame and a
            # close: charged too, a backlog of connections refused for the client cap (the listener's 64)
            # drained at the token rate, ~7 s, and an attach queued behind them timed out ("did not send
            # its hello") instead of being told the agent serves its limit of clients.
            self._accept_tokens -= 1.0
            self._register(sock, uid)
            if self._spent():
                return  # the rest stay in the backlog: the listener is still readable next pass

    def _drop_hung_up(self) -> None:
        """Free the slots of clients already gone before a newcomer is refused for the limit. A burst of
        connections accepted while alive (ACCEPT_BURST of them) and closed at once held every slot until
        the loop read their EOFs; a loaded agent's I/O thread had not yet when the honest client came, and
        it was told the agent "already serves 32 probe clients" (a CI run at load ~5). Only at the limit:
        a poll per client, never on the common path."""
        for c in list(self._clients.values()):
            if _hung_up(c.sock):
                self._drop(c)

    def _shed_with_reserve(self, listener: socket.socket) -> None:
        if self._reserve_fd is None:
            return
        os.close(self._reserve_fd)
        self._reserve_fd = None
        try:
            sock, _addr = listener.accept()
        except OSError:
            pass
        else:
            _refuse(
                sock,
                "too_many_open_files",
                "the agent is out of file descriptors; close other probe clients or raise its limit (ulimit -n)",
            )
        self._reserve_fd = _open_reserve()

    def _pause_listener(self, seconds: float) -> None:
        if self._listen_paused_until is None and self._sel is not None and self._listener is not None:
            try:
                self._sel.unregister(self._listener)
            except (KeyError, ValueError):
                pass
        self._listen_paused_until = time.monotonic() + max(seconds, 0.001)

    def _resume_listener(self) -> None:
        until = self._listen_paused_until
        if until is None or time.monotonic() < until:
            return
        self._listen_paused_until = None
        if self._sel is not None and self._listener is not None:
            self._sel.register(self._listener, selectors.EVENT_READ, "listen")
