"""The agent's own thread sends what one of its calls published, when that is cheap and safe.

An agent waits on its model between turns, so each of its turns is a burst of its own. With the I/O
thread sending, every such turn cost that thread two wake-ups (the publish's wake-up byte, then the
timed wait for the rest of the burst), and on a shared VM each block-and-wake of a thread is charged
~100-200 us of its CPU clock: ~450 us a turn, over 20% of a 1.75-2 ms turn, where the work itself
is 12-19 us. So the Pipeline (the only publisher) brackets each public call that may journal with
`hold()` at its start and `flush()` at its end. Publishes in between append to the queue as always
and write no wake-up byte; `flush`, on the agent's thread:

* checks that it is cheap: not more than AGENT_WINDOW_SENDS flushes in AGENT_WINDOW (an agent running
  turns back to back is served for less by the I/O thread's bursts, one pass for many turns);
* checks that it is safe: the I/O thread is asleep with nothing in progress (the wake-up flag clear,
  no burst being coalesced, no pass owed), one or two clients (AGENT_CLIENTS), each on the lean
  stream, with no snapshot, fetch or error frame to send and nothing waiting in its buffer; and it
  takes the pass lock without waiting (the I/O thread holds it for each pass, from select()
  returning until it blocks again, in select() or in a rest its CPU budget imposes);
* moves the events into the ring and fills each client's buffer as the I/O thread would (at most
  AGENT_EVENTS events behind the head, so one flush's encoding is bounded by what the agent's own
  call published), then makes one non-blocking send() per client;
* leaves what the socket did not take in the client's buffer and wakes the I/O thread to finish it
  (it waits for writability as before): a client that does not read costs the agent one bounded
  fill and one send that returns at once, never a wait.

If any check fails it wakes the I/O thread as publish() did (the old path, coalescing and all). A
paced agent's turn then wakes no probe thread. To a client told where the journal has reached (every
client before `quiet`, see elide) it makes one send a call, the batch of a call that published only
elided kinds empty but for that. While every client attached is quiet (the inspector's live source
is), such a call is sent nothing: its flush leaves the events waiting, cheaply, for the next flush
with something to send (DEFER_EVENTS), so a turn is one fill and one send (the record_usage's, with
the turn), not four, each of which ran cold after the model call; whether a flush has anything to
send is one flag publish() sets when it hands on a kind that is not elided. A reader that waits on the
socket makes each send pay for waking it (a shared VM charges that to the sender: tens of us of its CPU
clock); the inspector's waits are on its own timer instead (engine.probe.poll), and it takes its live
frames from a shared-memory ring (engine.probe.ring): the turn is then copied there, no send() at all.

Everything on this path runs cold after the model call (on this VM a line of Python a few us, a
trace's encoding ~20 us, the copy of a turn's frame into memory not touched for a while ~10-20 us), so
the common case has a short path of its own (`_ring_turn`): the one client reads a ring, in step with
the head, nothing else owed to it; the turn's kept events go in one batch frame (a recording agent's
turn as the frame its recorder encoded, `_ring_framed`), and they are not written into the event ring
(no client will read them there: see queues._take_pending). Anything else takes the general fill.
That client's socket may meanwhile carry its history by range (an inspector attached to a long
session fills it for minutes, the I/O thread resting between passes by its CPU budget): what waits
there is no reason to leave the turn to that thread, whose rest it would wait out (see _in_step).

Measured on that turn, what cost the agent's thread most beyond the turn's encoding and copy was the
path itself: ~30 us of calls and checks, cold (a prototype with none of them: 58 against 89 us a turn).
So publish() has a straight path (`_ring_now`) for an event to send while the one ring client's state
is settled: the I/O thread, about to sleep with nothing due, names that client (`_ring_one`, from
`_ring_candidate`, under the pass lock; every pass and every other send clears it under the lock before
it changes anything, and a send on this thread sets it again after), so publish checks only what can
change without the lock (the queue, the overflow count, a close). It takes the lock without waiting,
checks that the events waiting before this one are not to be sent (elided kinds wait as one shared
stand-in each: see elide.ELIDED_STAND_IN), and writes the batch of this one event (a recording agent's
frame, announced) into the ring. Any other shape goes back to the queue and the paths below.

A fold client (see elide.fold_out) is named too: its turn goes by its own straight path, and what
publish() holds back for it before a long wait and between turns closer than FOLD_COALESCE is
engine.probe.fold_send's (a mixin of AgentSend). The bounds this path keeps are engine.probe.agent_limits.

While every client attached is quiet (or none is), the Pipeline does not call hold() and flush() at
all (`bracket`, one attribute test at each call's start): publish() does their part itself, outside
any call. An event of an elided kind is left waiting (up to DEFER_EVENTS); any other event is handed on
at once with those before it (`_send_now`, what flush() does with something to send). A paced turn is
then six publishes and one send, where it was also four hold() and four flush() calls, three of the
flushes only to leave their call's events waiting; after a model call each ran cold. A client that is
not quiet brings the calls back (the I/O thread sets `bracket` when it registers one), so its stream
is as before; a call already running when it attaches publishes as outside a call (its events wake
the I/O thread).

An event published outside a held call (a capture layer journaling on its own, say), or more than
HOLD_MAX after its call began (a call that waits on a summarizer's model), wakes the I/O thread as
before; an event published early in a long call that publishes nothing after HOLD_MAX waits for the
call's end. The CPU the agent's thread spends here is the agent's to the I/O thread's budget (see
cpu_budget), as any other work of its own.

Lingering (off unless `quiet_linger` is set): the turn handed to the I/O thread instead. Everything
above spends the agent's thread on the send, cold after the model call (~80-100 us a paced turn, 5% of
a 1.5-2 ms turn; issue 15.4 asks <= 1%). With `quiet_linger` > 0, an event published while every client
is quiet, in a turn that began less than that long after the last one (a paced agent's; a turn is its
events less than TURN_GAP apart, judged at its first), is only appended to
the queue, as a reference (the engine does not change a journal event once published: the tests compare
what the inspector shows with the agent's own traces), with one wake-up byte if the I/O thread sleeps.
That thread's burst then waits quiet_linger (at least MAX_LATENCY) between passes (loop._start_wait),
so the inspector sees a turn up to that late, while each pass finds
something new, sending every turn waiting by the short path (`_ring_turn`, from loop._linger_pass), and
ends (the flag cleared, the thread asleep) at the first pass that finds nothing. An agent slower than
`quiet_linger` between publishes keeps the path above. Each timed pass costs the I/O thread ~150-300 us
(a bare timed select() wake-up on this VM ~60 us of thread CPU, the encode of the turns waiting and the
ring's write, the loop's calls), so it pays only when a pass takes several turns. Measured with
quiet_linger 1.0 (bench_probe, load 3-4.7): a fold reader, turns 0.2 s apart (`--twin foldlinger`): the
process -29.8 us a turn [95% -41.4, -16.1] (0.978) against the agent's thread sending, probe thread
41.5 us a turn; with MAX_LATENCY waits it was +140 to +181 us (2.5 times the passes). An elided ring
reader, turns 0.5 s apart (`--flush-ab 0.5 --flush-modes agent,agent-linger`): the probe's part of the
agent's thread 90.5 -> 42.2 us a turn (4.93% -> 2.26%; 17.6 us, 0.83%, in an earlier run), the probe
thread 14 -> 157 us a turn. Off by default: one run each, the inspector then sees a paced agent's turn up
to quiet_linger late, and the elided reader's process cost rises. The turn handed at once to a thread
of the probe's own, woken by a lock's release (the cheapest wake-up measured here), is engine.probe.handoff
(opt-in too, for the same reason: the process pays more than the agent's thread saves).
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from engine.probe.agent_limits import (
    _U32,
    AGENT_CLIENTS,
    AGENT_EVENTS,
    AGENT_WINDOW,
    AGENT_WINDOW_SENDS,
    DEFER_EVENTS,
    QUIET_LINGER,
)
from engine.probe.client_state import Client
from engine.probe.elide import ELIDED_STAND_IN, fold_out, kept
from engine.probe.fold_send import FOLD_COALESCE, FoldSend
from engine.probe.lean import summary_event
from engine.probe.ring import MARK_GAP, RingWriter
from engine.recording import frames
from engine.recording.frames import HEADER, MAX_FRAME_BYTES, encode_frame, pack_payload_fast

_monotonic = time.monotonic


def _header(length: int, crc: int) -> bytes:
    """frames.HEADER.pack(length, crc), as `_fold_now` and `_ring_now` make it in line (see there)."""
    return (length << 32 | crc).to_bytes(8, "big")


def _fast_encoder() -> tuple[Any, int] | None:
    """ormsgpack's (packb, options), as frames.pack_payload_fast uses them, or None without it."""
    fast = frames._fast
    if fast is None:
        fast = frames._load_fast()
    return fast if isinstance(fast, tuple) else None


