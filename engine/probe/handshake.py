"""Admitting clients: the peer uid check, the hello frame and snapshot, and the frames a client may send.

A client gets `hello` then the snapshot then live events. It may send `hello` (to check the protocol
version; with `"lean": true` it asks for the lean stream, see `lean`, and with `"elide": true` too for
the elided one, see `elide`, and with `"frames": true` a recording agent's events as their own
frames, see `splice`, and with `"quiet": true` no batch that only says where the journal has reached,
see `elide`, and with `"ring": true` too its live frames in a shared-memory ring, see `ring`, and
with `"ring_unchecked": true` too no checksum on the frames the agent encodes for that ring, and with
`"tail": true` only the snapshot's tail, see `_start`), `ping` and `fetch` (whole traces of turns, see
`lean`, or a journal range, see `elide`). The agent's hello waits for the client's, HELLO_WAIT at most,
since what follows it depends on what the client asks; the client is attached to the journal only then
(see _register), and only a valid hello asking for a stream with traces makes the agent build them. Anything else, a corrupt or oversized frame, or another protocol version gets an
error frame and that connection is closed. A peer with another uid gets "permission_denied".

Following the recording (issue 15.4): an agent that records (`follow_recording`, set by the Pipeline
that writes the recording its hello names as "recording") and a client whose hello says `"follow": true`
(with whatever else it would ask for) make that client a follower: it gets a hello with `"following":
true` and no snapshot, is never attached (not counted in _nclients, so publish() returns at its first
test as with nobody attached: no event is queued, encoded or sent for it on any thread), and reads the
turns from the recording file, which the agent writes anyway (a turn's chunk at its close). It is still
answered pings and trace fetches, and the connection's end tells it the agent has gone. An agent that
does not record, that redacts, or whose recorder stopped (a full disk: `recording_stopped`, which also ends each
follower's connection with a "recording_stopped" error frame), answers such a hello as if `follow` were
not there: the client is attached as before. So does an agent from before following (it ignores the
flag). A follower that cannot use the file (another user's, moved, not a regular file) connects again
without `follow` (inspector/sources/live_recording.py).

Admission (the client limit, the descriptors kept for the agent, the accept budget) is
engine.probe.admission's; a connection it admits is registered here.
"""

from __future__ import annotations

import logging
import selectors
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from engine.probe.admission import Admission
from engine.probe.client_state import HIGH_WATER, INPUT_BURST, INPUT_RATE, Client
from engine.probe.elide import range_request
from engine.probe.lean import FETCH_MAX, FETCH_QUEUE, LAST_TURN_SCAN, is_turn
from engine.probe.redact import redact_event
from engine.probe.ring import rings_supported
from engine.recording.event_log import Deferred
from engine.recording.frames import FrameError, decode_frames, encode_frame

log = logging.getLogger("contextpipe.probe")

# 2: the fold stream (see elide.fold_out and `trace` requests). An agent speaks every version in
# PROTOCOLS and answers a client's hello in the client's own; a client that does not ask for the fold
# stream announces 1, so it attaches to an agent from before 2 as ever.
PROTOCOL_VERSION = 2
BASE_PROTOCOL = 1
FOLD_PROTOCOL = 2
PROTOCOLS = (1, 2)
# Clients only ever send tiny control frames; anything bigger is garbage or hostile.
CLIENT_FRAME_LIMIT = 64 * 1024
_PONG = encode_frame({"k": "pong"})
INPUT_READ = 2048
# How long the agent waits for a client's hello before sending its own hello and the whole snapshot
# (see _start). A ProbeClient sends its hello as it connects; only a client that never sends one waits.
HELLO_WAIT = 0.1
# A snapshot of more events than this is sent as its tail to a client that asks (see _start); a shorter
# one whole, as ever: it is sent in well under a second, and the first frame has every turn whole.
TAIL_MIN = 1024


