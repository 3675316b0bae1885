"""A fold client's turn sent by the agent's own thread (publish()'s straight path, `_fold_now`), and what
publish() holds back for fold clients before a long wait (`_fold_wants`). A mixin of AgentSend (see
engine.probe.agent_send for the agent's thread sending, and agent_limits for the bounds both share).

A fold client (see elide.fold_out) is named too: its turn waits whole in the queue until the turn's
marker (every kind of it but the marker is left waiting, see server.publish), and the marker's publish
writes every event waiting, as they are, in one batch into its ring (`_fold_now`). Through `_send_now`,
`_send_here` and `_ring_turn` that send cost the agent's thread ~60 us a paced turn, cold after the
model call, ~20 us of it their calls and checks (bench_probe --twin foldpath measures the two paths).

Before a long wait: the fold client's turn waits whole for its close, so what the agent journals before
its model call (the tool results, the request) is held through the call, and an inspector that has
been quiet for its idle (1 s) asks for it: its I/O thread woke to answer once a turn (~360 us of its CPU)
whenever the model took longer than that, as a real model mostly does. So at each outcome the agent's
thread notes how long the model call took (the request's and the outcome's journal times, noted as
publish() holds them back or sends the request): while that is at least LONG_WAIT, a request
is not left waiting and goes out at once with what waits before it, as a close does. A long tool run holds the model's reply (its `msg`, the last event
assistant() journals) likewise, and is learned likewise (on the agent's clock, from the reply to the
next event, the tools' first result): while the tools run that long, the reply goes at
once. While the model is slow and the
tools quick, the close itself waits for the next request, which comes within LONG_WAIT, and goes with
it: one send a turn still, on the agent's thread, in place of a wake-up of the I/O thread (the turn
is shown when the next request is made). Slow tools make it two or three (the reply's, the request's
if the model is slow too, the close's), each in place of a wake-up. An agent whose model and tools
answer within LONG_WAIT sends at the close as before. The same events in the same order; a guess
that fails (a quick model after slow ones, a slow tool after quick ones) leaves events held back
that the inspector asks for after its idle, as before.

Turns closer together than FOLD_COALESCE: the close's send, one batch frame a turn, was ~40 us of the
~60 us a fold inspector added to a paced 1.1 ms turn, nearly all of it fixed per send (ormsgpack's
first call since the last turn, the ring's write, the path's calls and checks, all cold), and a batch
of three turns encodes for little more than one. So a close that comes within FOLD_COALESCE of the last
send here (`_fold_sent_at`) is held back by publish() like the rest of the turn, marked held in the
ring, and goes with the next close past it, or the next request or reply sent at once; an agent that
pauses after it has the inspector ask for it after its idle. The inspector shows such a turn up to
FOLD_COALESCE (or its idle) late; an agent whose model takes longer than that sends every turn as before.

Where the fold send stands against its floor (probe42, the 2-core EPYC host; bench_probe, load 2-6):
about at the floor of a send from Python, and what it costs is the first touch of a working set.
`--ship-floor 0.5`: the least a paced turn can pay to ship its ~2.9 KB trace from Python (a flag test,
the encode, crc32 and header, the copy into a mapping, in one function) is 39.2 us cold, 4.4% of an
882 us turn (the encode alone 15.3 us, 1.7%); `_fold_now` (no crc32 for the inspector's ring, a ~1.8
KB batch) is 37.2 us a call, 15.0 of it ormsgpack (`--publish-split 0.5 --split-reader fold
--untraced`: the probe's part of the agent's thread 56.3 us a turn, 7.1% of a 791 us untraced turn).
A turn's batch encoded alone after 0.5 s of sleep: ormsgpack 35.3 us cold against 3.1 hot (marshal
42.0 / 5.4, pickle 43.5 / 5.4, json 108 / 21; an empty call 5.0 / 1.1). So encoding each held event
as it is published, while its data is in cache, costs more: the encoder's first call of a turn is as
cold, and there are six (`--twin`, A the close encoding the batch, B each held event encoded at
publish and its bytes spliced in: B +24.1 us a turn [95% +19.2, +33.5]). And moving work from one call
to another moves the cold touch with it: with no held marks the held publishes fell 14.0 -> 8.4 us a
turn and the close rose 42.3 -> 45.9 (all 56.3 -> 54.3). No resolved change in `--twin` at 0.2 s pace
either from MARK_GAP 0.45 (a mark once a send, not once a turn: -0.5 us [-5.9, +6.0]) or from
FOLD_COALESCE 0.9 (165 -> 123 sends: -1.4 us [-10.4, +4.0]). The hand-off thread on this host: the
agent's thread 49.2 -> 31.9 us a turn (`--flush-ab 0.5 --untraced --flush-modes
agent-fold,agent-fold-sender`), its own thread +42.5, the process +14.7 us a turn [+9.1, +23.4] against
this path (`--twin foldsender`). So issue 15.4's 1% of the agent's thread is under what one send on
that thread costs, and its process 1.02 under what one send on another thread costs with its wake-up:
either takes fewer sends than one a turn (a longer coalescing: a later inspector) or less Python (and
fewer C paths touched cold) between the event and the ring than this path has.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from engine.probe.agent_limits import _U32, AGENT_EVENTS, AGENT_WINDOW, AGENT_WINDOW_SENDS
from engine.probe.client_state import Client
from engine.probe.elide import ELIDED_KINDS, FOLD_DEFER_KINDS
from engine.probe.loop import MAX_LATENCY, IOLoop
from engine.recording.frames import HEADER, MAX_FRAME_BYTES

# A model call at least this long (the time between a turn's request and its outcome, as the journal
# stamps them) makes the next turn's request go to a fold client at once, a tool run (from a reply to the
# next event) the next reply (see "Before a long wait"): the inspector asks for events held back once
# the agent has been quiet for its idle (1 s by default).
LONG_WAIT = 0.5
# A fold client's turn that closes less than this long after the agent's thread last sent it a batch
# (`_fold_now`) waits, held back, for the next turn's close, so an agent whose turns come faster than
# this sends fewer than one batch a turn: that send, cold after the model call, was ~40 us of the ~60 us
# an attached fold inspector added to a paced 1.1 ms turn (fold34), ~17 us of it ormsgpack, ~5 the
# ring's write and the rest its calls and checks, nearly all fixed per send. The bound on what the
# inspector waits for a turn: this, or while the agent pauses after it, the inspector's idle (it asks
# for what is held: see ring, "Held events"). The I/O thread lets a burst wait as long (loop.MAX_LATENCY).
FOLD_COALESCE = MAX_LATENCY
# The kinds whose journal time publish() measures the model call by when it holds one back for a fold
# client (see "Before a long wait").
OUTCOME_KINDS = frozenset(("usage", "error"))
# What publish() holds back for fold clients, by whether the request and the reply go at once. While
# only the request does (the tools are quick), so does the turn's close (its marker, or its built turn):
# the next request comes within LONG_WAIT and takes it along, one send a turn.
_CLOSE = frozenset(("turn_deferred", "turn"))
_FOLD_DEFER = {
    (False, False): FOLD_DEFER_KINDS,
    (True, False): (FOLD_DEFER_KINDS - {"request"}) | _CLOSE,
    (False, True): FOLD_DEFER_KINDS - {"msg"},
    (True, True): FOLD_DEFER_KINDS - {"request", "msg"},
}

_monotonic = time.monotonic


class FoldSend(IOLoop):
    """AgentSend's straight path for a fold client (its state is AgentSend's: see _init_agent_send)."""

    _window_at: float
    _window_sends: int
    _fold_pack: tuple[Any, int] | None
    _fold_sent_at: float
    agent_sends: int
    header_struct: bool
    _request_time: Any
    _slow_model: bool
    _slow_tools: bool

    def _fold_now(self, c: Client) -> bool:
        """publish()'s straight path for a fold client (see elide.fold_out) that `_ring_one` names: every
        event waiting (the turn's, left waiting by publish) and the one just published go, as they are,
        in one batch into its ring. False, with nothing taken or changed, to leave them to `_send_now`.

        What `_ring_now` does for an elided reader, in one function with no Python call (the ring's write in
        line but for a frame that goes round the ring's end): this runs once a turn, at its close, right after
        the model call, when nothing of the probe is in cache, and on this VM each call on that path cost the
        agent's thread a few us (its frame, its code and the attributes it reads, cold). Measured on a paced
        turn with the fold reader attached (in-process A/B, the turn's eight publishes, 150 turns each side,
        load 4-5): ~57 us a turn through `_ring_now`, `_window_full`, `_take_pending`, `_types` and
        `pack_payload_fast`, ~49 us here (-8.1 and -8.8 us in two runs, 95% -9.8 to -7.2). ~4 us of that is the
        lock taken with a positional argument and the queue popped by a plain loop: a keyword argument to a C
        function, and map(call, repeat(...)), each run C code nothing else on this thread ran since the last
        turn. Its checks are `_ring_now`'s and `_window_full`'s."""
        fast = self._fold_pack
        lock = self._pass_lock
        if fast is None or not lock.acquire(False):  # (without waiting)
            return False
        try:
            pending = self._pending
            head = self._head
            ring = c.ring
            now = _monotonic()
            if now - self._window_at >= AGENT_WINDOW:  # (_window_full's new window)
                self._window_at = now
                self._window_sends = 0
            if (
                self._ring_one is not c
                or ring is None
                or c.cursor != head
                or self._stopping
                or self._overflow != self._overflow_seen
                or self._window_sends >= AGENT_WINDOW_SENDS
            ):
                return False
            # A copy, taken from the queue only once the batch is made: anything that fails before leaves
            # the queue as it was for the general path. Only this thread appends to it and only the pass
            # lock's holder takes from it, so its first n are these.
            evs = list(pending)
            n = len(evs)
            if not 0 < n <= AGENT_EVENTS:
                return False
            plain = evs
            # Every event a dict, or a recording agent's (event, frame) pairs stripped to theirs; by a
            # loop of the interpreter's own steps, which the turn has just run, not set.issuperset over a
            # map of type(), C code nothing else on this thread runs (cold after the model call: -1.5
            # and -3.2 us a turn in two in-process A/Bs, 12 of 16 rounds lower; see the commit).
            for ev in evs:
                if type(ev) is not dict:
                    plain = [ev[0] if type(ev) is tuple else ev for ev in evs]
                    for one in plain:
                        if type(one) is not dict:
                            return False
                    break
            jpos = c.jpos
            end = jpos + n
            packb, opts = fast
            try:
                payload = packb(
                    {"k": "batch", "events": plain, "at": list(range(jpos, end)), "end": end}, option=opts
                )
            except Exception:
                return False  # (msgpack decides in the general path: see frames.pack_payload_fast)
            if len(payload) > MAX_FRAME_BYTES:
                return False  # not one frame: _fill_fold's fallbacks
            popleft = pending.popleft
            for _ in range(n):  # (what _take_pending does: no ring slot written)
                popleft()
            self._head = head + n
            self._window_sends += 1
            self._fold_sent_at = now
            # The frame's header (frames.HEADER, ">II": the length, then the crc32) as one int's eight
            # big-endian bytes: the same bytes as HEADER.pack, without the struct module, whose code
            # nothing else on this thread runs (cold after the model call, HEADER.pack cost ~6 us a send:
            # bench_probe --publish-split 0.6 --split-reader fold --untraced --split-header).
            n_crc = len(payload) << 32 | (0 if c.ring_unchecked else zlib.crc32(payload))
            header = HEADER.pack(n_crc >> 32, n_crc & _U32) if self.header_struct else n_crc.to_bytes(8, "big")
            # RingWriter.write_frame's common case (the frame fits before the ring's end, the total stored
            # through its u64 view) in line, as publish() makes the held marks' stores: its call, cold after
            # the model call, cost this path ~3-7 us a turn (in-process A/B, paced turns: see the commit).
            size = len(payload) + 8
            room = ring._room
            q = ring.written_q
            if q is not None and size < room:
                mm = ring._mm
                mm.write(header)
                mm.write(payload)
                ring._room = room - size
                ring._written += size
                q[0] = ring._written  # (after the frame's bytes: a reader may read up to it)
            else:
                ring.write_frame(header, payload)
            c.sent_events += n
            c.cursor = head + n
            c.jpos = end
            self.agent_sends += 1
            last = plain[-1]
            if last.get("k") == "request":  # (sent at once: see "Before a long wait")
                self._request_time = last.get("time")
            return True
        finally:
            lock.release()

    def _fold_wants(self, want: tuple[bool, bool]) -> None:
        """Hold back for fold clients what `_FOLD_DEFER[want]` says (whether the request, and the
        reply, go at once). publish() calls it when a held outcome (usage or error) says the model took
        longer, or shorter, than LONG_WAIT since the request (`_request_time`, noted as it went), or the
        first event held after a reply says the tools did (from `_reply_at`), than the last time."""
        kinds = _FOLD_DEFER[want]
        # Under the pass lock, as the I/O thread sets them (queues._fold_changed), taken without waiting:
        # if a pass holds it, the next outcome tries again.
        if kinds is self._fold_defer or not self._pass_lock.acquire(False):
            return
        try:
            self._fold_defer = kinds
            self._slow_model, self._slow_tools = want
            if self._defer_kinds is not ELIDED_KINDS:  # (every client a fold client)
                self._defer_kinds = kinds
        finally:
            self._pass_lock.release()
