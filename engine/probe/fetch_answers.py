"""Answers to what a client fetches: whole traces of turns the lean stream sent it only as summaries
(see lean), and, for a client of the elided stream, journal ranges as `journal` frames (see elide).
Both are answered in order, up to HIGH_WATER and within the I/O loop pass's CPU budget: a trace may be
read back from disk, a range is a history fill's work (minutes of it behind a long session).

A mixin of the ProbeServer's queues (queues.ClientQueues), run by the I/O thread's fill only: the
agent's publish never calls it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from engine.probe.client_state import HIGH_WATER
from engine.probe.elide import RANGE_FRAME_EVENTS, for_fold
from engine.probe.lean import LAST_TURN_SCAN, find_turn, is_turn, summary_event
from engine.probe.redact import redact_event
from engine.recording.event_log import Deferred
from engine.recording.frames import encode_frame

if TYPE_CHECKING:
    from engine.probe.client_state import Client

log = logging.getLogger("contextpipe.probe")

# A range answer looks at the pass's CPU clock (a system call) once every this many events it reads, a
# power of two (each read is ~20-40 us: from disk, unpickled, summarized; looking at every one cost ~5%).
RANGE_SPENT_EVERY = 4
# Events a trace request's bisect of the journal in memory looks ahead from a position for one that
# carries a turn number (see _recent_turn; a turn's events carry it every few).
TURN_PROBE = 64
_OMITTED = {"k": "omitted"}


def _turn_number(e: Any) -> int | None:
    """The turn number an event carries, as it is kept (a trace still a recipe is not built), or None."""
    if type(e) is dict:
        t = e.get("turn")
    elif isinstance(e, Deferred):
        m = e.marker()  # (a turn's is None once built: then its event is at hand)
        if m is None and e.kind != "turn":
            return None  # (not built for a lookup)
        t = (m if m is not None else e.resolve()).get("turn")
    else:
        return None
    return t if type(t) is int else None


def _recent_turn(src: Sequence[Any], turn: int) -> dict[str, Any] | None:
    """Turn `turn`'s event if it is among the journal's events held in memory, else None (it is on
    disk, or not in the journal). Reads the events as they are kept (EventLog.entry) and bisects them
    by the turn numbers they carry (they come in turn order): a fold client asks for the trace of turns
    whose ring slots hold only their `turn_deferred` markers, so the ring scan went through a thousand
    slots in vain and the journal's bisect read ~30 events back from disk, for each answer (~1-2 ms of
    the probe's CPU: while a history fill ran, more than the budget left the fill). Only the event
    found is built."""
    entry = getattr(src, "entry", None)
    in_memory = getattr(src, "in_memory", None)
    if entry is None or in_memory is None:
        return None
    n = len(src)
    lo, hi = max(0, n - in_memory()), n
    # The first position in [lo, hi) whose next turn-carrying event (within TURN_PROBE) is >= turn.
    while lo < hi:
        mid = (lo + hi) // 2
        t = None
        for k in range(mid, min(n, mid + TURN_PROBE)):
            e = entry(k)
            if e is None:
                return None  # a spill moved it to disk meanwhile: the journal's own lookup
            t = _turn_number(e)
            if t is not None:
                break
        if t is None or t >= turn:
            hi = mid
        else:
            lo = mid + 1
    for k in range(lo, min(n, lo + 4 * TURN_PROBE)):
        e = entry(k)
        if e is None:
            return None
        t = _turn_number(e)
        if t is not None and t > turn:
            return None
        if t == turn and (getattr(e, "kind", None) == "turn" or (type(e) is dict and e.get("k") == "turn")):
            return e.resolve() if isinstance(e, Deferred) else e
    return None


def _journal_run(src: Sequence[Any], lo: int, hi: int, fold: bool = False) -> Iterator[Any]:
    """src[lo:hi], one event at a time, read in runs where the journal can (EventLog.read_run: one
    pread for many events on disk), and _OMITTED in the place of one that cannot be read (the journal
    shrank or its file failed: an empty slot keeps the place). `fold`: for a fold client, the events
    held in memory as they are kept (see elide.for_fold): reading them built every turn's trace there; and
    a turn written to disk unbuilt as its marker (EventLog.read_run's `markers`), not rebuilt here."""
    read_run = getattr(src, "read_run", None)
    entry = getattr(src, "entry", None) if fold else None
    in_memory = getattr(src, "in_memory", None)
    i = lo
    while i < hi:
        try:
            if entry is not None and in_memory is not None:
                e = entry(i)
                if e is not None:
                    ev = for_fold(e)
                else:  # on disk: a run of them, up to where the journal's memory begins
                    stop = max(i + 1, min(hi, len(src) - in_memory()))
                    # (A turn the journal wrote to disk unbuilt as its marker too: the client rebuilds it.)
                    run = (
                        read_run(i, stop, markers=True)
                        if read_run is not None
                        else map(src.__getitem__, range(i, stop))
                    )
                    for ev in run:
                        i += 1
                        yield ev
                    continue
            elif read_run is None:
                ev = src[i]
            else:
                for ev in read_run(i, hi):
                    i += 1
                    yield ev
                return
        except Exception:
            ev = _OMITTED
        i += 1
        yield ev


class FetchAnswers:
    """ClientQueues' answers to fetches (`_spent`, `_in_debt`, `_encode_event`, `_emit`, `_append_run`
    and the attributes are ClientQueues'; `_journal` is Handshake's)."""

    redact: bool
    _more: bool
    _ring: list[Any]
    _cap: int
    _head: int

    if TYPE_CHECKING:

        def _spent(self) -> bool: ...

        def _in_debt(self) -> bool: ...

        def _encode_event(self, ev: Any, redacted: bool = False) -> bytes | None: ...

        def _emit(self, c: Client, hdr: bytes, payload: bytes | bytearray, events: int) -> None: ...

        def _append_run(self, c: Client, run: list[Any]) -> None: ...

    def _fill_fetch(self, c: Client) -> bool:
        """Answer the client's fetches (whole traces of turns it was sent summaries of), in one batch
        frame, up to HIGH_WATER and within the pass's CPU budget (each is a lookup, from the journal on
        disk for an old turn, and an encode). True once all are answered."""
        run: list[dict[str, Any]] = []
        size = len(c.outbuf)
        while c.fetch and size < HIGH_WATER:
            item = c.fetch[0]
            if type(item) is tuple and self._in_debt():
                # A journal range is a history fill's work (minutes of it): not in a pass that owes the
                # CPU budget (IOLoop._budget); the live stream and traces asked for still go.
                self._more = True
                break
            if type(item) is tuple:  # a journal range (elided clients): answered in order with the rest
                if run:
                    self._append_run(c, run)
                    run = []
                c.fetch.popleft()
                rest = self._fill_range(c, item[0], item[1])
                size = len(c.outbuf)
                if rest is not None:
                    c.fetch.appendleft(rest)
                    self._more = True
                    break
                if c.fetch and self._spent():
                    self._more = True
                    break
                continue
            turn = c.fetch.popleft()
            assert type(turn) is int
            c.owed.discard(turn)  # sent whole now
            ev = self._turn_event(turn)
            if ev is not None and self.redact:
                ev = redact_event(ev)
            trace = ev.get("trace") if ev is not None else None
            run.append({"k": "trace", "turn": turn, "trace": trace})
            size += 4096  # about a trace: HIGH_WATER bounds the buffer, not this exactly
            if c.fetch and self._spent():
                self._more = True
                break
        if run:
            self._append_run(c, run)
        return not c.fetch

    def _fill_range(self, c: Client, lo: int, hi: int) -> tuple[int, int] | None:
        """Journal events [lo, hi) as `journal` frames (see elide), up to HIGH_WATER and within the
        pass's CPU budget; what is left of the range, or None once it is answered."""
        try:
            src = self._journal()
            n = len(src)
        except Exception:
            log.exception("probe could not read its journal for a range fetch")
            src, n = [], 0
        hi = min(hi, n)
        if lo >= hi:  # past the end: an empty answer says where the end is
            self._emit(c, b"", encode_frame({"k": "journal", "at": lo, "events": [], "size": n}), 0)
            return None
        run = _journal_run(src, lo, hi, c.fold)
        while lo < hi:
            stop = min(hi, lo + RANGE_FRAME_EVENTS)
            evs = []
            i = lo
            while i < stop:
                ev = next(run)
                if type(ev) is dict:
                    if self.redact:
                        ev = redact_event(ev)
                    if ev.get("k") == "turn":
                        ev = summary_event(ev)
                evs.append(ev)
                i += 1
                if not i & (RANGE_SPENT_EVERY - 1) and self._spent():
                    # A frame also ends where the pass's budget does: each event may be read back from
                    # disk, or have its trace built, and a whole frame of those (an inspector fetching a
                    # long session's history after its first frame) held the GIL for milliseconds.
                    break
            stop = i
            self._emit(c, b"", self._range_frames(lo, evs, n), stop - lo)
            if lo <= c.jdone:
                c.jdone = max(c.jdone, stop)
            lo = stop
            if lo < hi and (len(c.outbuf) >= HIGH_WATER or self._spent()):
                return lo, hi
        return None

    def _range_frames(self, at: int, evs: list[Any], size: int) -> bytes:
        """`journal` frames for events at positions at.. (halved until each frame encodes within the
        frame limit; an event that cannot be encoded alone is sent as `omitted`)."""
        frame = self._encode_event({"k": "journal", "at": at, "events": evs, "size": size}, redacted=True)
        if frame is not None:
            return frame
        if len(evs) == 1:
            return encode_frame({"k": "journal", "at": at, "events": [_OMITTED], "size": size})
        half = len(evs) // 2
        return self._range_frames(at, evs[:half], size) + self._range_frames(at + half, evs[half:], size)

    def _turn_event(self, turn: int) -> dict[str, Any] | None:
        """Turn `turn`'s event: from the journal's newest events if it is one of them, from the ring if
        it is still there, else from the journal (a bisect, reading from disk for an old turn)."""
        try:
            ev = _recent_turn(self._journal(), turn)
        except Exception:
            log.exception("probe could not look up turn %s in the journal", turn)
            ev = None
        if ev is not None:
            return ev
        ring = self._ring
        cap = self._cap
        head = self._head
        # Recent turns are in the ring, one every few events: look back from the newest.
        for seq in range(head - 1, max(0, head - cap, head - LAST_TURN_SCAN * 4) - 1, -1):
            ev = ring[seq % cap]
            if type(ev) is tuple:
                ev = ev[0]
            if is_turn(ev):
                t = ev.get("turn")
                if t == turn:
                    return ev  # type: ignore[no-any-return]
                if type(t) is int and t < turn:
                    break
        try:
            return find_turn(self._journal(), turn)
        except Exception:
            log.exception("probe could not look up turn %s in the journal", turn)
            return None

    def _journal(self) -> Sequence[Any]:  # Handshake's: the agent's journal (the snapshot source)
        raise NotImplementedError