class Handshake(Admission):
    # Set by ProbeServer.__init__ / start().
    pid: int
    _hello: dict[str, Any]
    _snapshot: Callable[[], Sequence[dict[str, Any]]]

    def _count_turns(self, src: Sequence[Any], n: int) -> tuple[int, int]:
        """Turns in src[:n], and a tapped client's journaling failures (`diag` events carry the running
        count; `ps` shows it), counted incrementally: the journal is append-only, so each attach only
        looks at what was added since the last one (not the whole session again).

        Of a journal that keeps its older events on disk (engine.recording.event_log), what is there is
        counted from its census (taken as they were written) and the rest as kept: a turn not built yet
        is counted as one, not built (the first attach to a long session read ~30,000 events back from
        disk and built ~700 turns' traces here, in one go, holding the GIL for seconds)."""
        if src is not self._turns_src or n < self._turns_upto:
            self._turns_src, self._turns_upto, self._turns, self._tap_errors = src, 0, 0, 0
        turns, tap_errors = self._turns, self._tap_errors
        start = self._turns_upto
        census = getattr(src, "spilled_census", None)
        entry = getattr(src, "entry", None)
        if census is not None and entry is not None:
            spilled, kinds, most = census()
            if start < spilled <= n:
                # The census covers all of [0, spilled). (One taken after a spill past n, which raced
                # with reading n, is not used: those few are read as they are kept, or from disk.)
                turns, tap_errors, start = kinds.get("turn", 0), max(0, most.get("diag", 0)), spilled
        else:
            entry = None
        for i in range(start, n):
            e = entry(i) if entry is not None else src[i]
            if e is None:  # spilled since the census was read: read from disk (rare: one chunk at most)
                e = src[i]
            if isinstance(e, dict):
                kind = e.get("k")
                if kind == "turn":
                    turns += 1
                elif kind == "diag":
                    try:
                        tap_errors = max(tap_errors, int(e.get("count", 0)))
                    except (TypeError, ValueError):
                        pass
            elif getattr(e, "kind", None) == "turn":
                turns += 1  # a turn whose trace nobody has read yet (engine.trace_lazy): not built here
        self._turns_upto, self._turns, self._tap_errors = n, turns, tap_errors
        return turns, tap_errors

    def _register(self, sock: socket.socket, uid: int) -> None:
        """Admit a connection: read what it sends, and wait for its hello (HELLO_WAIT at most). It is
        not attached to the journal until then (see _attach): a connection that sends nothing, half a
        frame or garbage costs the agent's thread nothing meanwhile (no event is queued for it, no call
        bracketed, no trace built), and one that fails its hello never costs it anything."""
        c = Client(sock, uid)
        c.cursor = self._head  # (not attached: holds back no release of the ring meanwhile)
        self._clients[c.fd] = c
        assert self._sel is not None
        self._sel.register(sock, selectors.EVENT_READ, c)
        c.hello_due = time.monotonic() + HELLO_WAIT
        self._on_readable(c)

    def _attach(self, c: Client) -> None:
        """Attach `c` to the journal: counted (publish() queues events for it from here), its snapshot
        taken. At its first valid hello, or when it is started without one (see _start)."""
        c.attached = True
        # Events already published go to the clients attached before this one; this one starts at the
        # ring's head and gets the earlier ones from the snapshot taken below.
        self._absorb()
        c.cursor = self._head
        self._nclients += 1
        self.bracket = True  # not quiet (yet): the Pipeline's calls are bracketed again (see agent_send)
        try:
            src = self._snapshot()
            n = len(src)
            turns, tap_errors = self._count_turns(src, n)
        except Exception as exc:
            log.exception("probe snapshot() failed")
            self._fail(  # (with its hello first: see _fail)
                c, "internal", f"the agent could not produce its journal snapshot: {type(exc).__name__}"
            )
            return
        self._absorb()
        k = self._head - c.cursor
        if n:
            # Events published between registration and reading the length may be in both; they are
            # the snapshot's last k at most, and one more: the agent journals an event and then
            # publishes it, so the snapshot may end with one it has not published yet (its thread was
            # between the two), which comes live later. The engine publishes the very object it
            # journals, so identity finds them (anything else is delivered twice, and a client of the
            # elided stream, which counts journal positions, would read the journal one place off).
            # (As kept: a turn whose trace nobody has built is held as it is, not built for this; see
            # snapshot_tail._skip_snapshot_tail for what it is published as.)
            entry = getattr(src, "entry", None)
            tail = [_kept(src, i, entry) for i in range(max(0, n - k - 1), n)]
            c.skip_ids = frozenset(id(e) for e in tail)
            c.skip_hold = [(e, e.marker() if isinstance(e, Deferred) else None) for e in tail]
            self._windows += 1  # (no stand-ins meanwhile: see elide.ELIDED_STAND_IN)
        c.snap_src = src
        c.snap_end = n
        c.jpos = n  # the first live event's journal position (see elide)
        c.hello_counts = (turns, tap_errors)

    def _start(self, c: Client) -> None:
        """Send the hello and start the snapshot: the client's hello has been read (or HELLO_WAIT passed
        without one). A client of the elided stream that asked for the tail (`"tail": true`) is sent the
        snapshot from the journal's newest turn on (hello: "snapshot" events from "snapshot_at"), so it
        can show that turn at once; the journal before it, it fetches by range as it would what the
        elided stream left out (see elide), within the CPU budget. The whole snapshot of a long session
        (~180,000 events after 30,000 turns) took the probe's I/O thread tens of seconds at its budget,
        and the inspector showed nothing until all of it was in."""
        if not c.attached:
            # Started without a hello of its own (at HELLO_WAIT, at its first frame or its end): served
            # the journal as it is kept, but no reader of traces (see tracing_clients): a turn nobody
            # else asked to be built comes to it as its `turn_deferred` marker.
            self._attach(c)
            if c.closing_deadline is not None:
                return  # (its snapshot failed: told so, and closing)
        c.hello_due = None
        src = c.snap_src
        n = c.snap_end
        turns, tap_errors = c.hello_counts
        at = 0
        if c.tail and c.elide and src is not None and n > TAIL_MIN:
            at = _newest_turn_at(src, n)
            c.snap_index = c.snap_built = at
            c.jdone = 0  # its copy of the journal is [0, 0): an agent that closes sends it from there
        c.outbuf += encode_frame(
            self._hello_frame(n - at, turns, tap_errors, at if c.tail and c.elide else None, c.protocol)
        )
        self._pump(c)

    def _start_due(self) -> None:
        """Start the clients that have not sent their hello within HELLO_WAIT (one from before hellos,
        or a raw socket): they get the whole snapshot, as every client did."""
        now = time.monotonic()
        for c in list(self._clients.values()):
            if c.hello_due is not None and now >= c.hello_due and self._clients.get(c.fd) is c:
                self._start(c)

    def _hello_frame(
        self,
        snapshot_len: int,
        turns: int,
        tap_errors: int = 0,
        snapshot_at: int | None = None,
        protocol: int | None = None,
    ) -> dict[str, Any]:
        # Redacting: the agent's own header goes through the same allow-list as events, and its argv
        # (which may carry prompts, paths, keys) is not sent at all.
        frame = redact_event(self._hello) if self.redact else dict(self._hello)
        # A header's own argv is the agent's, served by another process (a `cp-inspect run`'s proxy): its
        # sessions were listed by `ps` as "python -m inspector.cli proxy --port 0 --state-file ...".
        own = self._hello.get("argv")
        argv = own if isinstance(own, list) else sys.orig_argv
        frame.update(
            {
                "k": "hello",
                "protocol": PROTOCOL_VERSION if protocol is None else protocol,
                "pid": self.pid,
                # Arguments that are not valid UTF-8 (surrogate-escaped by Python) would fail to encode.
                "argv": None
                if self.redact
                else [str(a).encode("utf-8", "surrogateescape").decode("utf-8", "replace") for a in argv],
                "snapshot": snapshot_len,
                "turns": turns,
                "tap_errors": tap_errors,
                "redacted": self.redact,
                "queue_limit": self._cap,
                # This agent elides for a lean client that asks (engine.probe.elide): a client reads
                # this before it may send a range fetch (an older agent would close it for one).
                "elide": True,
                # And leaves out, for an elided client that asks, the batches that would only say where
                # the journal has reached (engine.probe.elide): the client then asks for it by a range.
                "quiet": True,
                # And writes a quiet client's live frames into a shared-memory ring if it asks (see ring).
                "ring": rings_supported(),
                # And leaves a ring's checksums out for a client that does not check them (see ring).
                "ring_unchecked": True,
                # And sends an elided client that asks only the snapshot's tail (see _start).
                "tail": True,
                # And the fold stream to a quiet elided client of protocol 2 that asks (see elide.fold_out).
                "fold": True,
            }
        )
        if snapshot_at is not None:
            frame["snapshot_at"] = snapshot_at  # the journal position of the first snapshot event
        return frame

    def _on_readable(self, c: Client) -> None:
        try:
            # Small reads: a client sends a hello and a few pings, and every read is charged before its
            # frames are decoded, so a flood costs one small decode before it is cut off.
            data = c.sock.recv(INPUT_READ)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(c)
            return
        if not data:
            if c.hello_due is not None:
                self._start(c)  # (its hello, as ever, for a client that connects and shuts its end)
            self._drop(c)  # the client closed (or half-closed) its end: it is done
            return
        if c.closing_deadline is not None:
            return  # already failed: discard whatever else it sends
        if not self._charge(c, 1.0):
            return
        c.inbuf += data
        try:
            frames, used = decode_frames(bytes(c.inbuf), limit=CLIENT_FRAME_LIMIT)
        except FrameError as exc:
            code = "frame_too_large" if "exceeds the limit" in str(exc) else "bad_frame"
            self._fail(c, code, f"malformed frame from client: {exc}")
            return
        del c.inbuf[:used]
        if frames and not self._charge(c, float(len(frames))):
            return
        for f in frames:
            kind = f.get("k")
            if c.hello_due is not None and kind != "hello":
                self._start(c)  # it did not begin with a hello: the whole snapshot, as before hellos
            if kind == "hello":
                theirs = f.get("protocol")
                if theirs not in PROTOCOLS or type(theirs) is not int:
                    # (Before it is attached: a hello the agent cannot answer costs it no snapshot.)
                    self._fail(
                        c,
                        "protocol_mismatch",
                        f"protocol mismatch: the agent speaks probe protocol {PROTOCOL_VERSION} (and "
                        f"{', '.join(map(str, PROTOCOLS[:-1]))}), the client speaks {theirs!r}",
                        protocol=PROTOCOL_VERSION,
                        client_protocol=theirs,
                    )
                    return
                if f.get("follow") is True and not c.attached and self._may_follow():
                    if not c.follows:
                        self._follow(c, theirs)
                    continue
                if c.follows:
                    # A follower's hello without `follow`: attached from here, sent a hello and the
                    # snapshot as a new client is (see _start).
                    c.follows = False
                    self._nfollowers -= 1
                    c.hello_due = 0.0
                if not c.attached:
                    if not _asks_fold(f):
                        # It reads the turns' traces (any stream but the fold stream's): counted before
                        # its snapshot is taken, so that a turn the agent journals meanwhile is built
                        # for it, as a turn after it is (see tracing_clients).
                        c.tracing = True
                        self._ntracing += 1
                    self._attach(c)  # the journal from here (see _register)
                    if c.closing_deadline is not None:
                        return  # (its snapshot failed: told so, and closing)
                if f.get("lean") is True and not c.lean:
                    c.lean = True
                    self._nlean += 1
                if c.lean and f.get("elide") is True and not c.elide:
                    c.elide = True
                    c.jdone = c.jpos  # what it was streamed so far is its journal up to here
                if c.elide and f.get("frames") is True:
                    c.frames = True  # a recording agent's events as their own frames (see splice)
                theirs = f.get("protocol")
                if (
                    c.elide
                    and f.get("fold") is True
                    and f.get("quiet") is True
                    and theirs in PROTOCOLS
                    and theirs >= FOLD_PROTOCOL
                    and not c.fold
                    and not c.quiet
                ):
                    # Before it is counted quiet: publish() then never stands in for an event it reads.
                    c.fold = True
                    c.frames = False  # (its events go as the fold stream's batches: see elide.fold_out)
                    self._nfold += 1
                    self._fold_changed()
                    if c.tracing:  # (a second hello: it reads traces no more)
                        c.tracing = False
                        self._ntracing -= 1
                if c.elide and f.get("quiet") is True and not c.quiet:
                    c.quiet = True  # no batch that only says where the journal has reached (see elide)
                    self._nquiet += 1
                    self.bracket = self._nclients > self._nquiet
                    if self._nfold:
                        self._fold_changed()  # (what may wait depends on whether every quiet client folds)
                if c.quiet and f.get("ring") is True and c.ring is None and rings_supported():
                    c.ring_asked = True  # its live frames in a shared-memory ring once offered (see ring)
                    # And it does not check their checksums (see ring: "Checksums").
                    c.ring_unchecked = f.get("ring_unchecked") is True
                if c.elide and f.get("tail") is True and c.hello_due is not None:
                    c.tail = True  # only the snapshot's tail (see _start); asked before it began
                c.protocol = theirs
                if not c.fold and not c.tracing:
                    # A hello from a client started without one: it reads the turns' traces from here.
                    c.tracing = True
                    self._ntracing += 1
                if c.hello_due is not None:
                    self._start(c)
            elif kind == "trace" and c.fold:
                self._queue_trace(c, f)
            elif kind == "fetch" and "from" in f:
                self._queue_range(c, f)
            elif kind == "fetch":
                self._queue_fetch(c, f.get("turns"))
            elif kind == "ping":
                # Best effort: a client that pings without reading must not grow our buffer.
                if len(c.outbuf) < HIGH_WATER:
                    c.outbuf += _PONG
            else:
                self._fail(c, "unknown_kind", f"unknown frame kind {kind!r}: the probe stream is read-only")
                return
        self._pump(c)

    def _may_follow(self) -> bool:
        """Whether a client may follow this agent's recording: it records, and its recorder has not
        stopped (see "Following the recording"); not while redacting (the recording is not redacted,
        and the hello does not name it then)."""
        return (
            self.follow_recording
            and not self.redact
            and self._recording_stopped is None
            and bool(self._hello.get("recording"))
        )

    def _follow(self, c: Client, protocol: int) -> None:
        """Make `c` a follower (see "Following the recording"): its hello, with no snapshot, and nothing
        else; never attached, so no event is kept for it. Its cursor stays at the head (see queues._fill),
        so it holds back no release of the ring."""
        c.follows = True
        c.protocol = protocol
        c.hello_due = None
        c.cursor = self._head
        self._nfollowers += 1
        try:
            src = self._snapshot()
            turns, tap_errors = self._count_turns(src, len(src))
        except Exception:
            turns, tap_errors = 0, 0
        frame = self._hello_frame(0, turns, tap_errors, None, protocol)
        frame["following"] = True
        c.outbuf += encode_frame(frame)

    def recording_stopped(self, why: str) -> None:
        """The agent's recorder stopped (a full disk, a write the OS refused): no client may follow the
        recording from now on, and each following one is told so (a "recording_stopped" error frame, then
        the connection closes) by the I/O thread, woken here: it attaches again and is served the
        journal live, the turns the file lacks with it. Called on the agent's thread; never raises."""
        try:
            self._recording_stopped = why or "the recording stopped"
            if self._nfollowers:
                self._wake()
        except Exception:
            pass

    def _stop_followers(self) -> None:
        """Tell every follower the recording stopped (see recording_stopped). On the I/O thread."""
        why = self._recording_stopped
        for c in list(self._clients.values()):
            if c.follows and c.closing_deadline is None:
                self._fail(
                    c,
                    "recording_stopped",
                    f"the agent's recording stopped ({why}): attach again to be served its journal live",
                )

    def _wake(self) -> None:  # ProbeServer's
        raise NotImplementedError

    def _queue_fetch(self, c: Client, turns: Any) -> None:
        """Queue whole traces for the client (see lean); answered by _fill within the CPU budget. A
        malformed or excess request is answered at once with "trace": None for each turn it names."""
        if not isinstance(turns, list):
            turns = []
        for t in turns[:FETCH_MAX]:
            if type(t) is int and len(c.fetch) < FETCH_QUEUE:
                c.fetch.append(t)
            elif len(c.outbuf) < HIGH_WATER:
                c.outbuf += encode_frame({"k": "trace", "turn": t if type(t) is int else None, "trace": None})

    def _queue_trace(self, c: Client, f: dict[str, Any]) -> None:
        """A fold client's `{"k": "trace", "turn": N}`: the agent's own trace of turn N (one the client
        could not rebuild to the request's hash, or from before it attached), answered as a fetch is
        (a `trace` event; "trace": None for a turn the agent does not have). A malformed one is told
        so in an error frame that names what was wrong; the connection stays (it is the client's
        mistake, not a broken stream) and the agent is not touched."""
        turn = f.get("turn")
        if type(turn) is not int or turn < 0:
            msg = (
                f"a trace request names one turn number, an int >= 0, as 'turn' (got {turn!r:.40}): "
                '{"k": "trace", "turn": N}'
            )
        elif len(c.fetch) >= FETCH_QUEUE:
            msg = f"more than {FETCH_QUEUE} trace requests are waiting for an answer; wait for one first"
        else:
            c.fetch.append(turn)
            return
        if len(c.outbuf) < HIGH_WATER:
            c.outbuf += encode_frame({"k": "error", "code": "bad_request", "message": msg, "fatal": False})

    def _queue_range(self, c: Client, f: dict[str, Any]) -> None:
        """Queue a journal range for an elided client (see elide), answered by _fill within the CPU
        budget. A malformed one, one from a client that did not ask for the elided stream, or one past
        FETCH_QUEUE is answered at once with no events (and no "size": the client cannot take it for
        the journal's end)."""
        rng = range_request(f) if c.elide else None
        if rng is not None and len(c.fetch) < FETCH_QUEUE:
            c.fetch.append(rng)
        elif len(c.outbuf) < HIGH_WATER:
            at = f.get("from")
            c.outbuf += encode_frame({"k": "journal", "at": at if type(at) is int else None, "events": []})

    def _journal(self) -> Sequence[Any]:
        return self._snapshot()

    def _charge(self, c: Client, cost: float) -> bool:
        """Take `cost` input tokens from the client; False (and the client failed) when it has run dry."""
        now = time.monotonic()
        c.in_tokens = min(INPUT_BURST, c.in_tokens + (now - c.in_at) * INPUT_RATE) - cost
        c.in_at = now
        if c.in_tokens >= 0:
            return True
        self._fail(
            c,
            "rate_limited",
            "the client sent more than the probe reads (a hello and a few pings); the stream is "
            "read-only: connect, optionally send hello, then read",
        )
        return False


