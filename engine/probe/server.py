"""The live probe: a read-only Unix-socket stream of the journal, embedded in the agent.

The agent calls `publish(event)` for every journal event. Nothing the probe does may slow or break the
agent, so the work is split lopsidedly:

* `publish` appends a reference to a bounded deque (atomic under the GIL: no lock, so the agent can
  never wait on the probe thread) and, only when the probe thread is asleep, writes one wake-up byte
  to a socketpair. No encoding, no client socket I/O, nothing proportional to the number of clients,
  and no exception escapes it. With no client attached it returns after one attribute read: a client
  that connects later gets those events from `snapshot()`. Within a Pipeline call (between `hold()`
  and `flush()`) it writes no byte: the call's end sends what it published, on the agent's own thread
  when that is cheap and safe (one or two lean clients, nothing in progress, a non-blocking send: see
  `agent_send`), else by waking the I/O thread as a publish would have. So an agent that waits on its
  model between turns wakes no thread for its turns, and to an inspector that reads a shared-memory
  ring (see `ring`) makes no system call for them either. While every client attached is quiet, the
  Pipeline does not bracket its calls (`bracket`) and publish does the flush's part: it leaves an
  elided kind waiting and hands on any other event at once, with those before it (see `agent_send`).
* One daemon thread does all the rest with `selectors`: accept (checking the peer's uid with
  SO_PEERCRED), move events from the deque into a ring, encode (and redact), send, and read the few
  frames a client may send. It sleeps with no timeout while there is nothing to send; woken by a
  publish, it lets the burst accumulate (see `loop`) and sends it in one go. Its CPU is capped, and
  clients are admitted and heard within budgets (client cap, descriptor reserve, accept and input
  rates: see `handshake`), so no mix of clients can slow the agent's thread much.
* The ring is shared by all clients; each client keeps a cursor into it. A client more than
  `queue_limit` events behind has lost the oldest: its cursor jumps forward and it gets
  `{"k": "dropped", "count": n}` before its next event, so it can reconnect for a fresh snapshot.
  This is the design's "bounded per-client queue" with one append per publish instead of one per
  client; memory stays at `queue_limit` references plus about HIGH_WATER encoded bytes per client, no
  matter how slow a client is or how long the session (the kernel socket buffer holds the rest; the
  snapshot is read from the journal list itself, encoded in chunks shared by all clients).

`snapshot` returns the journal's own append-only list (or any sequence that is only ever appended
to): the server reads it by index up to the length it had when the client attached, never copying it.
A callable that returns a fresh list each time also works (each client then holds its copy).

If the probe cannot start (`start()` raises ProbeError), an agent built on `Pipeline` carries on
without it and logs one warning saying why and how to fix it.

The socket file is removed by close(), at exit (atexit, a multiprocessing worker's finalizer) and on
SIGTERM. SIGTERM's removal is a Python handler, which runs only between bytecodes: while the main
thread is in one long C call, the handler (and the death by SIGTERM it then causes) waits for it to
return; an agent killed meanwhile leaves its file for the next `ps` to remove as stale (see
`_remove_sockets_on_sigterm`).

Protocol (version PROTOCOL_VERSION), frames from `engine.recording.frames` (u32 length, u32 crc32, msgpack map
with a kind "k"). Server to client: `hello` (protocol, pid, argv, snapshot = number of snapshot events
that follow, turns, redacted, queue_limit, plus the agent's model/provider/engine_version/...), then
the snapshot events, then live events, with `dropped` and `pong` frames interleaved, and `error`
(code, message) just before the server closes a connection. Client to server, optional:
`{"k": "hello", "protocol": N}` and `{"k": "ping"}`. A connection is attached to the journal (counted,
its snapshot taken) at its first valid hello; one that sends none within HELLO_WAIT is sent the hello,
the snapshot and the live events all the same, but only a valid hello makes the agent build each
turn's trace for its reader (see ClientQueues.tracing_clients): to such a client a turn nobody else
asked for comes as its `{"k": "turn_deferred", "turn": N}` marker. A client whose hello says `"lean": true` gets the
lean stream (see `lean`): live events in `batch` frames (`{"k": "batch", "events": [...]}`), turns but
the newest of each send as `turn_summary`, and it may send `{"k": "fetch", "turns": [...]}`, answered by
`trace` events. The agent's hello waits for the client's (HELLO_WAIT at most, see handshake._start): a
client of the elided stream whose hello says `"tail": true` is sent only the snapshot's tail, from the
journal's newest turn on (the hello's `snapshot_at` is its first event's position), and fetches the rest
by range, so an inspector attaching to a long session shows its newest turn at once.

Protocol 2 (the agent speaks 1 and 2, and answers a client's hello in the client's version; a client
that does not ask for what follows announces 1, so it attaches to any agent): a quiet elided client
whose hello says `"protocol": 2, "fold": true` gets the fold stream (see elide.fold_out), for a client
that folds the journal and builds the turns' traces itself, so that its attaching does not make the
agent build each turn's trace as it comes (Pipeline._unwatched counts only `tracing_clients`). Its live
`batch` frames carry every journal event with its position ("at"), no turn summarized; where the agent
left a turn's trace unbuilt, `{"k": "turn_deferred", "turn": N}` holds the `turn` event's place; an
annotation of such a turn comes as `{"k": "annotate", "turn": N, "key": K, "value": V}`. The client may
send `{"k": "trace", "turn": N}` (a turn it could not rebuild to its request's hash, or from before it
attached), answered by a `trace` event as a fetch is; a malformed one gets `{"k": "error", "code":
"bad_request", "message": ..., "fatal": false}` and the connection stays. An agent from before 2 refuses
a client of 2 with "protocol_mismatch", and the client attaches again with 1 (inspector/sources/live.py).

Any other kind ("unknown_kind": the stream is
read-only), a corrupt frame ("bad_frame"), a frame above CLIENT_FRAME_LIMIT ("frame_too_large") or a
different protocol version ("protocol_mismatch", naming both) gets an error frame and that connection
is closed; the agent and other clients carry on. A peer with another uid gets "permission_denied".

Where the parts live: `queues` (per-client state, the ring, the shared snapshot chunks), `lean` (the
lean stream's summaries and journal look-up), `agent_send` (the agent's thread sending a call's
events itself), `ring` (a polling client's live frames in shared memory), `handshake`
(admission, peer uid check, hello and snapshot, client frames), `loop` (the I/O thread), `endpoint`
(the socket file), `redact` (the allow-list), `optin` (the serve/redact/client-cap settings). This
module is the agent-facing `ProbeServer` and the public names.
"""

