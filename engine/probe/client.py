"""Client side of the live probe: attach to an agent by pid (finding the agents to attach to, for
`cp-inspect ps`, is `discover`'s; its names are re-exported here).

    with ProbeClient.connect(pid) as client:
        client.hello                      # protocol, pid, argv, model, provider, engine_version, snapshot, turns
        for event in client.events():     # the journal so far, then live events; ends when the agent exits
            ...                           # {"k": "dropped", "count": n} means n events were lost: reconnect
                                          # for a fresh snapshot if they matter

Every failure a person can act on is a typed `ProbeError` whose message says what to do.
"""

from __future__ import annotations

import os
import socket
import stat
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.probe.discover import (
    AgentInfo,
    SkippedSocket,
    _refusal,
    _serving_descendants_hint,
    list_agents,
    other_users_agents,
    served_sessions,
)
from engine.probe.frame_reader import _FrameReader
from engine.probe.handshake import BASE_PROTOCOL, FOLD_PROTOCOL, PROTOCOLS
from engine.probe.poll import PollInterval
from engine.probe.readable import readable
from engine.probe.ring import RingOverrun, RingReader
from engine.probe.runtime_dir import (
    NoSuchProcess,
    NotServing,
    PermissionDenied,
    ProbeError,
    ProbeTimeout,
    ProtocolMismatch,
    ServesConversations,
    agent_runtime_dir,
    other_users_process,
    pid_alive,
    process_uid,
    resolve_runtime_dir,
    same_process,
    socket_path,
)
from engine.probe.server import PROTOCOL_VERSION
from engine.recording.frames import FrameError, encode_frame

__all__ = [
    "PROTOCOL_VERSION",
    "AgentInfo",
    "NoSuchProcess",
    "NotServing",
    "PermissionDenied",
    "ProbeClient",
    "ProbeError",
    "ProbeTimeout",
    "ProtocolMismatch",
    "SkippedSocket",
    "list_agents",
    "other_users_agents",
]

_RECV_CHUNK = 256 * 1024


def _error_from_frame(frame: dict[str, Any], pid: int) -> ProbeError:
    code = frame.get("code")
    message = str(frame.get("message", "unspecified error"))
    if code == "protocol_mismatch":
        theirs = frame.get("protocol")
        return ProtocolMismatch(PROTOCOL_VERSION, theirs if isinstance(theirs, int) else None)
    if code == "permission_denied":
        return PermissionDenied(f"process {pid} refused the connection: {message}")
    return ProbeError(f"process {pid} closed the probe connection: {message}")


