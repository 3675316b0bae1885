"""The server's queues: the shared ring and each client's fill from its cursors, by the stream it
asked for (plain, lean, elided, fold; a ring of its own). Beside them: the client's own state
(`client_state.Client`), the snapshot's shared chunks (`snapshot_chunks`), the step past a snapshot's
tail (`snapshot_tail`), the answers to fetches (`fetch_answers`), the elided and fold streams' live
fill (`elided_fill`), a client's own ring (`client_rings`) and closing a client (`client_close`): the
last six are mixins of `ClientQueues`.

`publish` (in `server`) appends to `_pending`; the I/O thread moves events into the ring, and each
client reads the ring from its own cursor into a bounded output buffer. A client more than
`queue_limit` events behind loses the oldest and is told so with a `dropped` frame.

Memory per client is bounded by HIGH_WATER, whatever the length of the session:

* The snapshot (the journal so far) is not copied per client. The snapshot callable returns the
  journal's own append-only list; a client keeps a reference to it and the length it had, and reads
  it by index. Events are encoded in shared chunks (see snapshot_chunks), so a hundred clients
  attaching at once encode the journal once, and each holds at most its output buffer.
* Events published while a client's snapshot was being taken may be in both; only those (at most
  `queue_limit`, and the one the agent may have journaled but not yet published) are remembered to
  skip, not the ids of the whole journal (see snapshot_tail).
* A closed client is dropped at once: its socket, buffers and references go with it.
"""

from __future__ import annotations

import logging
import selectors
import zlib
from collections import deque
from itertools import repeat
from operator import call
from typing import Any

import msgpack

from engine.probe.client_close import ClientClose
from engine.probe.client_rings import ClientRings
from engine.probe.client_state import BATCH_EVENTS, HIGH_WATER, Client, ClientStats
from engine.probe.elide import (
    ELIDED_KINDS,
    ELIDED_STAND_IN,
    FOLD_DEFER_KINDS,
)
from engine.probe.elided_fill import ElidedFill
from engine.probe.fetch_answers import FetchAnswers
from engine.probe.lean import LAST_TURN_SCAN, is_turn, summary_event
from engine.probe.redact import redact_event
from engine.probe.ring import RingWriter
from engine.probe.snapshot_chunks import SnapshotChunks
from engine.probe.snapshot_tail import SnapshotTail
from engine.recording.frames import HEADER, MAX_FRAME_BYTES, FrameError, encode_frame, pack_payload_fast

log = logging.getLogger("contextpipe.probe")

# Bytes one client may be sent in one pass of the I/O loop, so one fast reader of a long snapshot
# cannot hold the loop (and close()) for seconds; the loop comes straight back for the rest.
PUMP_BUDGET = 1024 * 1024
_MISSING: Any = object()