from __future__ import annotations

import atexit
import os
import selectors
import signal
import socket
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.probe.agent_limits import DEFER_EVENTS, HOLD_MAX, TURN_GAP
from engine.probe.client_state import HIGH_WATER, ClientStats
from engine.probe.elide import ELIDED_STAND_IN
from engine.probe.endpoint import bind_listener, unlink_if_ours
from engine.probe.fold_send import _CLOSE, LONG_WAIT, OUTCOME_KINDS
from engine.probe.handoff import Handoff
from engine.probe.handshake import CLIENT_FRAME_LIMIT, PROTOCOL_VERSION
from engine.probe.loop import FLUSH_MAX, JOIN_SLACK
from engine.probe.optin import (
    MAX_CLIENTS_ENV,
    REDACT_ENV,
    max_clients_setting,
    redact_requested,
    serve_requested,
)
from engine.probe.redact import redact_event
from engine.probe.ring import _HELD, HELD_AT
from engine.probe.runtime_dir import SERVE_ENV
from engine.recording.frames import encode_frame

__all__ = [
    "CLIENT_FRAME_LIMIT",
    "HIGH_WATER",
    "MAX_CLIENTS_ENV",
    "PROTOCOL_VERSION",
    "REDACT_ENV",
    "SERVE_ENV",
    "ClientStats",
    "ProbeServer",
    "redact_event",
    "redact_requested",
    "serve_requested",
]