class ProbeClient:
    """One read-only connection to an agent's probe. Not thread-safe: use it from one thread."""

    def __init__(self, sock: socket.socket, pid: int, path: Path, *, poll: bool = False) -> None:
        self._sock = sock
        # Waits on a timer of its own, not on the socket (engine.probe.poll): the agent's sends never
        # wake this client. None: waits block on the socket.
        self.poll: PollInterval | None = PollInterval() if poll else None
        self.pid = pid
        self.socket_path = path
        self._reader = _FrameReader()
        self.hello: dict[str, Any] = {}
        self.disconnected = False
        self.dropped = 0  # total events the agent told us we lost
        # The rest of a lean stream's `batch` frame, each event with its journal position (elided
        # stream) or None.
        self._batch: deque[tuple[dict[str, Any], int | None]] = deque()
        self.elide = False  # the elided stream was asked for and the agent can send it (engine.probe.elide)
        self.journal_end = 0  # the elided stream: how far the agent's journal has been streamed (its batches' "end")
        self.snapshot_at = 0  # the journal position of the first snapshot event (see connect_path's `tail`)
        self.quiet = False  # the elided stream without end-only batches (see connect_path, engine.probe.elide)
        self.fold = False  # the fold stream (see connect_path, engine.probe.elide.fold_out)
        # Journal positions of the events the agent sends next as frames of their own (a batch with
        # "frames" announces them: see engine.probe.splice).
        self._framed: deque[int | None] = deque()
        # The agent's shared-memory ring for this client's live frames (engine.probe.ring), once its
        # `ring` frame has handed it over; frames are read from it before the socket's.
        self._ring: RingReader | None = None
        # The ring's frames need no checksum, and the agent leaves out those it can (see ring: "Checksums").
        self._ring_frames = _FrameReader(checked=False)
        self._ring_wanted = False  # asked for one: read the socket with recvmsg to take its descriptor
        self._fds: list[int] = []  # descriptors received, not yet claimed by a `ring` frame
        self._overrun = 0  # ring bytes lost since the last look, to report as `dropped`
        self._ring_held = False  # the agent marks the events it holds back in the ring (see ring)
        # The agent agreed that this client reads its recording file (see connect_path's `follow`).
        self.following = False

    # ---------------------------------------------------------------- connecting

    @classmethod
    def connect(
        cls,
        pid: int,
        timeout: float = 3.0,
        runtime_dir: Path | None = None,
        session: int | None = None,
        *,
        lean: bool = False,
        elide: bool = False,
        poll: bool = False,
        quiet: bool = True,
        ring: bool | None = None,
        tail: bool = False,
        fold: bool = False,
        follow: bool = False,
    ) -> ProbeClient:
        """Attach to agent `pid` (session `session` of a process that serves several, like the proxy). Raises NoSuchProcess, NotServing, PermissionDenied, ProtocolMismatch,
        ProbeTimeout (all ProbeError)."""
        alive = pid_alive(pid)
        if alive is False:
            raise NoSuchProcess(pid)
        d = resolve_runtime_dir(runtime_dir)  # PermissionDenied if the directory is not safely ours
        if alive is None or (runtime_dir is None and process_uid(pid) not in (None, os.getuid())):
            # Not ours (root may signal anyone's, so kill(0) alone does not say): its socket, if any, is in
            # its user's private directory, and its probe serves that user only. Root was told to start
            # serving an agent that was serving, for this user's directory held no socket of it.
            raise other_users_process(pid)
        if runtime_dir is None and (d is None or not os.path.lexists(socket_path(pid, d, session))):
            # The agent may have been started with another XDG_RUNTIME_DIR than this process has (a
            # desktop session's or a service's, where an ssh login has none): its socket is where its
            # own environment put it. Looking only in ours told the user to start serving an agent that was.
            theirs = agent_runtime_dir(pid)
            # (Not when ours holds sockets of its conversations: a proxy's pid, said below.)
            if theirs is not None and theirs != d and not (d is not None and served_sessions(pid, d)):
                d = resolve_runtime_dir(theirs) or d  # validated as ours is: PermissionDenied if not safe
        if d is None:
            raise NotServing(pid)
        path = socket_path(pid, d, session)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            served = served_sessions(pid, d)
            if served:
                raise ServesConversations(pid, path, session, served) from None
            raise NotServing(pid, path, advice=_serving_descendants_hint(pid, d)) from None
        if st.st_uid != os.getuid():  # with what to do, as ps says it (its process gone: remove it)
            raise PermissionDenied(f"probe socket {_refusal(path, st, pid)}")
        if not stat.S_ISSOCK(st.st_mode):
            raise NotServing(pid, path, "that path is not a socket")
        if same_process(st, pid) is False:
            # Whatever now has this pid is not the agent that made the socket (which has exited): its
            # listener may even live on in a child it forked, so connecting would only wait for a hello.
            raise NotServing(pid, path, "the socket was left by an earlier process with this pid, which "
                             "has exited (the pid now belongs to another process)")
        return cls.connect_path(
            path,
            pid,
            timeout,
            lean=lean,
            elide=elide,
            poll=poll,
            quiet=quiet,
            ring=ring,
            tail=tail,
            fold=fold,
            follow=follow,
        )

    @classmethod
    def connect_path(
        cls,
        path: Path,
        pid: int,
        timeout: float = 3.0,
        *,
        protocol: int | None = None,
        lean: bool = False,
        elide: bool = False,
        poll: bool = False,
        quiet: bool = True,
        ring: bool | None = None,
        tail: bool = False,
        fold: bool = False,
        follow: bool = False,
    ) -> ProbeClient:
        """Connect to a socket path directly (used by `connect`, `list_agents` and tests).

        `protocol` is what this client announces; only tests pass anything but the current version.
        `lean`: ask for the lean stream (engine.probe.lean: turns other than the newest of each send come
        as `turn_summary`, whole traces by `fetch`). An agent from before it sends every turn whole.
        `elide` (with `lean`): ask for the elided stream too (engine.probe.elide: no live events of the
        elided kinds, the journal by `fetch_journal`); `.elide` says whether the agent sends it. Such a
        client is not sent batches that only say where the journal has reached (`.quiet`, if the agent
        can; `quiet=False`: it is, as before): `journal_end` is where the last batch with events left it,
        and a `fetch_journal` past it answers with the journal's `size`.
        `poll`: wait for events on a timer of this client's own, not on the socket (engine.probe.poll):
        for a client that follows an agent for long (an inspector, a watcher), whose waits would
        otherwise make each of the agent's sends pay for waking it; events then arrive up to
        POLL_MAX (0.1 s) later. The hello is waited for on the socket either way.
        `ring` (a polling, quiet elided client asks unless `ring=False`): take the live frames from a
        shared-memory ring the agent writes (engine.probe.ring), so its turns make no send() at all;
        `.ring` says whether the agent handed one over (it does after the snapshot; an agent from
        before it never does).
        `tail` (with `elide`): ask for the snapshot's tail only, from the journal's newest turn on
        (engine.probe.handshake._start): `snapshot_at` is its first event's journal position (0 from an
        agent that sends the whole snapshot), and the journal before it is had by `fetch_journal`.
        `fold` (with a quiet `elide`): ask for the fold stream (engine.probe.elide.fold_out: every live
        event but the turns' traces, a turn as `{"k": "turn_deferred", "turn": N}`), for a client that
        folds the journal and builds the traces itself, so the agent need not build them as they come;
        `.fold` says whether the agent sends it. It announces protocol FOLD_PROTOCOL (2): an agent from
        before it refuses that with ProtocolMismatch, and the caller attaches again without `fold`.
        Without `fold` it announces 1 (`protocol`: tests announce another), which every agent speaks.
        `follow`: ask to read the agent's recording file instead of being sent its journal (engine.probe.
        handshake, "Following the recording"); `.following` says whether the agent agreed (its hello names
        the file as "recording" and no snapshot follows). An agent that does not record, or from before
        following, attaches the client as the other flags ask, as if `follow` were not there.
        """
        deadline = time.monotonic() + timeout
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(os.fsdecode(path))
                break
            except BlockingIOError:
                # The socket's backlog is full: clients are connecting faster than the agent admits
                # them (it admits a few per second under a connection storm). Retry until the timeout.
                sock.close()
                if time.monotonic() >= deadline:
                    raise ProbeError(
                        f"process {pid} is not admitting probe clients right now (too many are "
                        f"connecting); retried for {timeout:g} s, try again shortly"
                    ) from None
                time.sleep(0.05)
            except ConnectionRefusedError:
                sock.close()
                raise NotServing(pid, path, "the socket is stale (nothing is listening on it)") from None
            except FileNotFoundError:
                sock.close()
                raise NotServing(pid, path) from None
            except PermissionError:
                sock.close()
                raise PermissionDenied(f"no permission to connect to {path}") from None
            except TimeoutError:
                sock.close()
                raise ProbeTimeout(pid, timeout, "accept the connection") from None
            except OSError:
                sock.close()
                raise
        if protocol is None:
            protocol = FOLD_PROTOCOL if fold and lean and elide and quiet else BASE_PROTOCOL
        client = cls(sock, pid, path, poll=poll)
        # Only a polling client: one that waits on the socket would not see what arrives in the ring.
        client._ring_wanted = bool(lean and elide and quiet and poll and ring is not False)
        try:
            # Announce our version first, so an agent with another version can say so by name.
            hello: dict[str, Any] = {"k": "hello", "protocol": protocol}
            if follow:
                hello["follow"] = True
            if lean:
                hello["lean"] = True
                if elide:
                    hello["elide"] = True
                    # Take a recording agent's events as the frames it encoded (engine.probe.splice):
                    # recv_at hands them out with their positions like a batch's.
                    hello["frames"] = True
                    if tail:
                        # The journal from its newest turn on: the rest by range (a long session's
                        # whole snapshot took the agent tens of seconds to send at its CPU budget).
                        hello["tail"] = True
                    # Not told where the journal has reached by batches that hold nothing else: that
                    # is one send a call for the agent, and a range answer's size says it when asked.
                    if quiet:
                        hello["quiet"] = True
                        if fold and protocol >= FOLD_PROTOCOL:
                            hello["fold"] = True
                        if client._ring_wanted:
                            # Live frames in a shared-memory ring, not sent: no syscall a turn for the agent.
                            hello["ring"] = True
                            # Whose frames it reads unchecked, so the agent need not checksum them (see ring).
                            hello["ring_unchecked"] = True
            sock.sendall(encode_frame(hello))
        except OSError:
            pass  # the agent may have closed already; its hello or error is still readable
        try:
            frame = client._next_frame(timeout, on_socket=True)
            if frame is None:
                if client.disconnected:
                    raise NotServing(pid, path, "the agent closed the connection before its hello")
                raise ProbeTimeout(pid, timeout, "send its hello")
            if frame.get("k") == "error":
                raise _error_from_frame(frame, pid)
            if frame.get("k") != "hello":
                raise ProbeError(f"process {pid} sent {frame.get('k')!r} where a hello was expected")
            theirs = frame.get("protocol")
            # An agent's hello sent before it read ours (its snapshot failed, or ours came late) says
            # its newest version: one that also speaks ours (BASE_PROTOCOL) serves us in it.
            if theirs != protocol and not (protocol == BASE_PROTOCOL and type(theirs) is int and theirs in PROTOCOLS):
                raise ProtocolMismatch(protocol, theirs if isinstance(theirs, int) else None)
        except BaseException:
            client.close()
            raise
        client.hello = frame
        client.elide = lean and elide and frame.get("elide") is True
        at = frame.get("snapshot_at")
        client.snapshot_at = at if client.elide and type(at) is int and at >= 0 else 0
        # The agent leaves out the batches that only say where its journal has reached: `journal_end`
        # then lags behind the elided events after the last one sent, and a range fetch says the rest.
        client.quiet = quiet and client.elide and frame.get("quiet") is True
        client.fold = fold and client.quiet and protocol >= FOLD_PROTOCOL and frame.get("fold") is True
        client.following = follow and frame.get("following") is True and int(frame.get("snapshot", 0)) == 0
        return client

    # ---------------------------------------------------------------- reading

    def _next_frame(self, timeout: float | None, on_socket: bool = False) -> dict[str, Any] | None:
        """Next raw frame; None on timeout or disconnect. Raises ProbeError on a corrupt stream. A
        polling client (`.poll`) sleeps between non-blocking looks unless `on_socket`. With a ring, its
        frames (the live stream) come before the socket's (answers, pongs), and it is read to its end
        after the socket's."""
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = None if on_socket else self.poll
        while True:
            try:
                frame = self._ring_frames.next() if self._ring is not None else None
                if frame is None:
                    frame = self._reader.next()
                    if frame is not None and frame.get("k") == "ring" and self._ring_wanted:
                        self._open_ring(frame)
                        continue
            except FrameError as exc:
                self._mark_disconnected()
                raise ProbeError(f"corrupt data from process {self.pid}: {exc}") from None
            if frame is not None:
                return frame
            if self._overrun:
                lost, self._overrun = self._overrun, 0
                # The ring went round past what we had read: at least one event is gone.
                return {"k": "dropped", "count": 1, "ring_overrun": lost}
            if self._ring is not None and self._pull_ring():
                if poll is not None:
                    poll.got()
                continue
            if self.disconnected:
                return None
            # No early return at a zero budget: recv(0) is a non-blocking poll and must still read.
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                # A polling client only looks (a zero timeout puts it on no wait queue of the socket).
                ready = readable([self._sock.fileno()], remaining if poll is None else 0.0)
            except (OSError, ValueError):
                self._mark_disconnected()
                return None
            if not ready:
                if poll is None or remaining == 0.0:
                    return None
                nap = poll.idle()
                time.sleep(nap if remaining is None else min(nap, remaining))
                continue
            try:
                if self._ring_wanted and self._ring is None:
                    data, fds, _, _ = socket.recv_fds(self._sock, _RECV_CHUNK, 1)
                    self._fds += fds
                else:
                    data = self._sock.recv(_RECV_CHUNK)
            except (BlockingIOError, InterruptedError, TimeoutError):
                continue
            except OSError:
                data = b""  # ECONNRESET and friends: the agent is gone, same as EOF
            if not data:
                self._mark_disconnected()
                continue  # decode whatever complete frames are still buffered
            if poll is not None:
                poll.got()
            self._reader.feed(data)

    def _open_ring(self, frame: dict[str, Any]) -> None:
        """The agent's `ring` frame: map the descriptor that came with it, read-only (engine.probe.ring).
        The agent writes this client's live frames there from now on, so a client that cannot read it
        would silently miss them: it ends the connection with a ProbeError that says so."""
        fd = self._fds.pop(0) if self._fds else None
        try:
            if fd is None:
                raise ValueError("no descriptor came with it")
            self._ring = RingReader(fd, frame.get("size"))  # type: ignore[arg-type]
            self._ring_held = frame.get("held") is True
        except (OSError, ValueError) as exc:
            self._mark_disconnected()
            self._close_socket()
            raise ProbeError(
                f"process {self.pid} sent its live stream in a shared-memory ring this client cannot read "
                f"({exc}); attach again with ring=False to read it from the socket"
            ) from None
        finally:
            if fd is not None:
                os.close(fd)  # the mapping stays
        for extra in self._fds:  # nothing else is sent with a descriptor
            os.close(extra)
        self._fds.clear()

    def _pull_ring(self) -> bool:
        """Feed what the agent wrote to the ring since the last look; True if there was any."""
        assert self._ring is not None
        try:
            data = self._ring.take()
        except RingOverrun as exc:
            self._ring_frames = _FrameReader(checked=False)  # the writer's total is a frame boundary: start there
            self._overrun += exc.lost
            return True
        if not data:
            return False
        self._ring_frames.feed(data)
        return True

    @property
    def ring(self) -> bool:
        """The agent writes this client's live frames to a shared-memory ring (engine.probe.ring)."""
        return self._ring is not None

    def held(self) -> int | None:
        """None if the agent does not say when it holds events back (no ring, or one from before it did:
        see ring, "Held events"); else how many it had held when it held the newest, if it still holds
        them (nothing written to the ring since), or 0."""
        ring = self._ring
        if ring is None or not self._ring_held:
            return None
        try:
            return ring.held()
        except ValueError:  # (closed)
            return None

    def _mark_disconnected(self) -> None:
        self.disconnected = True

    def recv(self, timeout: float | None = None, *, on_socket: bool = False) -> dict[str, Any] | None:
        """The next event, or None when `timeout` passes or the agent disconnected (see .disconnected).

        `{"k": "dropped", "count": n}` is returned like any event (and added to `.dropped`); an error
        frame from the agent raises the matching ProbeError and ends the connection. A polling client
        (`poll=True`) waits on its own timer unless `on_socket` (for an answer it has just asked for).
        """
        return self.recv_at(timeout, on_socket=on_socket)[0]

    def recv_at(
        self, timeout: float | None = None, *, on_socket: bool = False
    ) -> tuple[dict[str, Any] | None, int | None]:
        """recv(), with the event's position in the agent's journal when the elided stream gives it
        (engine.probe.elide), else None."""
        if self._batch:
            return self._batch.popleft()
        frame = self._next_frame(timeout, on_socket)
        if frame is None:
            return None, None
        if self._framed:  # announced by the batch before it: the journal's event at the next position
            return frame, self._framed.popleft()
        kind = frame.get("k")
        if kind == "batch":
            # A lean stream's run of events in one frame: handed out one at a time, as if framed each.
            events = frame.get("events")
            at = frame.get("at")
            end = frame.get("end")
            if type(end) is int and end > self.journal_end:
                self.journal_end = end
            framed = frame.get("frames")
            if type(framed) is int and framed > 0 and isinstance(at, list) and events == [] and len(at) == framed:
                # The next `framed` frames are events at these positions, each sent as the agent encoded it.
                self._framed.extend(p if type(p) is int else None for p in at)
                return self.recv_at(timeout, on_socket=on_socket)
            if isinstance(events, list):
                if isinstance(at, list) and len(at) == len(events):
                    self._batch.extend(
                        (e, p if type(p) is int else None) for e, p in zip(events, at, strict=True) if isinstance(e, dict)
                    )
                else:
                    self._batch.extend((e, None) for e in events if isinstance(e, dict))
            return self._batch.popleft() if self._batch else self.recv_at(0)
        if kind == "error" and "code" in frame and frame.get("fatal") is False:
            return frame, None  # a request of ours it refused (a malformed `trace`): the stream goes on
        if kind == "error" and "code" in frame:  # the agent's; a journal `error` event (a failed call) has none
            self._mark_disconnected()
            self._close_socket()
            raise _error_from_frame(frame, self.pid)
        if kind == "dropped":
            count = frame.get("count")
            self.dropped += count if isinstance(count, int) else 0
        return frame, None

    def events(self) -> Iterator[dict[str, Any]]:
        """Blocking iterator over events; ends cleanly when the agent disconnects (`.disconnected`)."""
        while True:
            frame = self.recv(None)
            if frame is None:
                if self.disconnected:
                    return
                # An elided stream's batch with no events (it says only where the journal has reached)
                # returns None from recv() when nothing follows it yet: the agent is still there.
                continue
            yield frame

    def ping(self) -> bool:
        """Ask for a `{"k": "pong"}` (it arrives in order with the events). For liveness checks.
        False if it could not be sent (see `_send`)."""
        return self._send({"k": "ping"})

    def fetch(self, turns: list[int]) -> bool:
        """Ask for the whole traces of `turns` (a lean stream's summarized ones): each is answered, in
        order with the events, by `{"k": "trace", "turn": N, "trace": {...} or None}`. At most
        engine.probe.lean.FETCH_MAX turns a call count; the agent answers within its CPU budget.
        Safe to call from another thread than the one reading (it only sends). False if it could not
        be sent (see `_send`)."""
        return self._send({"k": "fetch", "turns": list(turns)})

    def request_trace(self, turn: int) -> bool:
        """Ask a fold-stream agent (`.fold`) for its own trace of `turn` (one this client could not
        rebuild to the request's hash, or from before it attached): answered in order with the events
        by `{"k": "trace", "turn": N, "trace": {...} or None}`; a malformed request by a non-fatal
        `{"k": "error", "code": "bad_request", "fatal": False, ...}` frame (recv returns it). Safe to
        call from another thread (it only sends). False if it could not be sent (see `_send`)."""
        return self._send({"k": "trace", "turn": turn})

    def fetch_journal(self, start: int, stop: int) -> bool:
        """Ask for the agent's journal events [start, stop) (elided stream only: see `.elide`), at most
        engine.probe.elide.RANGE_MAX a call; answered in order with the events by `{"k": "journal",
        "at": P, "events": [...], "size": N}` frames. Safe to call from another thread (it only sends).
        False if it could not be sent (see `_send`)."""
        return self._send({"k": "fetch", "from": start, "to": stop})

    def _send(self, frame: dict[str, Any]) -> bool:
        """Send one request; False if the socket would not take it. That does not end the stream: an
        agent that has closed its end (it exited) may have sent more before it did, the answers to
        earlier requests and its journal's last events among them, and they are still to be read;
        the reader sees the end of the stream after them. (Marking the client disconnected here made
        the reader stop with them unread: a live source whose background fetch found the agent gone
        lost what the agent had flushed to it on its way out.)"""
        try:
            self._sock.sendall(encode_frame(frame))
        except OSError:
            return False
        return True

    def fileno(self) -> int:
        """For select()-style integration: readable means recv() will make progress. With a ring
        (`.ring`) the live events do not make it readable: such a client polls (engine.probe.poll)."""
        return self._sock.fileno()

    def _close_socket(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()

    def close(self) -> None:
        self._close_socket()
        self.disconnected = True
        if self._ring is not None:
            self._ring.close()

    def __enter__(self) -> ProbeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