def _in_step(c: Client, head: int) -> bool:
    """Whether the agent may write `c`'s next frames straight into its ring: it reads the quiet elided
    stream, is at the head, and nothing is owed to it or in progress (a buffer, a fetch, a snapshot, a
    skip, a `dropped` notice, a close). One predicate for the short path (`_ring_turn`) and for the
    client the I/O thread names for publish()'s straight path (`_ring_candidate`), so that a new kind of
    client state cannot be checked by one and missed by the other."""
    return (
        c.quiet
        # A ring client's socket (its buffer, its fetches) carries nothing its ring's frames must follow
        # (range answers and traces say their positions): an inspector filling its history by range
        # keeps a fetch waiting for minutes, and its live turns are still the agent's to send.
        and (c.ring is not None or (not c.outbuf and not c.fetch))
        and c.snap_src is None
        and c.skip_hold is None
        and not c.dropped_pending
        and c.closing_deadline is None
        and c.cursor == head
    )


class AgentSend(FoldSend):
    def _init_agent_send(self) -> None:
        self._held = False
        self._held_at = 0.0
        self.agent_sends = 0  # flushes the agent's thread completed itself (diagnostics, tests, benchmarks)
        self.agent_fallbacks = 0  # flushes that woke the I/O thread instead
        self.agent_writes = 0  # send() calls those flushes made (a quiet client's empty batch is none)
        self.agent_deferred = 0  # flushes that left only elided kinds for a later one (see DEFER_EVENTS)
        self._window_at = 0.0  # when the current AGENT_WINDOW began
        self._window_sends = 0  # flushes sent on the agent's thread in it
        # False: a fold client's turns take the general send path (_send_now, _send_here, _ring_turn),
        # as before publish()'s straight path served them (`_fold_now`): bench_probe's A/B of the two.
        self.fold_straight = True
        # True: the straight paths' frame headers made by HEADER.pack, as before probe41 (not one int's
        # bytes), for bench_probe's A/B (--split-header).
        self.header_struct = False
        # A fold client's turn that closes within this many seconds of the last send waits for the next
        # (FOLD_COALESCE; 0: every turn sent at its close, as before, for bench_probe's A/B).
        self.fold_coalesce = FOLD_COALESCE
        # A held event within this many seconds of a fold ring's newest held mark, with no frame since,
        # is not marked again (ring.MARK_GAP; 0: every held event marked, as before, for bench_probe's A/B).
        self.mark_gap = MARK_GAP
        # Closes publish() held back for a fold client: coalesced so, or waiting for the next request
        # while the model is slow (see "Before a long wait"). Diagnostics, tests, benchmarks.
        self.fold_closes_held = 0
        # Turns published closer together than this many seconds go to the I/O thread's lingering burst
        # (see "Lingering"; 0: the agent's thread sends them, as before, for bench_probe's A/B).
        self.quiet_linger = QUIET_LINGER
        self._linger_turn = False  # the open turn began within quiet_linger of the last one
        self._turn_at = 0.0  # the agent's clock at the open turn's first event (while quiet_linger is set)
        self._fold_sent_at = 0.0  # the agent's clock at `_fold_now`'s last send
        # The fast encoder's (packb, options) for `_fold_now`, loaded when a fold client is first named
        # for it (an agent nobody attaches to on the fold stream never imports it for the probe).
        self._fold_pack: tuple[Any, int] | None = None
        # For a fold client (see "Before a long wait"): the journal's time of the open turn's request;
        # the agent's clock at the last reply (0.0: none since the tools ran); whether the model's last
        # call, and the tools' last run, were long (what `_fold_defer` was chosen by).
        self._request_time: Any = None
        self._reply_at = 0.0
        self._slow_model = False
        self._slow_tools = False

    def hold(self) -> None:
        """A public call that may publish has begun on the agent's thread: its publishes write no
        wake-up byte (for HOLD_MAX); `flush()` at its end sends them. Never blocks, never raises."""
        self._held_at = _monotonic()
        self._held = True

    def flush(self) -> None:
        """The call `hold()` announced has ended: send what it published, on this thread when that is
        cheap and safe, else wake the I/O thread to. O(its events), never blocks, never raises."""
        self._held = False
        if not self._pending or self._wake_pending:
            return  # nothing published, or the I/O thread is awake and sends it
        if self._nquiet == self._nclients and not self._loud and len(self._pending) <= DEFER_EVENTS:
            self.agent_deferred += 1
            return
        self._send_now()

    def _send_now(self) -> None:
        """Hand on everything waiting: sent on this thread when that is cheap and safe, else by the I/O
        thread it wakes. flush()'s end; also publish()'s for an event worth sending published outside
        a bracketed call while every client is quiet (see ProbeServer.publish). Never raises."""
        # Everything waiting now is handed on below (sent here, or by the I/O thread it wakes).
        self._loud = False
        try:
            if self._send_here():
                self.agent_sends += 1
                return
        except Exception:
            self.publish_errors += 1
        self.agent_fallbacks += 1
        if not self._wake_pending:
            self._published_at = _monotonic()  # (the burst the I/O thread then coalesces: see loop)
            self._wake_pending = True
            self._wake()

    # Set by ProbeServer.
    publish_errors: int

    def _wake(self) -> None:  # ProbeServer's: one wake-up byte to the I/O thread
        raise NotImplementedError

    def _ring_turn(self, c: Client) -> bool:
        """The common case on its own, short path: the one client reads the quiet elided stream from a
        ring (see ring: the inspector following a paced agent), in step with the head, nothing else
        owed to it. Takes the waiting events and writes the batch of those not elided (the
        newest turn whole, older ones summarized) into the client's ring: what `_fill` then
        `_fill_elided` do, without their checks for every other case. After a model call each line
        here runs cold (a few us each on a small VM), so the fewer the better. False, with the client
        untouched, to leave it to `_fill` (the events are then in the event ring: `_store`)."""
        ring = c.ring
        if (
            ring is None
            or not _in_step(c, self._head)
            or self.redact
            or self._overflow != self._overflow_seen
        ):
            return False
        n = len(self._pending)
        if not n or n > AGENT_EVENTS:
            return False
        head = self._head
        evs = self._take_pending(n)  # (the one client: see _take_pending)
        jpos = c.jpos
        if c.fold:  # every event, a turn as its marker, in one batch (see elide.fold_out)
            out = fold_out([ev[0] if type(ev) is tuple else ev for ev in evs])
            payload = None
            if out is not None:
                payload = pack_payload_fast(
                    {"k": "batch", "events": out, "at": list(range(jpos, jpos + n)), "end": jpos + n}
                )
            if payload is None or len(payload) > MAX_FRAME_BYTES:
                self._store(head, evs)
                return False  # not one frame: _fill_fold's fallbacks (from the ring)
            ring.write_frame(_header(len(payload), 0 if c.ring_unchecked else zlib.crc32(payload)), payload)
            c.sent_events += n
            c.cursor = head + n
            c.jpos = jpos + n
            return True
        idx = kept(evs)
        if idx is None:  # a recording agent's (event, frame) pairs
            if self._ring_framed(c, ring, evs, head, n):
                return True
            self._store(head, evs)  # for the fill after all
            return False
        if idx:
            out = [evs[i] for i in idx]
            owed = []
            if len(out) > 1:  # (a paced turn's is the turn alone)
                turns = [j for j, ev in enumerate(out) if ev.get("k") == "turn"]
                for j in turns[:-1]:  # every turn but the newest as its summary (see lean)
                    summary = summary_event(out[j])
                    if summary is not out[j]:
                        owed.append(out[j]["turn"])
                        out[j] = summary
            payload = pack_payload_fast(
                {"k": "batch", "events": out, "at": [jpos + i for i in idx], "end": jpos + n}
            )
            if payload is None or len(payload) > MAX_FRAME_BYTES:
                self._store(head, evs)
                return False  # not one frame: _fill_elided's fallbacks (from the ring)
            crc = 0 if c.ring_unchecked else zlib.crc32(payload)  # (see ring: "Checksums")
            ring.write_frame(_header(len(payload), crc), payload)
            c.sent_events += len(out)
            if owed:
                c.owed.update(owed)
        c.cursor = head + n
        c.jpos = jpos + n
        return True

    def _ring_framed(self, c: Client, ring: RingWriter, evs: list[Any], head: int, n: int) -> bool:
        """`_ring_turn` for a recording agent's events (each with the frame the recorder encoded): the
        one not elided (a paced turn's `turn`) goes as its own frame, announced by a batch that says its
        position (see splice), as `_fill_framed` sends it to a client that takes frames; nothing is
        encoded but that small batch. Anything else (several kept events, a plain one): False."""
        idx = kept([ev[0] if type(ev) is tuple else ev for ev in evs])
        if idx is None or len(idx) > 1 or not c.frames:
            return False
        jpos = c.jpos
        if idx:
            ev = evs[idx[0]]
            if type(ev) is not tuple:
                return False
            announce = encode_frame(
                {"k": "batch", "events": [], "at": [jpos + idx[0]], "end": jpos + n, "frames": 1}
            )
            ring.write_frame(announce, ev[1])
            c.sent_events += 1
        c.cursor = head + n
        c.jpos = jpos + n
        return True

    def _ring_candidate(self) -> Client | None:
        """The one client publish() may serve by `_ring_now` while the state read here holds: the only
        one attached, reading the quiet elided stream from a ring, in step with the head, nothing owed
        to it or in progress. Read under the pass lock (by the I/O thread before it sleeps with nothing
        due, and by `_send_here` after a send): every change to that state is made under it."""
        # (Not `_more`: what this thread has left to send a ring client in step is for its socket.)
        if self._nclients != 1 or self.redact or self._stopping or self._due is not None:
            return None
        for c in self._clients.values():
            if c.follows:
                continue  # (reads the recording: see handshake, "Following the recording")
            # (A fold client too: its turn, every event waiting with the one published, goes by _fold_now.)
            if c.ring is None or (c.fold and not self.fold_straight):
                return None
            if c.fold and self._fold_pack is None:
                self._fold_pack = _fast_encoder()  # (None without ormsgpack: the general path, as ever)
            return c if _in_step(c, self._head) else None
        return None

    def _ring_now(self, event: Any, frame: bytes | None) -> bool:
        """publish()'s straight path for `event` (not elided, outside a bracketed call, every client
        quiet) when `_ring_one` names the client: the events waiting before it are taken, and if none of
        them is to be sent (a paced turn's: stand-ins and elided kinds) its batch, or for a recording
        agent its frame announced by a small batch (see `_ring_framed`), goes into the client's ring.
        What `_send_now` then `_ring_turn` do, in one function with no check the I/O thread settled
        already: measured on a paced turn, those calls and checks cost the agent's thread ~30 us of the
        ~90 (cold, after the model call). False, with nothing taken or changed, to leave it to them."""
        c = self._ring_one
        lock = self._pass_lock
        if c is None or not lock.acquire(blocking=False):
            return False
        try:
            pending = self._pending
            n = len(pending)
            head = self._head
            ring = c.ring
            if (
                self._ring_one is not c
                or ring is None
                or c.cursor != head
                or self._stopping
                or self._overflow != self._overflow_seen
                or not 0 < n <= AGENT_EVENTS
            ):
                return False
            if c.fold or self._window_full():
                return False  # (a fold client's is _fold_now, which publish() calls for it)
            jpos = c.jpos
            if frame is None:
                payload = pack_payload_fast(
                    {"k": "batch", "events": [event], "at": [jpos + n - 1], "end": jpos + n}
                )
                if payload is None or len(payload) > MAX_FRAME_BYTES:
                    return False
                # A client that does not check its ring's checksums is not given one: on a paced turn
                # the crc32 of the ~3 KB batch, cold, cost this thread ~10 us (see ring: "Checksums").
                n_crc = len(payload) << 32 | (0 if c.ring_unchecked else zlib.crc32(payload))
                header = (
                    HEADER.pack(n_crc >> 32, n_crc & _U32) if self.header_struct else n_crc.to_bytes(8, "big")
                )  # (as _fold_now's: see there)
            elif c.frames:
                payload = frame
                header = encode_frame(
                    {"k": "batch", "events": [], "at": [jpos + n - 1], "end": jpos + n, "frames": 1}
                )
            else:
                return False
            evs = self._take_pending(n)
            last = evs[-1]
            # A paced turn's waiting events are all the one shared stand-in (see elide): one C-level count
            # says none is to be sent, where kept() built four lists over them (~7 us of a cold turn's
            # ~14 here, measured). Anything else (a snapshot window's own events) is looked at by kind.
            if (last is not event and (type(last) is not tuple or last[0] is not event)) or (
                evs.count(ELIDED_STAND_IN) != n - 1 and kept(evs[:-1]) != []
            ):
                self._store(head, evs)  # not a paced turn's shape (another event to send, say): the fill's
                return False
            self._window_sends += 1
            ring.write_frame(header, payload)
            c.sent_events += 1
            c.cursor = head + n
            c.jpos = jpos + n
            self.agent_sends += 1
            return True
        finally:
            lock.release()

    def _window_full(self) -> bool:
        """Whether this AGENT_WINDOW's sends on the agent's thread are used up (a new window starts
        empty). When they are, turns come back to back and the I/O thread's bursts send them for less.
        The caller counts its send in `_window_sends`."""
        now = _monotonic()
        if now - self._window_at >= AGENT_WINDOW:
            self._window_at = now
            self._window_sends = 0
            return False
        return self._window_sends >= AGENT_WINDOW_SENDS

    def _send_here(self) -> bool:
        """Fill and send on this thread; True if nothing is left for the I/O thread."""
        if self._stopping or self._due is not None:
            return False
        if self._window_full():
            return False
        self._window_sends += 1
        lock = self._pass_lock
        if not lock.acquire(blocking=False):
            return False  # the I/O thread is in a pass (it takes the events with the rest)
        try:
            # Again under the lock: the I/O thread may have changed them before it blocked.
            if self._stopping or self._due is not None or self._wake_pending:
                return False
            self._ring_one = None  # (what follows may change what it needs; set again after)
            # The one ring client in step, even while the I/O thread has more to send it on its socket
            # (`_more`: a history fill, between the rests of its CPU budget; see _in_step).
            if self._nclients == 1:
                for one in self._clients.values():
                    if one.ring is not None and self._ring_turn(one):
                        self._ring_one = self._ring_candidate()
                        return True
            if self._more:
                return False
            clients = [c for c in self._clients.values() if not c.follows]  # (followers: nothing to send)
            if not 0 < len(clients) <= AGENT_CLIENTS:
                return False
            for c in clients:
                if (
                    not c.lean
                    or c.outbuf
                    or c.want_write
                    or c.snap_src is not None
                    or c.fetch
                    or c.closing_deadline is not None
                ):
                    return False
            self._absorb()
            head = self._head
            if any(head - c.cursor > AGENT_EVENTS for c in clients):
                return False
            left = False
            self._enc_cache.clear()
            try:
                for c in clients:
                    self._fill(c)
                    left = left or c.cursor < head  # the fill stopped at its buffer's bound
            finally:
                self._enc_cache.clear()
            for c in clients:
                if not c.outbuf:
                    continue
                self.agent_writes += 1
                try:
                    n = c.sock.send(c.outbuf)
                except (BlockingIOError, InterruptedError):
                    n = 0
                except OSError:
                    return False  # gone: the I/O thread's next send drops it (only it touches the selector)
                if n:
                    del c.outbuf[:n]
                left = left or bool(c.outbuf)
            if not left:
                self._ring_one = self._ring_candidate()
            return not left
        finally:
            lock.release()