class ProbeServer(Handoff):
    """Serve the journal of this process over `<runtime_dir>/<pid>.sock`. See the module docstring."""

    def __init__(
        self,
        hello: dict[str, Any],
        snapshot: Callable[[], Sequence[dict[str, Any]]],
        *,
        runtime_dir: Path | None = None,
        queue_limit: int = 10_000,
        redact: bool | None = None,
        pid: int | None = None,
        session: int | None = None,
        max_clients: int | None = None,
    ) -> None:
        if queue_limit < 1:
            raise ValueError(f"queue_limit must be at least 1, got {queue_limit}")
        # None: CONTEXTPIPE_REDACT decides, so every server in the process (the proxy's per-session
        # ones too) honours it, not only those a Pipeline opens.
        super().__init__(queue_limit, redact_requested(redact))
        self.max_clients = max_clients_setting(max_clients)
        self._init_admission()
        self._init_loop()
        self._init_agent_send()
        self._init_handoff()
        self._hello = dict(hello)
        self._snapshot = snapshot
        self._runtime_dir = runtime_dir
        self.pid = os.getpid() if pid is None else pid
        # One process may serve several sessions (the proxy: one per conversation), each on its own socket.
        self.session = session
        self.path: Path = Path()  # set by start()
        # Only peers with this uid are served; an attribute so tests can simulate a foreign peer.
        self._allowed_uid = os.getuid()
        self.publish_errors = 0
        self._listener: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._wake_w_sock: socket.socket | None = None  # closed by teardown even after _wake_w is cleared
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
        self._close_lock = threading.Lock()
        self._owner_pid = os.getpid()
        self._inode: tuple[int, int] | None = None
        self._stand_in: dict[str, Any] | None = ELIDED_STAND_IN
        self._mp_exit: Any = None  # multiprocessing's exit hook for close(), in a worker process (see start)
        try:
            # Fail here, in the agent's startup, rather than on every connect if hello can't be sent.
            encode_frame(self._hello_frame(0, 0))
        except Exception as exc:
            raise ValueError(f"probe hello is not msgpack-encodable: {exc}") from exc

    # ---------------------------------------------------------------- agent-facing API

    def start(self) -> None:
        """Create the socket and start the I/O thread. Raises ProbeError/PermissionDenied on failure."""
        if self._thread is not None:
            return
        listener, self.path, self._inode = bind_listener(self.pid, self._runtime_dir, self.session)
        self._listener = listener
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w_sock = self._wake_w
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(listener, selectors.EVENT_READ, "listen")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._take_reserve()
        self._open_schedstat()  # (this thread's: the agent's, whose run-queue wait is its demand too)
        name = f"contextpipe-probe-{self.pid}" + ("" if self.session is None else f".{self.session}")
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        atexit.register(self.close)
        self._mp_exit = _on_multiprocessing_exit(self.close)
        _LIVE_SERVERS.add(self)
        _remove_sockets_on_sigterm()

    def publish(self, event: dict[str, Any], frame: bytes | None = None) -> None:
        """Hand one journal event to attached clients. Never blocks on a client, never raises. O(1), but
        outside a bracketed call while every client is quiet, where an event that is not elided is sent
        at once with the (at most DEFER_EVENTS) waiting before it, as a call's flush() would send them.

        `frame`, if given, must be `engine.recording.frames.encode_frame(event)`: an agent that records
        already encodes every event, and msgpack encoding is most of the probe's cost, so it passes the
        bytes on and the I/O thread only copies them. Ignored when redacting (the redacted form has to
        be encoded anyway).
        """
        try:
            # Race note: a client is counted in _nclients *before* its snapshot() is taken, and the
            # agent journals an event before publishing it. So if we read 0 here while a client is
            # registering, the event is already in the journal that the snapshot will copy.
            if not self._nclients:
                return
            pending = self._pending
            if len(pending) >= self._cap:
                # The I/O thread has been starved of the GIL for a whole queue's worth of events; the
                # append below pushes the oldest out. (Racing with a popleft this may over-count by one.)
                self._overflow += 1
            quiet_only = not self._held and not self._wake_pending and self._nquiet == self._nclients
            if self.quiet_linger:
                # Turns that begin closer together than quiet_linger are handed to the I/O thread's
                # lingering burst (see agent_send, "Lingering"): nothing is encoded or sent on this thread.
                # A turn is judged at its first event (after TURN_GAP without one); the rest follow it.
                now = _monotonic()
                if now - self._published_at >= TURN_GAP:
                    self._linger_turn = now - self._turn_at < self.quiet_linger
                    self._turn_at = now
                self._published_at = now
                if quiet_only and self._linger_turn:
                    quiet_only = False
                    self._linger = True
            if (
                quiet_only
                and type(event) is dict
                and (
                    (kind := event.get("k")) in self._defer_kinds
                    # A fold client's turn that closes within fold_coalesce of the straight path's last
                    # send waits for the next, held back as the rest of the turn is (see FOLD_COALESCE).
                    or (
                        kind in _CLOSE
                        and (one := self._ring_one) is not None
                        and one.fold
                        and _monotonic() - self._fold_sent_at < self.fold_coalesce
                    )
                )
                and len(pending) < DEFER_EVENTS
            ):
                # Every client is quiet, so the Pipeline does not bracket its calls (see `bracket`) and
                # publish does what a call's flush would: an elided kind waits for the next event worth
                # sending (up to DEFER_EVENTS), which is then sent with them (see agent_send). No quiet
                # client is sent it, so what waits is a stand-in holding its place (see elide).
                stand_in = self._stand_in
                pending.append(event if stand_in is None or self._windows else stand_in)
                if stand_in is None:  # (a fold client's: see agent_send, "Before a long wait")
                    # Whether the model call (request to outcome, by the journal's times) or the tools'
                    # run (the reply to the next event, by the agent's clock) took LONG_WAIT, tested in
                    # line: a paced agent's are as quick (or as slow) as the last ones, so nothing changes
                    # and no method is called (_fold_wants). This runs cold after the model call for every
                    # held event: two calls cost the turn's usage and its first tool result ~4 us each.
                    if kind == "request":
                        self._request_time = event.get("time")
                    elif kind in OUTCOME_KINDS:
                        asked, self._request_time = self._request_time, None
                        try:
                            slow = event.get("time") - asked >= LONG_WAIT
                        except TypeError:
                            pass  # (no request noted since the last outcome, or a clock that says no time)
                        else:
                            if slow != self._slow_model:
                                self._fold_wants((bool(slow), self._slow_tools))
                    elif kind == "msg":
                        self._reply_at = _monotonic()
                    elif kind in _CLOSE:  # (never the first event after a reply: see Pipeline.record_usage)
                        self.fold_closes_held += 1
                    elif self._reply_at:  # (the first event after a reply: the tools have run)
                        slow = _monotonic() - self._reply_at >= LONG_WAIT
                        self._reply_at = 0.0
                        if slow != self._slow_tools:
                            self._fold_wants((self._slow_model, slow))
                rings = self._held_rings
                if rings:
                    # A ring client learns from its header that it should ask for the journal's end
                    # (see ring, "Held events"), rather than asking after every quiet period. The
                    # stores are RingWriter.mark_held's, in line, once a burst: an event held within
                    # mark_gap of the ring's newest mark, no frame written since, needs none.
                    holds = self._holds = self._holds + 1
                    now = _monotonic()
                    for ring in rings:
                        total = ring._written + 1
                        if total == ring.marked and now - ring.marked_at < self.mark_gap:
                            continue
                        try:
                            q = ring.held_q
                            if q is None:
                                _HELD.pack_into(ring._mm, HELD_AT, holds, total)
                            else:
                                q[0] = holds
                                q[1] = total
                        except ValueError:
                            continue  # the I/O thread closed it (the client left) since we read the list
                        ring.marked, ring.marked_at = total, now
                return
            # With a frame, the event rides along: its identity is what a client attaching meanwhile
            # recognises it by in its snapshot (see handshake._attach).
            pending.append(event if frame is None or self.redact else (event, frame))
            if quiet_only:
                c = self._ring_one
                if c is not None:
                    if self.handoff and self._handoff_thread is not None:
                        self._hand_off()  # (the straight path on the hand-off thread: see handoff)
                        return
                    if self._fold_now(c) if c.fold else self._ring_now(event, frame):
                        return  # (the one ring client's straight path: see agent_send)
                self._send_now()
                return
            if type(event) is not dict or event.get("k") not in self._defer_kinds:
                self._loud = True  # the call's flush has something to send (see agent_send.flush)
            # ~0.1 us (vDSO clock): lets the I/O thread end a burst once events stop (see _flowing).
            now = self._published_at = _monotonic()
            # Within a Pipeline call (hold()), its flush() sends: no wake-up byte (see agent_send).
            if not self._wake_pending and (not self._held or now - self._held_at >= HOLD_MAX):
                self._wake_pending = True
                self._wake()
        except Exception:
            self.publish_errors += 1

    def close(self) -> None:
        """Stop serving: flush briefly to readers, disconnect clients, remove the socket. Idempotent,
        safe from any thread and at any moment; returns within FLUSH_MAX + JOIN_SLACK."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            atexit.unregister(self.close)
            if self._mp_exit is not None:
                self._mp_exit.cancel()  # (a proxy closes one server a conversation: none is kept till exit)
                self._mp_exit = None
        except Exception:
            pass
        self._stopping = True
        t = self._thread
        if t is None:
            self._teardown()  # never started: nothing runs that could race us
            return
        self._wake()
        self._stop_handoff(JOIN_SLACK)
        if t is not threading.current_thread():
            t.join(timeout=FLUSH_MAX + JOIN_SLACK)
        if t.is_alive():
            # Held up (in a slow snapshot callable, or starved of CPU): it tears everything down itself
            # when it gets there. Remove the socket file now, so no new client finds it meanwhile.
            self._unlink()

    def __enter__(self) -> ProbeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client_count(self) -> int:
        return self._nclients

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ---------------------------------------------------------------- wake-ups, fork, teardown

    def _wake(self) -> None:
        w = self._wake_w
        if w is not None:
            try:
                w.send(b"\0")
            except OSError:
                pass  # buffer full means a wake-up is already pending; closed means shutting down

    def _disown_after_fork(self) -> None:
        """In a forked child: the I/O thread did not survive the fork, and the socket is the parent's.
        Make publish() a no-op and close() leave the parent's socket alone."""
        self._nclients = 0
        self._ntracing = 0  # (and the child's turns built for no reader: see tracing_clients)
        self._nfollowers = 0
        self.follow_recording = False  # (the parent's recording: not written from the child)
        self._close_schedstat()  # (the parent's agent thread's, not one of ours)
        self.bracket = False
        self._ring_one = None  # (the parent's ring, mapped here too: never written from the child)
        self._closed = True
        self._close_lock = threading.Lock()  # may have been held by a thread that did not survive the fork
        self._pass_lock = threading.Lock()  # likewise (the I/O thread holds it for each pass)
        self._held = False
        self._wake_w = None
        self._handoff_thread = None  # (did not survive the fork either)
        self._kick = threading.Lock()
        self._kick.acquire()
        self._pending = deque(maxlen=1)
        self._clients = {}

    def _unlink(self) -> None:
        # Only if the file is still the one we created, in the process that created it (a forked child
        # inherits this object and its atexit hook but must not remove its parent's socket).
        if self._inode is not None and os.getpid() == self._owner_pid:
            unlink_if_ours(self.path, self._inode)

    def _teardown(self) -> None:
        """Close every client and the sockets. Runs on the I/O thread (or in close() if it never ran)."""
        for c in list(self._clients.values()):
            self._drop(c)
        self._nclients = 0
        self.bracket = False
        # Unlink before closing the listener, so nobody sees a refusing socket at our path.
        self._unlink()
        self._wake_w = None  # publish() and close() stop writing wake-ups before the socket closes
        for s in (self._listener, self._wake_r, self._wake_w_sock):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass
        self._listener = None
        self._wake_r = None
        if self._reserve_fd is not None:
            try:
                os.close(self._reserve_fd)
            except OSError:
                pass
            self._reserve_fd = None
        sel, self._sel = self._sel, None
        if sel is not None:
            try:
                sel.close()
            except Exception:
                pass
        self._pending.clear()
        self._chunk_keep.clear()
        self._close_schedstat()


