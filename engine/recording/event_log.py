"""The journal's event list, with its older events on disk so a long session's memory stays bounded.

A session journals every input and decision, so its journal grows with the session: on a 10,000-turn
run the events (mostly turn traces) were two thirds of the engine's memory growth. Nothing in a live
session reads old events on its hot path (the recorder and the probe get each event as it is journaled;
a probe client attaching late, a replay or a test read the whole list once), so `EventLog` keeps the
newest `keep` events in memory and pickles older ones, a chunk at a time, to an anonymous temporary
file (unlinked at creation: nothing is left behind, even after a crash). What stays in memory for a
spilled event is its offset in the file and a checksum (12 bytes). A write the disk refuses keeps the
events in memory (see `_spill`): journaling never fails a turn.

It is a read-only Sequence with `append`: indexing, slicing, iterating and `==` with a list work as on
the plain list it replaces, and a spilled event reads back equal to what was journaled (pickle keeps
every type, key order and value; the file is private to this process, so nothing untrusted is ever
unpickled). Reads are positional (`os.pread`), so the probe's I/O thread can read by index while the
agent's thread appends and spills. The file is a `SpillFile` (engine/recording/spill_file.py), as the
history's is: all-or-nothing writes, and a forked child that journals on copies it first.

A `Deferred` (a turn's trace nobody read, engine/trace_lazy.py) is not built to be written: when the
log's owner gave it a `refold` (the Pipeline does) and the log starts with its session, its marker is
written instead, and a read of that position (indexing, iterating, `read_run`) hands back the event
rebuilt from the events before it (engine/recording/turn_fold.py; `read_run(..., markers=True)` hands
back the marker, for a reader that rebuilds it itself). The fold is kept where it stopped, so reading
forward folds each event once; it holds a replay pipeline's state while kept (the reader's cost). A
rebuilt turn is written back to the end of the file (24 bytes of index a turn), so the next reader of
it reads it as a spilled event, and folds nothing.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, overload

from engine.recording.spill_file import SpillFile, SpillReadError, checksum, same_items, warn

Event = dict[str, Any]


class Deferred:
    """An event journaled as a recipe (engine/trace_lazy.py: a turn's trace nobody has read yet): every
    read of the log (indexing, iterating, spilling it to disk) hands back `resolve()`, the event it
    stands for, built once; until then it costs what its recipe holds."""

    __slots__ = ()
    # The "k" of the event it stands for, if known without building it (the probe counts a journal's
    # turns for a client attaching without building every turn's trace: see spilled_census).
    kind: str | None = None

    def resolve(self) -> Event:
        raise NotImplementedError

    def marker(self) -> Event | None:
        """What a subscriber that does not want the event built is handed in its place (see
        Journal.append_deferred), or None for nothing."""
        return None

    def private(self) -> bool:
        """Whether the event holds what no other event of the journal says (an annotation set while no
        client was attached to journal it on its own): a reader that rebuilds it from the journal (the
        probe's fold clients, engine.probe.elide.for_fold) cannot, and is sent it built."""
        return False

    def built(self) -> bool:
        """Whether what it stands for is built already (reading it costs nothing more)."""
        return False


def _event(ev: Event | Deferred) -> Event:
    return ev.resolve() if isinstance(ev, Deferred) else ev


class Refold(Protocol):
    """What rebuilds the turns the log moved to disk as their markers (engine/recording/turn_fold.py):
    fed every event from the first, in order (markers as markers), it hands back (turn, its trace or
    None if it cannot be rebuilt) for each marker."""

    def feed(self, ev: Event) -> tuple[int, Event | None] | None: ...


# Events kept in memory. A turn journals about six events, so this is some 700 turns of a session, far
# more than anything looks back on (alert rules: ten turns; recent traces: 32), and a few MB of RAM.
KEEP_DEFAULT = 4096
# Events written per spill: the agent's thread pickles this many at once, so a spill costs a few ms
# once every SPILL_CHUNK events instead of a 4096-event pause.
SPILL_CHUNK = 256

# A range read (read_run) reads at most this many consecutive spilled events from the file at once, and
# about this many bytes: a few dozen turns' traces, a copy of some 100 us at most if the reader stops early.
READ_RUN_EVENTS = 64
READ_RUN_BYTES = 256 * 1024

LOGGER = "contextpipe.journal"


class EventLog(Sequence[Event]):
    def __init__(self, keep: int | None = KEEP_DEFAULT, chunk: int = SPILL_CHUNK) -> None:
        """`keep`: events held in memory (None: all of them, nothing is ever written to disk)."""
        if keep is not None and keep < 0:
            raise ValueError(f"keep must be >= 0 or None, got {keep}")
        self.keep = keep
        # A small `keep` spills in small chunks, so memory holds at most about twice `keep` events.
        self.chunk = max(1, min(chunk, keep) if keep is not None else chunk)
        # (number of spilled events, the in-memory tail): swapped as one tuple, so a reader on another
        # thread never sees a new count with the old tail or the reverse.
        self._state: tuple[int, list[Event | Deferred]] = (0, [])
        # The index, one small array per spilled chunk (one growing array would be copied whole, 1.2 MB
        # at 150,000 events, each time it outgrows its allocation): chunk k holds events from starts[k]
        # on, offsets[k][j] is where its j-th event starts in the file and offsets[k][-1] where it ends.
        self._starts: list[int] = []
        self._chunk_offsets: list[array[int]] = []
        self._crcs: list[array[int]] = []  # each event's checksum, checked when read back
        self._file: SpillFile | None = None
        self._lock = threading.Lock()
        # What was spilled, counted when it was written (the agent's thread had each event at hand): how
        # many events, of each kind, and the largest integer "count" an event of each kind carried (a
        # tap's `diag` events: its running count of failures). So a probe client attaching to a long
        # session learns how many turns it has without the disk being read (see spilled_census).
        self._census: tuple[int, dict[str, int], dict[str, int]] = (0, {}, {})
        self.spill_error: str | None = None  # why the last write to disk failed, if one did
        self._retry_at = 0  # after a failed write: the event count at which to try again
        # Set by the log's owner (the Pipeline): makes the fold that rebuilds a turn written to disk as
        # its marker. None: a Deferred is built when it is written (nothing could rebuild it).
        self.refold: Callable[[], Refold] | None = None
        # Whether the log starts with its session (decided at the first spill).
        self._foldable: bool | None = None
        # Positions on disk that hold a turn's marker (ascending: spills go in order), and the fold that
        # rebuilt the last one read with the position it has folded to (readers mostly go forward).
        self._unbuilt: array[int] = array("q")
        # Where the k-th marker's rebuilt event was written back (-1: not yet), its end and checksum:
        # a second reader (another client's fill, the recorder after the probe) reads it, not a fold.
        self._rb_at: array[int] = array("q")
        self._rb_end: array[int] = array("q")
        self._rb_crc: array[int] = array("I")
        self._fold: tuple[Refold, int] | None = None
        self._fold_lock = threading.Lock()
        self._fold_warned = False

    # ---------------------------------------------------------------- writing
    def append(self, event: Event | Deferred) -> None:
        with self._lock:
            base, mem = self._state
            mem.append(event)
            if self.keep is not None and len(mem) >= self.keep + self.chunk and base + len(mem) >= self._retry_at:
                self._spill(base, mem)

    def _spill(self, base: int, mem: list[Event | Deferred]) -> None:
        """Write the oldest in-memory events to the file, then drop them from memory. Pickled now, not
        when journaled, so an event's final form is what is kept (a trace is completed before its turn
        event is journaled, and nothing edits one a chunk later).

        A write the disk refuses (full, I/O error) must not fail the agent's turn that journaled the
        event: the events stay in memory, the reason is logged once (`spill_error`), and the write is
        tried again a chunk later."""
        assert self.keep is not None  # only append() spills, and only with a bound
        import pickle  # here, not at the top: a reader of recordings never spills (see spill_file.warn)

        n = max(self.chunk, len(mem) - self.keep)
        evs, kinds_of, marks = self._to_write(base, mem[:n])
        out = [pickle.dumps(ev, protocol=pickle.HIGHEST_PROTOCOL) for ev in evs]
        if self._file is None:
            self._file = SpillFile("journal")
        try:
            end = self._file.append(b"".join(out))
        except OSError as exc:
            self._retry_at = base + len(mem) + self.chunk
            if self.spill_error is None:
                warn(
                    LOGGER,
                    "contextpipe: could not move %d journal events to disk (%s); they stay in memory and "
                    "the session goes on",
                    n,
                    exc,
                )
            self.spill_error = f"{type(exc).__name__}: {exc}"
            return
        offs = array("q", [end])
        for blob in out:
            end += len(blob)
            offs.append(end)
        # The chunk is on disk and indexed before the tail drops it: a reader on another thread that
        # sees the new count finds every event below it.
        self._chunk_offsets.append(offs)
        self._crcs.append(array("I", map(checksum, out)))
        self._starts.append(base)
        _counted, kinds, most = self._census
        kinds, most = dict(kinds), dict(most)  # (copies: a reader may hold the previous ones)
        for ev, k in zip(evs, kinds_of, strict=True):
            if type(k) is str:
                kinds[k] = kinds.get(k, 0) + 1
                count = ev.get("count")
                if type(count) is int and count > most.get(k, -1):
                    most[k] = count
        # Before the state: a reader that sees the new count finds the census of what it covers, and
        # which of those events are markers.
        self._rb_end.extend([0] * len(marks))
        self._rb_crc.extend([0] * len(marks))
        self._rb_at.extend([-1] * len(marks))
        self._unbuilt.extend(marks)
        self._census = (base + n, kinds, most)
        self._state = (base + n, mem[n:])

    def _to_write(self, base: int, evs: list[Event | Deferred]) -> tuple[list[Event], list[Any], list[int]]:
        """What is written for events base.. (`evs`): each as it is, or built; a turn nobody read as its
        marker when the log can rebuild it where it is read (`refold`), so the trace an untraced agent
        never asked for is not built in its thread as the journal spills (issue 15). A turn with an
        annotation no other event holds (Deferred.private) is built: the journal could not rebuild it.
        Also each event's kind, as the census counts it (a marker as the event it stands for), and the
        positions of the markers."""
        if self.refold is not None and self._foldable is None:
            # Rebuilding folds from the session on: a log that does not start with it cannot.
            first = evs[0] if base == 0 and evs else None
            self._foldable = type(first) is dict and first.get("k") == "session"
        mark = self.refold is not None and self._foldable is True
        out: list[Event] = []
        kinds: list[Any] = []
        marks: list[int] = []
        for j, ev in enumerate(evs):
            if isinstance(ev, Deferred):
                m = ev.marker() if mark and ev.kind is not None else None
                # (Built already: it is written as it is, the annotations set on it included.)
                if m is not None and not ev.private() and not ev.built():
                    out.append(m)
                    kinds.append(ev.kind)
                    marks.append(base + j)
                    continue
                ev = ev.resolve()
            out.append(ev)
            kinds.append(ev.get("k") if type(ev) is dict else None)
        return out, kinds, marks

    # ---------------------------------------------------------------- reading
    def _read(self, i: int) -> Event:
        f = self._file
        if f is None:
            raise SpillReadError("the journal's scratch file is closed")
        k = bisect_right(self._starts, i) - 1
        offs = self._chunk_offsets[k]
        j = i - self._starts[k]
        start, stop = offs[j], offs[j + 1]
        data = f.read(start, stop - start)
        if checksum(data) != self._crcs[k][j]:
            raise SpillReadError(f"journal event {i} is damaged on disk (checksum mismatch)")
        import pickle  # only spilled events are read here

        ev: Event = pickle.loads(data)
        return self._rebuild(i, ev) if self._marked(i) else ev

    def peek(self, i: int) -> Event:
        """Event i as indexing hands it back, but a turn written to disk unbuilt as its marker (not
        rebuilt): for a reader that only looks for turn numbers (the probe's bisect for a turn's trace,
        engine.probe.lean.find_turn), which would otherwise rebuild every turn it passes."""
        base, mem = self._state
        if i < 0:
            i += base + len(mem)
        if i >= base:
            return self[i]
        return next(self.read_run(i, i + 1, markers=True))

    def _marked(self, i: int) -> bool:
        """Whether spilled event i is a turn's marker (see _to_write)."""
        u = self._unbuilt
        if not u:
            return False
        k = bisect_left(u, i)
        return k < len(u) and u[k] == i

    def _rebuild(self, i: int, marker: Event) -> Event:
        """The turn event spilled event i (`marker`) stands for, rebuilt from the events before it
        (engine/recording/turn_fold.py), as a fresh dict each read as an unpickled event is. The fold is
        kept at where it stopped, so a reader going forward folds each event once; one going back
        starts again from the session. The marker itself if the turn cannot be rebuilt (said once)."""
        import pickle

        k = bisect_left(self._unbuilt, i)
        ev = self._written_back(k, i)
        if ev is not None:
            return ev
        refold = self.refold
        assert refold is not None  # (markers are written only with it)
        with self._fold_lock:
            ev = self._written_back(k, i)  # (another reader rebuilt it meanwhile)
            if ev is not None:
                return ev
            fold, at = self._fold if self._fold is not None and self._fold[1] <= i else (None, 0)
            self._fold = None  # (an error part way leaves no half-fed fold behind)
            try:
                if fold is None:
                    fold = refold()
                got = None
                for ev in self.read_run(at, i + 1, markers=True):
                    got = fold.feed(ev)
            except Exception as exc:  # a reader gets the marker, never a failure of the rebuild
                self._unrebuilt(i, f"{type(exc).__name__}: {exc}")
                return marker
            self._fold = (fold, i + 1)
        if got is None or got[1] is None:
            self._unrebuilt(i, "its rebuilt request is not the one the journal holds")
            return marker
        turn, trace = got
        blob = pickle.dumps({"k": "turn", "turn": turn, "trace": trace}, pickle.HIGHEST_PROTOCOL)
        self._write_back(k, blob)
        # A copy: the fold's trace is what the alert rules of the turns after it read.
        return pickle.loads(blob)  # type: ignore[no-any-return]

    def _write_back(self, k: int, blob: bytes) -> None:
        """Keep the k-th marker's rebuilt event at the end of the file, so it is read, not rebuilt, the
        next time. Under the log's lock: the agent's thread appends to the file as it spills. A write
        the disk refuses keeps nothing (the next read rebuilds it again)."""
        with self._lock:
            f = self._file
            if f is None or self._rb_at[k] >= 0:
                return
            try:
                at = f.append(blob)
            except OSError:
                return
            self._rb_end[k], self._rb_crc[k] = at + len(blob), checksum(blob)
            self._rb_at[k] = at  # (last: a reader that sees it finds the rest set)

    def _written_back(self, k: int, i: int) -> Event | None:
        """Marker k's rebuilt event (spilled event i) as written back, or None if it is not."""
        at = self._rb_at[k]
        f = self._file
        if at < 0 or f is None:
            return None
        data = f.read(at, self._rb_end[k] - at)
        if checksum(data) != self._rb_crc[k]:
            raise SpillReadError(f"journal event {i} is damaged on disk (checksum mismatch)")
        import pickle

        return pickle.loads(data)  # type: ignore[no-any-return]

    def _unrebuilt(self, i: int, why: str) -> None:
        if not self._fold_warned:
            self._fold_warned = True
            warn(
                LOGGER,
                "contextpipe: journal event %d (a turn moved to disk unbuilt) could not be rebuilt (%s); it "
                "reads as its turn_deferred marker",
                i,
                why,
            )

    def read_run(self, lo: int, hi: int, markers: bool = False) -> Iterator[Event]:
        """Events lo..hi-1 in order, as indexing would hand them back, for a reader that goes through a
        range (the probe answering a client's journal fetch): the spilled ones are read a run of up to
        READ_RUN_EVENTS consecutive events (READ_RUN_BYTES) in one pread, each checked and unpickled
        only as it is taken, so a reader that stops early (its CPU budget spent) has decoded no more
        than it took. Indexing each one cost a pread, an index lookup and a copy per event: about half
        of a range answer's CPU. Raises IndexError past the end, SpillReadError for a damaged event
        (what came before it was handed out). `markers`: a turn written to disk unbuilt is handed back as
        its `turn_deferred` marker (for a reader that rebuilds it itself, as a fold does), not rebuilt."""
        import pickle  # only spilled events are read here

        i = lo
        while i < hi:
            base, mem = self._state
            if i >= base:
                if i - base >= len(mem):
                    raise IndexError("journal event index out of range")
                yield _event(mem[i - base])
                i += 1
                continue
            f = self._file
            if f is None:
                raise SpillReadError("the journal's scratch file is closed")
            k = bisect_right(self._starts, i) - 1
            offs, crcs = self._chunk_offsets[k], self._crcs[k]
            j = i - self._starts[k]
            last = min(len(offs) - 1, j + min(hi, base) - i, j + READ_RUN_EVENTS)
            start = offs[j]
            # At most READ_RUN_BYTES, and at least one event however large.
            last = max(j + 1, min(last, bisect_right(offs, start + READ_RUN_BYTES, j + 1, last + 1) - 1))
            view = memoryview(f.read(start, offs[last] - start))
            # The markers in this run, if any are rebuilt (their positions, ascending).
            u = self._unbuilt
            marked = set() if markers or not u else set(u[bisect_left(u, i) : bisect_left(u, i + last - j)])
            for m in range(j, last):
                data = view[offs[m] - start : offs[m + 1] - start]
                if checksum(data) != crcs[m]:
                    raise SpillReadError(f"journal event {i} is damaged on disk (checksum mismatch)")
                ev = pickle.loads(data)
                if marked and i in marked:
                    ev = self._rebuild(i, ev)
                yield ev
                i += 1

    def __len__(self) -> int:
        base, mem = self._state
        return base + len(mem)

    @overload
    def __getitem__(self, i: int) -> Event: ...

    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...

    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        base, mem = self._state
        n = base + len(mem)
        if isinstance(i, slice):
            return [self._at(k, base, mem) for k in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("journal event index out of range")
        return self._at(i, base, mem)

    def _at(self, i: int, base: int, mem: list[Event | Deferred]) -> Event:
        return _event(mem[i - base]) if i >= base else self._read(i)

    def __iter__(self) -> Iterator[Event]:
        base, mem = self._state
        for i in range(base):
            yield self._read(i)
        # The tail as it is now and what is appended while iterating (a list iterator sees appends),
        # unless a spill replaced the tail meanwhile: then continue by index.
        k = base
        for ev in mem:
            yield _event(ev)
            k += 1
        while k < len(self):
            yield self[k]
            k += 1

    def __eq__(self, other: object) -> bool:
        return same_items(self, other)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the list it replaces

    def __repr__(self) -> str:
        base, mem = self._state
        return f"EventLog({base + len(mem)} events, {base} on disk)"

    def spilled_census(self) -> tuple[int, dict[str, int], dict[str, int]]:
        """(events on disk, how many of each kind "k" there are among them, the largest integer
        "count" of each kind), without reading the disk. Safe from another thread (one tuple, swapped
        whole, before the state that says how many events are on disk)."""
        return self._census

    def entry(self, i: int) -> Event | Deferred | None:
        """Event i as it is kept, without building a Deferred or reading the disk: None if it is on disk."""
        base, mem = self._state
        if i < base:
            return None
        return mem[i - base]

    def in_memory(self) -> int:
        """Events held in memory (the rest are on disk)."""
        return len(self._state[1])

    def spilled_bytes(self) -> int:
        return self._file.end if self._file is not None else 0

    def close(self) -> None:
        """Release the spill file. Spilled events cannot be read after this."""
        with self._lock:
            if self._file is not None:
                self._file.close()
        self._fold = None