def _asks_fold(f: dict[str, Any]) -> bool:
    """Whether a client's first hello (a valid one) asks for the fold stream: what the hello's flags
    below make a fold client of a client that asked for nothing before."""
    theirs = f.get("protocol")
    return (
        f.get("lean") is True
        and f.get("elide") is True
        and f.get("fold") is True
        and f.get("quiet") is True
        and type(theirs) is int
        and theirs >= FOLD_PROTOCOL
    )


def _kept(src: Sequence[Any], i: int, entry: Any) -> Any:
    """Journal event i as the journal keeps it (a Deferred not built yet stays one), else as read."""
    e = entry(i) if entry is not None else None
    if isinstance(e, Deferred) and e.marker() is not None:
        return e
    return src[i]


def _newest_turn_at(src: Sequence[Any], n: int) -> int:
    """The journal position of the newest `turn` event among the last LAST_TURN_SCAN of src[:n], or 0
    if there is none there (the whole snapshot, then: a first frame needs a turn to show). Reads the
    events as they are kept: the newest few are in memory (engine.recording.event_log), and only the
    one found is built."""
    entry = getattr(src, "entry", None)
    for i in range(n - 1, max(0, n - LAST_TURN_SCAN) - 1, -1):
        e = entry(i) if entry is not None else None
        if e is None:
            e = src[i]
        if is_turn(e) or getattr(e, "kind", None) == "turn":
            return i
    return 0