def _on_multiprocessing_exit(close: Callable[[], None]) -> Any:
    """Have multiprocessing call `close` when this process ends, if it is one of its workers.

    A worker forked by multiprocessing (the default start method on Linux) ends with os._exit() once its
    target returns: no atexit hook runs, only multiprocessing's own exit finalizers. Without one, an agent
    run in a worker left its socket file behind, and its inspector never got what the agent published in
    its last moments (the I/O thread's pending send died with the process: a five-turn worker's inspector
    got its snapshot and none of the turns). Only when multiprocessing is already loaded: it always is in
    its workers, and importing it here would cost every agent's start-up. The finalizer runs in the
    process that made it only (multiprocessing checks the pid), so a child forked later does not close
    its parent's probe."""
    util = sys.modules.get("multiprocessing.util")
    if util is None:
        return None
    try:
        return util.Finalize(None, close, exitpriority=0)
    except Exception:
        return None


def _remove_sockets_on_sigterm() -> None:
    """Have SIGTERM remove this process's probe sockets before it does what it did before.

    An agent ended by SIGTERM with no handler of its own (a `kill`, a supervisor stopping it) runs no
    atexit hook, so its socket file stayed behind for `ps` and `attach` to judge stale. Installed once,
    from the main thread (the only one that may), when SIGTERM's handler is the default or the agent's
    own Python callable; an ignored SIGTERM, or a handler installed from C, is left alone. The agent's
    handling is kept: the default still ends the process by SIGTERM (the same status to its parent); a
    handler it set before is called, and the sockets are removed only if it raises (sys.exit, an
    exception to unwind the agent): one that returns keeps the agent, and its probe, running. One it
    sets later replaces ours, and if it calls the handler it replaced, as a chaining handler does, the
    default's behaviour follows; one that does not chain (a sys.exit) leaves the removal to close() at
    exit, as before. Only files are
    removed here, without the locks close() takes (the main thread may hold one where the signal
    interrupted it); close() at exit, if the process gets there, finds the file gone and carries on.

    A limit of Python's, not fixed here: a handler written in Python runs on the main thread between
    bytecodes, so while that thread is in one long call into C that does not look for signals (a C
    extension's computation; a blocking system call is interrupted and runs the handler, PEP 475), the
    handler, and with it the removal and the death by SIGTERM, waits for the call to return; the agent
    goes on meanwhile (tests/test_probe_sigterm_reuse.py), and its probe with it where the call releases
    the GIL (a call that holds it, as that test's builtins.sum, stops every thread). Without the probe such an
    agent would have died at once. What would do better is the I/O thread acting on the signal
    (signal.set_wakeup_fd): that descriptor is one per process and asyncio's loop sets its own, and
    only the main thread may restore SIGTERM's default, so it is not done. If the agent is killed
    (SIGKILL after a supervisor's grace period) before the call returns, the file stays behind: the
    next `cp-inspect ps` drops and removes it (its pid is dead, or names a process other than the one
    recorded at bind: see runtime_dir), `attach` says the agent has exited, and the next agent given
    that pid replaces it. On every normal exit path (return, sys.exit, an exception out of the main
    module) the atexit hook removes it; a multiprocessing worker's exit finalizer does."""
    global _SIGTERM_INSTALLED
    if _SIGTERM_INSTALLED or threading.current_thread() is not threading.main_thread():
        return
    try:
        previous = signal.getsignal(signal.SIGTERM)
        if previous is signal.SIG_IGN or previous is None or previous is _on_sigterm:
            _SIGTERM_INSTALLED = True
            return
        _SIGTERM_PREVIOUS[0] = previous
        signal.signal(signal.SIGTERM, _on_sigterm)
        _SIGTERM_INSTALLED = True
    except (ValueError, OSError, RuntimeError):
        pass  # not the main interpreter, or signals unavailable: as before, no removal on SIGTERM


def _unlink_live_sockets() -> None:
    for server in list(_LIVE_SERVERS):
        try:
            server._unlink()  # (only the file it made, in the process that made it)
        except Exception:
            pass


def _on_sigterm(signum: int, frame: Any) -> None:
    previous = _SIGTERM_PREVIOUS[0]
    if callable(previous):
        try:
            previous(signum, frame)
        except BaseException:
            _unlink_live_sockets()
            raise
        return
    _unlink_live_sockets()
    # What SIG_DFL would have done: die by the signal. Restored first so the re-sent one is not ours.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


_SIGTERM_INSTALLED = False
_SIGTERM_PREVIOUS: list[Any] = [signal.SIG_DFL]
_monotonic = time.monotonic  # a global: publish() runs for every event, a module attribute costs more
_LIVE_SERVERS: weakref.WeakSet[ProbeServer] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for server in list(_LIVE_SERVERS):
        server._disown_after_fork()
    _LIVE_SERVERS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
