"""Admitting clients: the peer uid check, the hello frame and snapshot, and the frames a client may send.

A client gets `hello` then the snapshot then live events. It may send `hello` (to check the protocol
version) and `ping`; anything else, a corrupt or oversized frame, or another protocol version gets an
error frame and that connection is closed. A peer with another uid gets "permission_denied".
"""

from __future__ import annotations

import logging
import selectors
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from engine.probe.endpoint import close_quietly, peer_uid
from engine.probe.queues import HIGH_WATER, Client, ClientQueues
from engine.recording.frames import FrameError, decode_frames, encode_frame

log = logging.getLogger("contextpipe.probe")

PROTOCOL_VERSION = 1
# Clients only ever send tiny control frames; anything bigger is garbage or hostile.
CLIENT_FRAME_LIMIT = 64 * 1024
_PONG = encode_frame({"k": "pong"})


class Handshake(ClientQueues):
    # Set by ProbeServer.__init__ / start().
    pid: int
    _hello: dict[str, Any]
    _snapshot: Callable[[], list[dict[str, Any]]]
    _allowed_uid: int
    _listener: socket.socket | None

    def _accept(self) -> None:
        listener = self._listener
        assert listener is not None
        for _ in range(64):
            try:
                sock, _addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # EMFILE and friends: log and back off instead of spinning on a readable listener.
                log.warning("probe accept failed: %s", exc)
                time.sleep(0.05)
                return
            sock.setblocking(False)
            uid = peer_uid(sock)
            if uid != self._allowed_uid:
                self._refuse(sock, uid)
                continue
            self._register(sock, uid)

    def _refuse(self, sock: socket.socket, uid: int) -> None:
        frame = encode_frame(
            {
                "k": "error",
                "code": "permission_denied",
                "message": f"uid {uid} may not read this agent's probe (it serves uid {self._allowed_uid} only)",
            }
        )
        try:
            sock.send(frame)  # fresh socket, empty buffer: a small frame always fits
        except OSError:
            pass
        close_quietly(sock)

    def _register(self, sock: socket.socket, uid: int) -> None:
        c = Client(sock, uid)
        # Events already published go to the clients attached before this one; this one starts at the
        # ring's head and gets the earlier ones from the snapshot taken below.
        self._absorb()
        c.cursor = self._head
        self._nclients += 1
        self._clients[c.fd] = c
        assert self._sel is not None
        self._sel.register(sock, selectors.EVENT_READ, c)
        try:
            snap = list(self._snapshot())
        except Exception as exc:
            log.exception("probe snapshot() failed")
            c.outbuf += encode_frame(self._hello_frame(0, 0))
            self._fail(
                c, "internal", f"the agent could not produce its journal snapshot: {type(exc).__name__}"
            )
            return
        self._absorb()
        end = self._head
        if end > c.cursor:
            # Events published between registration and the copy may be in both; the engine publishes
            # the very object it journals, so identity finds the duplicates (anything else is
            # delivered twice, which is harmless: blobs are keyed by hash, turns by number).
            c.skip_ids = frozenset(id(e) for e in snap)
            c.skip_until = end
            c.skip_hold = snap
        turns = sum(1 for e in snap if isinstance(e, dict) and e.get("k") == "turn")
        # A tapped client's journaling failures (`diag` events carry the running count) for `ps`
        tap_errors = max(
            (int(e.get("count", 0)) for e in snap if isinstance(e, dict) and e.get("k") == "diag"), default=0
        )
        c.outbuf += encode_frame(self._hello_frame(len(snap), turns, tap_errors))
        c.snapshot = snap
        self._pump(c)

    def _hello_frame(self, snapshot_len: int, turns: int, tap_errors: int = 0) -> dict[str, Any]:
        frame = dict(self._hello)
        frame.update(
            {
                "k": "hello",
                "protocol": PROTOCOL_VERSION,
                "pid": self.pid,
                # Arguments that are not valid UTF-8 (surrogate-escaped by Python) would fail to encode.
                "argv": [
                    a.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for a in sys.orig_argv
                ],
                "snapshot": snapshot_len,
                "turns": turns,
                "tap_errors": tap_errors,
                "redacted": self.redact,
                "queue_limit": self._cap,
            }
        )
        return frame

    def _on_readable(self, c: Client) -> None:
        try:
            data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(c)
            return
        if not data:
            self._drop(c)  # the client closed (or half-closed) its end: it is done
            return
        if c.closing_deadline is not None:
            return  # already failed: discard whatever else it sends
        c.inbuf += data
        try:
            frames, used = decode_frames(bytes(c.inbuf), limit=CLIENT_FRAME_LIMIT)
        except FrameError as exc:
            code = "frame_too_large" if "exceeds the limit" in str(exc) else "bad_frame"
            self._fail(c, code, f"malformed frame from client: {exc}")
            return
        del c.inbuf[:used]
        for f in frames:
            kind = f.get("k")
            if kind == "hello":
                theirs = f.get("protocol")
                if theirs != PROTOCOL_VERSION:
                    self._fail(
                        c,
                        "protocol_mismatch",
                        f"protocol mismatch: the agent speaks probe protocol {PROTOCOL_VERSION}, "
                        f"the client speaks {theirs!r}",
                        protocol=PROTOCOL_VERSION,
                        client_protocol=theirs,
                    )
                    return
            elif kind == "ping":
                # Best effort: a client that pings without reading must not grow our buffer.
                if len(c.outbuf) < HIGH_WATER:
                    c.outbuf += _PONG
            else:
                self._fail(c, "unknown_kind", f"unknown frame kind {kind!r}: the probe stream is read-only")
                return
        self._pump(c)