class ClientQueues(SnapshotTail, SnapshotChunks, FetchAnswers, ElidedFill, ClientRings, ClientClose):
    """The server's queues and clients. Everything but `publish`'s append runs on the I/O thread, or on
    the agent's thread while it holds the pass lock (see agent_send)."""

    def __init__(self, queue_limit: int, redact: bool) -> None:
        self._cap = queue_limit
        self.redact = redact
        # publish() -> _pending (a deque: append and popleft are atomic under the GIL, so the agent
        # takes no lock and can never wait for the I/O thread) -> _ring (owned by whichever thread
        # holds the pass lock: the I/O thread, or the agent's in its flush, see agent_send).
        self._pending: deque[Any] = deque(maxlen=queue_limit)
        self._overflow = 0  # events _pending pushed out before the I/O thread got to them
        self._overflow_seen = 0
        # An event of a kind that is not elided was published since the last flush that handed the
        # waiting events on (set by publish, which has the event at hand, still in cache): while it is
        # False and every client is quiet, a flush has nothing to send (see agent_send.DEFER_EVENTS).
        self._loud = False
        self._ring: list[Any] = [None] * queue_limit
        self._head = 0  # ring sequence number of the next event
        self._released = 0  # ring slots before this sequence number hold no event (see _release_read)
        self._nclients = 0  # written by the I/O thread only; read by publish(): see the race note there
        self._wake_pending = False
        # When publish() last took an event (monotonic): tells the I/O thread whether a burst goes on.
        self._published_at = 0.0
        self._nlean = 0  # attached lean clients (diagnostics, tests)
        # Attached clients of the quiet elided stream (see elide): while every client is one, a call
        # that published only elided kinds has nothing to send (see agent_send.flush).
        self._nquiet = 0
        # Attached clients of the fold stream (see elide.fold_out): they need no trace built, so the
        # Pipeline stays on its unobserved path while every client is one (`tracing_clients`).
        self._nfold = 0
        # Attached clients that said in a valid hello what they read, and read the turns' traces (any
        # stream but the fold stream): only these make the Pipeline build each turn's trace as it comes
        # (see tracing_clients). Written by the I/O thread only.
        self._ntracing = 0
        # Clients that read the agent's recording file instead of being published to (see handshake,
        # "Following the recording"); never counted in _nclients. Written by the I/O thread only.
        self._nfollowers = 0
        # Whether this agent offers following: it writes the recording its hello names (set by the
        # Pipeline that records), and why its recorder stopped, once it has (then it offers it no more).
        self.follow_recording = False
        self._recording_stopped: str | None = None
        # The kinds publish() may leave waiting while every client is quiet (see server.publish): the
        # elided ones, or with a fold client attached the fold stream's (see elide.FOLD_DEFER_KINDS).
        self._defer_kinds: frozenset[str] = ELIDED_KINDS
        # Which of the fold stream's sets that is while every client is a fold client: it changes with
        # how long the agent's model calls take (see agent_send, "Before a long wait").
        self._fold_defer: frozenset[str] = FOLD_DEFER_KINDS
        # Whether a Pipeline call must be bracketed by hold()/flush() (see agent_send): while every
        # client attached is quiet (or none is), publish() itself leaves elided kinds waiting and sends
        # the rest, so the Pipeline skips both calls: after a model call each runs cold. Written by
        # the I/O thread with _nclients and _nquiet, read by the Pipeline at each call's start.
        self.bracket = False
        # Clients whose snapshot's window is open (see snapshot_tail): publish puts no stand-in
        # in the queue meanwhile (see elide.ELIDED_STAND_IN).
        self._windows = 0
        # The one client publish() may serve by its straight path (agent_send._ring_now), or None: set
        # under the pass lock only, when the state that path needs holds (agent_send._ring_candidate),
        # and cleared under it by every pass and every other send before they change anything.
        self._ring_one: Client | None = None
        self._nrings = 0  # clients with a ring (see ring), at most MAX_RINGS
        # The fold clients' rings, for publish() to mark the events it holds back (ring: "Held events"):
        # a tuple the I/O thread replaces, never changes, so the agent's thread may read it at any moment.
        self._held_rings: tuple[RingWriter, ...] = ()
        self._holds = 0  # events publish() held back while a ring client was attached
        self._clients: dict[int, Client] = {}
        self._sel: selectors.BaseSelector | None = None
        # This pass's encodings, shared by clients: an event's frame by sequence number; a lean run's
        # (frame, next sequence number, events) by (first, head, newest turn).
        self._enc_cache: dict[Any, Any] = {}
        self._more = False  # a client hit PUMP_BUDGET with more to send: the loop must not sleep
        SnapshotChunks.__init__(self)  # the shared snapshot chunks
        # Reused by the I/O thread only. msgpack.packb builds a Packer per call, which costs more than
        # packing a typical 1 KB event; the bytes are identical to engine.recording.frames.encode_frame.
        self._packer = msgpack.Packer(use_bin_type=True)

    def _spent(self) -> bool:  # IOLoop's: this pass of the I/O loop has used its CPU budget
        raise NotImplementedError

    def _in_debt(self) -> bool:  # IOLoop's: this pass began owing the CPU budget
        return False

    def stats(self) -> list[ClientStats]:
        head = self._head
        backlog = len(self._pending)
        out = []
        for c in list(self._clients.values()):
            out.append(
                ClientStats(
                    fd=c.fd,
                    uid=c.uid,
                    queued=min(head - c.cursor + backlog, self._cap),
                    buffered_bytes=len(c.outbuf),
                    dropped=c.dropped_total + max(0, head - self._cap - c.cursor),
                    sent_events=c.sent_events,
                    snapshot_pending=0 if c.snap_src is None else c.snap_end - c.snap_index,
                    closing=c.closing_deadline is not None,
                )
            )
        return out

    def _absorb(self) -> int:
        """Move published events from _pending into the ring; returns how many."""
        overflow = self._overflow
        if overflow != self._overflow_seen:
            # Those never reached the ring, so every attached client missed them: add them to each
            # client's next `dropped` notice.
            lost = overflow - self._overflow_seen
            self._overflow_seen = overflow
            for c in self._clients.values():
                if not c.attached:
                    continue  # (its snapshot, taken later, has them)
                c.lose(lost)
                c.jpos += lost  # (a client told `dropped` re-syncs; see elide)
        n = len(self._pending)
        if n:
            self._move_pending(n)
        return n

    def _move_pending(self, n: int) -> list[Any]:
        """Move the `n` oldest published events into the ring (there are at least `n`) and return them.
        One C-level loop (no bytecode per event, so no thread switch inside it either): the agent only
        appends, so the n events counted are there to pop, in order."""
        moved = list(map(call, repeat(self._pending.popleft, n)))
        self._store(self._head, moved)
        self._head += n
        return moved

    def _store(self, head: int, moved: list[Any]) -> None:
        """Put events taken from _pending at ring sequence numbers head.. (see _move_pending)."""
        ring, cap, n = self._ring, self._cap, len(moved)
        lo = head % cap
        if lo + n <= cap:
            ring[lo : lo + n] = moved
        else:
            k = cap - lo
            ring[lo:] = moved[:k]
            ring[: n - k] = moved[k:]

    def _release_read(self) -> None:
        """Let go of the events every client has been sent: their ring slots are cleared (on the I/O
        thread, under the pass lock; nothing reads a slot behind every cursor but the look-back for a
        fetched turn, which then finds it in the journal). Left in the ring until written over, the
        last `queue_limit` events (10,000) stayed in memory while any client was attached, where the
        journal keeps 4,096 and moves older ones to disk: an inspector on a long session held ~14 MB
        more of a 70 MB agent, and more with larger events. A client that does not read still keeps
        what it has not been sent, up to `queue_limit` (it is told what it lost past that)."""
        head = self._head
        low = head
        for c in self._clients.values():
            if c.cursor < low and not c.follows:
                low = c.cursor
        cap = self._cap
        start = max(self._released, head - cap)  # (slots before head - cap hold newer events now)
        n = low - start
        if n <= 0:
            return
        self._released = low
        ring = self._ring
        lo = start % cap
        if lo + n <= cap:
            ring[lo : lo + n] = repeat(None, n)
        else:
            k = cap - lo
            ring[lo:] = repeat(None, k)
            ring[: n - k] = repeat(None, n - k)

    def _take_pending(self, n: int) -> list[Any]:
        """`_move_pending` for when no client will read these slots: the one client, in step with the
        head, is sent them now (agent_send._ring_turn) and any client that attaches later starts at the
        head. The ring slots keep what they held (every fill reads only from a client's cursor to the
        head), so the agent's thread does not write over, and release, references to events published
        `queue_limit` events ago, each a cache miss after a model call (~8 us a turn on a small VM);
        the events taken here are released when the caller is done with them, still in cache. A caller
        that then leaves them to a fill after all puts them in the ring first (`_store`)."""
        moved = list(map(call, repeat(self._pending.popleft, n)))
        self._head += n
        return moved

    def _pump(self, c: Client) -> None:
        """Encode what this client may have next and send as much as the socket takes (up to PUMP_BUDGET)."""
        sent = 0
        while True:
            if c.closing_deadline is None:
                self._fill(c)
            if not c.outbuf:
                break
            if sent >= PUMP_BUDGET:
                self._more = True  # come back next pass, after the other clients and the listener
                return
            try:
                n = c.sock.send(c.outbuf)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError:
                self._drop(c)  # EPIPE/ECONNRESET: the client went away
                return
            if n:
                del c.outbuf[:n]
                sent += n
            if c.outbuf:
                # The kernel buffer is full: wait for writability instead of spinning.
                self._want_write(c, True)
                return
            if c.cursor >= self._head and not c.fetch and c.snap_src is None:
                break  # all sent and nothing left to fill: no second (empty) fill, as every pass made
            if self._spent():
                # The pass's CPU budget is spent: the rest at the next pass, after the rest that repays
                # it. Filling on to PUMP_BUDGET, each fill cut short by the budget to a frame of one
                # event and a send() of its own, made a history fill's pass 3-4x its budget (~6-9 ms of
                # the agent's GIL a pass, 11-17 ms of CPU a second behind a paced agent, not ~4).
                self._more = True
                break
        if c.closing_deadline is not None:
            self._drop(c)  # error frame delivered
            return
        if c.want_write:
            self._want_write(c, False)
        if c.ring_asked and c.snap_src is None:
            self._offer_ring(c)

    def _want_write(self, c: Client, on: bool) -> None:
        if c.want_write == on:
            return
        c.want_write = on
        sel = self._sel
        if sel is None:
            return
        # A closing client is no longer read (see _fail): only its error frame is still being sent.
        events = selectors.EVENT_WRITE if c.closing_deadline is not None else selectors.EVENT_READ
        if on:
            events |= selectors.EVENT_WRITE
        try:
            sel.modify(c.sock, events, c)
        except (KeyError, ValueError, OSError):
            self._drop(c)

    def _encode_event(self, ev: Any, redacted: bool = False) -> bytes | None:
        """`ev`'s frame (redacted first when the server redacts, unless `redacted` says it already is)."""
        if type(ev) is bytes:
            return ev  # a frame published as it is
        if not isinstance(ev, dict):
            return None
        try:
            obj = redact_event(ev) if self.redact and not redacted else ev
            # Encoding is most of this thread's work on a turn (a trace is ~300 objects).
            payload = pack_payload_fast(obj)
            if payload is None:
                payload = self._packer.pack(obj)
            if len(payload) > MAX_FRAME_BYTES:
                raise FrameError(f"frame of {len(payload)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
            return HEADER.pack(len(payload), zlib.crc32(payload)) + payload
        except Exception as exc:
            # An event the engine could not have meant to publish (not msgpack-able, or above the frame
            # limit). Count it as dropped for the client rather than kill the stream.
            self._packer.reset()
            log.warning("probe could not encode a %r event: %s", ev.get("k"), exc)
            return None

    def _append(self, c: Client, frame: bytes | None) -> None:
        """One event's frame for this client (None: one it cannot be sent, counted as lost)."""
        if frame is None:
            c.lose(1)
            return
        self._emit(c, b"", frame, 1)

    def _fill(self, c: Client) -> None:
        if c.hello_due is not None:
            return  # its hello is not sent yet (see handshake._start): nothing may go before it
        if c.follows:
            # Reads the recording (see handshake, "Following the recording"): no live event is for it,
            # only the answers to its fetches.
            c.cursor = self._head
            if c.fetch:
                self._fill_fetch(c)
            return
        if c.snap_src is not None and not self._fill_snapshot(c):
            return
        # The live stream first, then the fetches within what is left of the pass's CPU budget and of
        # HIGH_WATER. Fetches first held the live stream back while any was waiting, and an inspector
        # filling a long session's history keeps a range request waiting until it has it all: attached
        # to a 50,000-turn agent, its turn count stood still for 40 s and then jumped by 7,500 (see also
        # loop: the passes of such a fill never reached _service). A client takes the two in either
        # order (live batches and range answers say their journal positions; a fetched trace answers a
        # turn it was sent the summary of, whenever that was).
        self._fill_live(c)
        if c.fetch:
            self._fill_fetch(c)

    def _fill_live(self, c: Client) -> None:
        """The live events from the client's cursor, by its stream's kind (after its snapshot)."""
        cap = self._cap
        ring = self._ring
        head = self._head
        base = head - cap
        if c.cursor < base:
            c.lose(base - c.cursor)
            c.jpos += base - c.cursor
            c.cursor = base
        if c.skip_hold is not None and not self._skip_snapshot_tail(c):
            return  # nothing but what the snapshot had, so far
        # With several clients each event is encoded once per I/O-loop pass (keyed by sequence number).
        share = len(self._clients) > 1
        cache = self._enc_cache
        outbuf = c.outbuf
        seq = c.cursor
        if c.elide:
            if c.ring is None:
                self._fill_elided(c)
            else:
                self._fill_ring(c, c.ring)
            return
        # Journal positions are counted on every stream (every live event past the snapshot's is the
        # journal's next one), so a client that asks for the elided one in a hello read after some
        # live events were sent gets the right ones from then on.
        if c.lean:
            self._fill_lean(c)
            c.jpos += c.cursor - seq
            return
        while seq < head and len(outbuf) < HIGH_WATER:
            ev = ring[seq % cap]
            seq += 1
            if type(ev) is tuple:  # (event, its frame) from an agent that records: nothing to encode
                if c.dropped_pending:
                    self._append(c, ev[1])
                else:  # _append's common case, inline: this loop runs for every event of every turn
                    outbuf += ev[1]
                    c.sent_events += 1
                continue
            if share:
                frame = cache.get(seq, _MISSING)
                if frame is _MISSING:
                    frame = cache[seq] = self._encode_event(ev)
            else:
                frame = self._encode_event(ev)
            self._append(c, frame)
        c.jpos += seq - c.cursor
        c.cursor = seq

    @property
    def tracing_clients(self) -> int:
        """Attached clients that read the turns' traces: those whose valid hello asked for any stream
        but the fold stream. While there is none, the Pipeline need not build a turn's trace as it
        comes (see Pipeline._unwatched). A connection that has not sent a valid hello is not one: one
        that sends nothing, half a frame or garbage costs the agent no trace (fuzz43: held open, such
        clients made every turn build its trace, 2.28x the agent's quiet CPU); one started without a
        hello is sent a turn nobody else asked to be built as its `turn_deferred` marker."""
        return self._ntracing

    # Set by ProbeServer: what publish() queues for a waiting elided kind (see elide.ELIDED_STAND_IN).
    _stand_in: dict[str, Any] | None

    def _fold_changed(self) -> None:
        """A fold client came or went: what publish() may leave waiting, and whether a stand-in may hold
        its place (a fold client reads every event, so none while one is attached). Set before the
        client is counted quiet (see handshake), so publish() never stands in for an event it needs."""
        if not self._nfold:
            self._defer_kinds = ELIDED_KINDS
            self._stand_in = ELIDED_STAND_IN
        else:
            self._stand_in = None
            # (With a quiet elided client too, what it needs at once: the agent builds every turn then.)
            self._defer_kinds = self._fold_defer if self._nfold == self._nquiet else ELIDED_KINDS

    def _fill_lean(self, c: Client) -> None:
        """The live events for a lean client: runs of up to BATCH_EVENTS events in one `batch` frame
        (one encoder call, one header and crc for the run, where a frame each cost them per event),
        with every turn in what is sent now but the newest as its summary (see lean). A frame the agent
        already encoded (a recording agent's) goes out as it is, between runs.

        The summaries are made here, not by publish() on the agent's thread: measured on a 1-2 ms turn,
        making one there cost the agent ~10 us a turn and saved this thread no more than that."""
        cap = self._cap
        ring = self._ring
        head = self._head
        outbuf = c.outbuf
        seq = c.cursor
        newest = self._newest_turn(seq, head)
        # Lean clients reading from the same place get the same runs: encoded once per pass, kept by
        # (first event, head, newest turn), which fix a run.
        cache = self._enc_cache if self._nlean > 1 else None
        # This loop runs for every event of every turn, and its first look at an event built up to
        # ~100 ms ago on the agent's core is a cache miss: it does no more than that look (its type, and
        # "k" for a turn to summarize) unless the server redacts (first, so the lean stream's own kinds
        # stay readable).
        redact = self.redact
        run: list[Any] = []
        owed: list[int] = []  # the run's turns sent as summaries
        start = seq
        while seq < head:
            if not run:
                if len(outbuf) >= HIGH_WATER:  # it grows only here, between runs
                    break
                start = seq
                if cache is not None:
                    hit = cache.get((start, head, newest))
                    if hit is not None:
                        hdr, payload, seq, n, turns = hit
                        self._emit(c, hdr, payload, n)
                        c.owed.update(turns)
                        continue
            ev = ring[seq % cap]
            seq += 1
            kind = type(ev)
            if kind is dict:
                if redact:
                    ev = redact_event(ev)
                if seq <= newest and ev.get("k") == "turn":  # seq is one past this event's: an older turn
                    summary = summary_event(ev)
                    if summary is not ev:
                        owed.append(ev["turn"])
                        ev = summary
            elif kind is tuple:  # (event, its frame): sent as it is
                if run:
                    self._append_run(c, run, owed=owed)
                    run, owed = [], []
                self._append(c, ev[1])
                continue
            run.append(ev)
            if len(run) >= BATCH_EVENTS:
                self._append_run(c, run, cache, (start, head, newest), seq, owed)
                run, owed = [], []
        if run:
            self._append_run(c, run, cache, (start, head, newest), seq, owed)
        c.cursor = seq

    def _append_run(
        self,
        c: Client,
        run: list[Any],
        cache: dict[Any, Any] | None = None,
        key: tuple[int, int, int] | None = None,
        end: int = 0,
        owed: list[int] | None = None,
    ) -> None:
        """One `batch` frame for these events, already redacted if the server redacts (kept in `cache`
        under `key`, with the sequence number after the run and the turns it summarized (`owed`), for
        the next lean client at the same place), or, if they cannot be encoded
        together (one is not msgpack-able, or they exceed the frame limit), a frame each (an
        unencodable one is lost)."""
        if owed:
            c.owed.update(owed)
        payload = pack_payload_fast({"k": "batch", "events": run}) if len(run) > 1 else None
        if payload is None or len(payload) > MAX_FRAME_BYTES:
            for ev in run:  # (already redacted, when the server redacts)
                self._append(c, self._encode_event(ev, redacted=True))
            return
        # Header and payload go into the buffer one after the other: joining them first copied a
        # batch of tens of KB once more per pass.
        hdr = HEADER.pack(len(payload), zlib.crc32(payload))
        if cache is not None:
            cache[key] = (hdr, payload, end, len(run), owed or ())
        self._emit(c, hdr, payload, len(run))

    def _emit(self, c: Client, hdr: bytes, payload: bytes | bytearray, events: int) -> None:
        """`events` events (a frame's header and payload) into this client's buffer, after the notice of
        what it lost since its last: sent just before the next event that does arrive, so the count is
        never left dangling."""
        if c.dropped_pending:
            c.outbuf += encode_frame({"k": "dropped", "count": c.dropped_pending})
            c.dropped_pending = 0
        c.outbuf += hdr
        c.outbuf += payload
        c.sent_events += events

    def _newest_turn(self, start: int, head: int) -> int:
        """Sequence number of the newest `turn` event in ring[start:head] (looking back at most
        LAST_TURN_SCAN events), or -1."""
        ring = self._ring
        cap = self._cap
        if start >= head:
            return -1
        for seq in range(head - 1, max(start, head - LAST_TURN_SCAN) - 1, -1):
            ev = ring[seq % cap]
            if is_turn(ev) or (type(ev) is tuple and is_turn(ev[0])):
                return seq
        return -1

    def _hello_frame(self, snapshot_len: int, turns: int, tap_errors: int = 0) -> dict[str, Any]:  # Handshake's
        raise NotImplementedError
