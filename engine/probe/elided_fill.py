"""The elided stream's live fill (see elide): what a client that reads the journal on demand is sent as
the agent goes, none of the elided kinds, each event with its journal position, in `batch` frames
(`_fill_elided`); a recording agent's own frames spliced in or announced (`_fill_framed`, see splice);
and for a fold client every event but the turns' traces it rebuilds itself (`_fill_fold`).

A mixin of the ProbeServer's queues (queues.ClientQueues), run by the I/O thread's fill (and through
a ring client's fill, client_rings._fill_ring); the agent's publish never calls it.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from engine.probe.client_state import BATCH_EVENTS, HIGH_WATER
from engine.probe.elide import (
    ELIDED_KINDS,
    fold_out,
    kept,
)
from engine.probe.lean import summary_event
from engine.probe.redact import redact_event
from engine.probe.splice import batch_payload, payload_of
from engine.recording.frames import HEADER, MAX_FRAME_BYTES, encode_frame

if TYPE_CHECKING:
    from engine.probe.client_state import Client


# Ring events an elided client's fill looks at, at most (see _fill_elided).
ELIDE_SCAN = 2048


class ElidedFill:
    """ClientQueues' fill of the elided and fold streams (the ring, the encoders and `_emit` are
    ClientQueues')."""

    redact: bool
    _ring: list[Any]
    _cap: int
    _head: int
    _nlean: int
    _enc_cache: dict[Any, Any]

    if TYPE_CHECKING:

        def _encode_event(self, ev: Any, redacted: bool = False) -> bytes | None: ...

        def _emit(self, c: Client, hdr: bytes, payload: bytes | bytearray, events: int) -> None: ...

        def _newest_turn(self, start: int, head: int) -> int: ...

    def _fill_elided(self, c: Client) -> None:
        """The live events for a client that reads the journal on demand (see elide): none of the
        elided kinds; the rest as on the lean stream (turns summarized but the newest of the pass), in
        `batch` frames that carry each event's journal position. A recording agent's events (those it
        handed publish() with their frames) go whole, as their frames (see _fill_framed and splice)."""
        head = self._head
        seq = c.cursor
        if seq >= head or len(c.outbuf) >= HIGH_WATER:
            return
        cap = self._cap
        ring = self._ring
        # Elided clients at the same place get the same frames (positions are the journal's, the same
        # for every client): encoded once per pass.
        cache = self._enc_cache if self._nlean > 1 else None
        key = ("elided", seq, min(head, seq + ELIDE_SCAN), c.jpos, c.frames, c.quiet, c.fold)
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                data, count, jend, turns, cursor = hit
                self._emit(c, b"", data, count)
                c.cursor, c.jpos = cursor, jend
                c.owed.update(turns)
                return
        # At most ELIDE_SCAN events a fill (the pump fills again once the buffer drains), so a backlog
        # of a whole ring does not put its ~1 in 6 sent events in the buffer at once.
        head = min(head, seq + ELIDE_SCAN)
        key = ("elided", seq, head, c.jpos, c.frames, c.quiet, c.fold)
        lo = seq % cap
        n = head - seq
        evs = ring[lo : lo + n] if lo + n <= cap else ring[lo:] + ring[: lo + n - cap]
        jpos = c.jpos
        out: list[Any] = []
        at: list[int] = []
        owed: list[int] = []  # turns sent as summaries
        if c.fold:
            self._fill_fold(c, evs, head, cache, key)
            return
        idx = None if self.redact else kept(evs)
        if idx is None and not self.redact:
            # A recording agent's events come as (event, frame) pairs: its turns go whole (see splice).
            plain = [ev[0] if type(ev) is tuple else ev for ev in evs]
            idx = kept(plain)
            if idx is not None:
                self._fill_framed(c, evs, idx, seq, head, cache, key)
                return
        if idx is not None:
            # Comprehensions, not one loop doing it all: this runs for every event sent, and only the turns
            # need more than their place (every one but the newest sent goes as its summary).
            out = [evs[i] for i in idx]
            at = [jpos + i for i in idx]
            turns = [j for j, ev in enumerate(out) if ev.get("k") == "turn"]
            for j in turns[:-1]:
                ev = out[j]
                summary = summary_event(ev)
                if summary is not ev:
                    owed.append(ev["turn"])
                    out[j] = summary
            jpos += n
        else:  # redacting (a redacting agent queues no frames), or not every slot a plain event: a look at each
            newest = self._newest_turn(seq, head)
            for i, ev in enumerate(evs):
                if type(ev) is tuple:
                    ev = ev[0]
                p = jpos
                jpos += 1
                if type(ev) is not dict:
                    continue  # not a journal event (nothing the engine publishes)
                k = ev.get("k")
                if k in ELIDED_KINDS:
                    continue
                if self.redact:
                    ev = redact_event(ev)
                if seq + i < newest and k == "turn":
                    summary = summary_event(ev)
                    if summary is not ev:
                        owed.append(ev["turn"])
                        ev = summary
                out.append(ev)
                at.append(p)
        c.cursor, c.jpos = head, jpos
        c.owed.update(owed)
        # Every batch says where the journal has reached ("end"), so a client knows what it has not
        # fetched even when all of a pass's events were left out (one empty batch says it then), but
        # for a client that asked not to be told that alone (`quiet`): on an agent paced by its model,
        # three of a turn's four sends were such batches, and each send costs the agent (see elide).
        data, lost = self._batches(out, at, jpos, empty_too=not c.quiet)
        if lost:
            c.lose(lost)  # a client told `dropped` re-syncs: its positions would no longer hold
        if cache is not None:
            cache[key] = (data, len(out) - lost, jpos, owed, head)
        self._emit(c, b"", data, len(out) - lost)

    def _fill_fold(
        self, c: Client, evs: list[Any], head: int, cache: dict[Any, Any] | None, key: tuple[Any, ...]
    ) -> None:
        """_fill_elided for a fold client (see elide.fold_out): ring slots c.cursor..head, every event
        (a recording agent's without its frame, redacted when the server redacts), in `batch` frames
        with their journal positions."""
        plain = [ev[0] if type(ev) is tuple else ev for ev in evs]
        if self.redact:
            plain = [redact_event(ev) if type(ev) is dict else ev for ev in plain]
        out = fold_out(plain)
        jpos = c.jpos
        at: list[int] = []
        if out is None:  # not every slot a journal event (nothing the engine publishes): those left out
            pairs = [(jpos + i, ev) for i, ev in enumerate(plain) if type(ev) is dict]
            out = fold_out([ev for _, ev in pairs]) or []
            at = [p for p, _ in pairs]
        else:
            at = list(range(jpos, jpos + len(out)))
        jpos += len(evs)
        c.cursor, c.jpos = head, jpos
        data, lost = self._batches(out, at, jpos, empty_too=False)
        if lost:
            c.lose(lost)  # a client told `dropped` re-syncs: its positions would no longer hold
        if cache is not None:
            cache[key] = (data, len(out) - lost, jpos, [], head)
        self._emit(c, b"", data, len(out) - lost)

    def _batches(self, out: list[Any], at: list[int], jpos: int, empty_too: bool) -> tuple[bytes, int]:
        """`out` (events at journal positions `at`) as `batch` frames of BATCH_EVENTS, each saying where
        the journal has reached (`jpos`); one empty batch when there is nothing and `empty_too`. An
        event that cannot be encoded is left out (its batch sent an event at a time). Returns the
        frames and how many events were lost."""
        data = bytearray()
        lost = 0
        for i in range(0, max(len(out), 1) if empty_too else len(out), BATCH_EVENTS):
            evs, pos = out[i : i + BATCH_EVENTS], at[i : i + BATCH_EVENTS]
            frame = self._encode_event({"k": "batch", "events": evs, "at": pos, "end": jpos}, redacted=True)
            if frame is None:  # one of them cannot be encoded: each alone, and the one that cannot is lost
                for ev, p in zip(evs, pos, strict=True):
                    one = self._encode_event(
                        {"k": "batch", "events": [ev], "at": [p], "end": jpos}, redacted=True
                    )
                    if one is None:
                        lost += 1
                    else:
                        data += one
                continue
            data += frame
        return bytes(data), lost

    def _fill_framed(
        self,
        c: Client,
        evs: list[Any],
        idx: list[int],
        seq: int,
        head: int,
        cache: dict[Any, Any] | None,
        key: tuple[Any, ...],
    ) -> None:
        """The elided stream's events `evs[i] for i in idx` (ring slots seq..head, some of them (event,
        frame) pairs): an event with its frame goes whole, as that frame announced by a batch (a client
        that asked for `frames`) or spliced into a batch (see splice); one without is encoded into a
        batch, a turn then summarized unless it is the newest. Stops after the event that takes the
        output past HIGH_WATER (whole turns are ~6x their summaries), so a backlog does not fill the
        buffer at once; the pump fills again once it drains."""
        jpos = c.jpos
        raw = c.frames
        # Runs of events, in order: (whole frames or None, payloads, positions), a run either all of
        # frames sent as they are or all of batch payloads.
        runs: list[tuple[list[bytes] | None, list[bytes | memoryview], list[int]]] = []
        owed: list[int] = []
        newest: int | None = None
        size = 0
        stop = len(evs)
        lost = 0
        for i in idx:
            ev = evs[i]
            frame: bytes | None = None
            if type(ev) is tuple:
                frame = ev[1]
                part: bytes | memoryview = frame if raw else payload_of(frame)
            else:
                if ev.get("k") == "turn":
                    if newest is None:
                        newest = self._newest_turn(seq, head)
                    if seq + i < newest:
                        summary = summary_event(ev)
                        if summary is not ev:
                            owed.append(ev["turn"])
                            ev = summary
                whole = self._encode_event(ev)  # not redacting here (see _fill_elided)
                if whole is None:
                    lost += 1
                    continue
                part = payload_of(whole)
            as_frame = raw and frame is not None
            if not runs or (runs[-1][0] is not None) != as_frame or len(runs[-1][1]) >= BATCH_EVENTS:
                runs.append(([] if as_frame else None, [], []))
            frames, parts, at = runs[-1]
            if frames is not None and frame is not None:
                frames.append(frame)
            parts.append(part)
            at.append(jpos + i)
            size += len(part)
            if size >= HIGH_WATER:
                stop = i + 1
                break
        jpos += stop
        c.cursor, c.jpos = seq + stop, jpos
        c.owed.update(owed)
        out: list[bytes] = []  # frames, or header and payload pairs
        sent = 0
        for frames, parts, at in runs or ([] if c.quiet and not lost else [(None, [], [])]):
            if frames is not None:
                # The batch says where the next len(frames) frames go; they are the agent's own frames.
                out.append(
                    encode_frame({"k": "batch", "events": [], "at": at, "end": jpos, "frames": len(frames)})
                )
                out += frames
                sent += len(frames)
                continue
            payload = batch_payload(parts, at, jpos)
            if len(payload) > MAX_FRAME_BYTES:  # one event near the frame limit: each alone, or lost
                for part, p in zip(parts, at, strict=True):
                    one = batch_payload([part], [p], jpos)
                    if len(one) > MAX_FRAME_BYTES:
                        lost += 1
                    else:
                        out += (HEADER.pack(len(one), zlib.crc32(one)), one)
                        sent += 1
                continue
            out += (HEADER.pack(len(payload), zlib.crc32(payload)), payload)
            sent += len(parts)
        if lost:
            c.lose(lost)  # a client told `dropped` re-syncs: its positions would no longer hold
        if cache is not None:
            data = b"".join(out)
            cache[key] = (data, sent, jpos, owed, seq + stop)
            self._emit(c, b"", data, sent)
            return
        # Straight into the client's buffer: joining first copied ~2.6 KB a turn once more.
        self._emit(c, b"", out[0] if out else b"", sent)
        for piece in out[1:]:
            c.outbuf += piece
