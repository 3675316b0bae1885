"""A recording file as the app's source (`FileSource`): the journal events it has read, with the engine
embedded (ReplayingSource: a Replayer) for what-if re-plans and section content; panels only ever see
traces (dicts).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from engine.recording.counts import CarriedCounter, CountTable, CountTableError
from engine.recording.cpsession import RecordingError, RecordingReader
from engine.recording.journal import trace_of, unpack_event
from engine.recording.paged_events import PagedEvents
from engine.recording.text_window import DEFAULT_BUDGET, TextWindow
from engine.tokens import TokenCounter
from engine.trace_schema import Trace
from inspector.sources import Chunk, FoldCancelled, NewTurn, SourceEvent, cancelled_event
from inspector.sources.replaying import ReplayingSource, shared_counter
from inspector.timeline import summarize

if TYPE_CHECKING:
    from engine.pipeline import Built
    from engine.recording.replay import Replayer


def _light(ev: dict[str, Any]) -> dict[str, Any]:
    """The in-memory form of a recorded event for the replayer: text blobs decompressed (folding reads
    them), turn traces left packed (1-3 KB instead of ~13 KB decoded; the fold decodes only the few it
    needs)."""
    return ev if ev.get("k") == "turn" else unpack_event(ev)


class FileSource(ReplayingSource):
    """A `.cpsession` recording; with follow=True it tails a file another process is still writing.

    Memory stays small for a long recording: the app's timeline gets a compact summary per turn
    (`load_chunks`), the full trace of a turn is decoded from the recording's index when it is shown
    (`full_trace`, a small LRU), and the journal is read only as far as the latest turn whose content
    or re-plan was asked for (plus READ_AHEAD turns, so stepping forward does not read per step). Its
    texts stay in the file: blob events are held as `LazyBlob`s, read through a `TextWindow` that keeps
    the last TEXT_BUDGET bytes used (turn events as `LazyTurn`s, read by turn number), and the replay's
    fold keeps the conversation behind the compaction cut on disk (Replayer's history_chunk), so
    stepping through a 1 GB recording holds a window of it, not the whole of it."""

    TRACE_CACHE = 64
    READ_AHEAD = 64
    TEXT_BUDGET = DEFAULT_BUDGET
    HISTORY_CHUNK = 64  # messages written at a time by the replay's fold (a live session writes 256)
    FOLD_STEPS = 1  # a far jump reads and folds this many checkpoint spans at a time (replayer())

    def __init__(self, path: str | Path, follow: bool = False, reader: RecordingReader | None = None) -> None:
        """`reader`: the file already opened (by the CLI, which checks it first), so it is not read twice."""
        super().__init__()
        self.path = Path(path)
        self.reader = reader if reader is not None else RecordingReader.open(self.path)
        self.header = {**self.reader.header, "path": str(self.path)}
        if self.reader.damage is not None:
            self.header["damage"] = self.reader.damage.message
        elif not follow and not self.reader.finished:
            # No footer and no damage: its writer is still adding turns, or stopped between two (the app
            # says it, and how to follow it: a replay showed the turns so far and nothing more, silently).
            self.header["not_closed"] = True
        self.follow_file = follow
        self._read_pos = self.reader.data_start  # file offset up to which `events` holds the journal
        self._loaded_turn = -1  # the last turn whose events `events` holds (or more: see _load_events)
        self._traces: OrderedDict[int, dict[str, Any]] = OrderedDict()  # LRU of decoded traces
        # Traces the read-ahead decoded are held until the fold passes them (see TextWindow.hold_trace).
        self.texts = TextWindow(self.path, self.TEXT_BUDGET, held_traces=self.READ_AHEAD + 64)
        # The journal read so far, its events in the file (a page per frame; the recent ones decoded).
        self.paged = PagedEvents(self.texts, self._held, pages=self.READ_AHEAD + 96)
        self.events = self.paged  # type: ignore[assignment]  # a Sequence read as the list it replaces
        # The recording's token-count table (see _counter): unread (False), absent or unusable (None).
        self._counts: CountTable | None | bool = False
        self._carried: CarriedCounter | None = None
        self._counts_checked = False

    def _load_events(self, upto_turn: int | None = None, ahead: int | None = None) -> None:
        """`events` through turn `upto_turn` and `ahead` turns more (None: READ_AHEAD), or all of it."""
        with self._lock:
            reader = self.reader
            stop = reader.data_end
            nums = reader.turn_numbers() if upto_turn is not None else []
            if upto_turn is not None and nums:
                slot = bisect.bisect_left(nums, upto_turn)
                last = nums[min(len(nums) - 1, slot + (self.READ_AHEAD if ahead is None else ahead))]
                pos, end = reader.turn_frame(last)
                if pos < self._read_pos:
                    return
                stop = min(stop, end)
                self._loaded_turn = max(self._loaded_turn, last)
            elif upto_turn is None:
                self._loaded_turn = max(self._loaded_turn, *reader.turn_numbers()[-1:])
            if stop > self._read_pos:
                try:
                    self.paged.extend_frames(reader.event_frames(self._read_pos, stop))
                except RecordingError as exc:
                    # A frame damaged part way through the file (the index at its end intact): the
                    # read-ahead past the turn asked for met it, and a turn before the damage could not
                    # show its content or be re-planned ("cannot show this content: corrupt frame").
                    # Each frame's events are added whole, the damaged one's none: what was read stays,
                    # and a turn whose frame ends before the damage is served; anything else raises.
                    at = exc.offset
                    if at is None or at < self._read_pos:
                        raise
                    self._read_pos = at
                    if upto_turn is None or not nums or reader.turn_frame(upto_turn)[1] > at:
                        raise
                    return
                self._read_pos = stop

    def replayer(self, upto_turn: int | None = None) -> Replayer:
        """As ReplayingSource's; a turn far past what was read is reached a checkpoint span (FOLD_STEPS
        of them) at a time, each read (no read-ahead) then folded. Read whole before the fold began, a
        jump to the last turn of a 218 MB recording read far more texts than the window keeps, and the
        fold read each of them from the file again (14,000 chunks fed to zstd for 7,000, 436 MB peak)."""
        if upto_turn is not None:
            from engine.recording.replay import CHECKPOINT_EVERY

            step = CHECKPOINT_EVERY * self.FOLD_STEPS
            # A worker replaced while it folds stops at the next span: the opening turn of a 12,000-turn
            # recording took ~2 s of CPU to fold, and after a step elsewhere it ran on beside the
            # turns the person went to, and their what-ifs (issue 15.2: later re-plans 110 ms of process
            # CPU p95 against ~5 ms alone). What was folded stays: the replayer's cursor and checkpoints.
            stop = cancelled_event()
            # Steps end on checkpoint turns, where a fold straight through keeps the turn event it
            # folds: the turn built is the one a single fold builds. A step reads no turns past its
            # end: read then, their texts would be the window's oldest after the fold (it reads the
            # step's), the first let go as the next step reads. The fold runs outside this source's
            # lock, as a re-plan's does (the app's thread reads traces under it while a worker folds).
            for nxt in range((self._loaded_turn // step + 1) * step, upto_turn, step):
                if stop is not None and stop.is_set():
                    raise FoldCancelled(f"the fold toward turn {upto_turn} was cancelled at turn {nxt}")
                with self._lock:
                    self._load_events(nxt, ahead=0)
                    replayer = self._caught_up()
                replayer.advance(nxt)
        return super().replayer(upto_turn)

    def _held(self, at: int, ev: dict[str, Any]) -> dict[str, Any]:
        """What `events` keeps of the event read from the frame at `at` while its page is decoded: a text
        blob by its place in the file (its text starts in the window: the fold that follows a read-ahead
        reads it), anything else as _light keeps it."""
        k = ev.get("k")
        # A file still being written (follow) too: the window's reader reads on past where it was opened.
        if k == "blob" and isinstance(ev.get("h"), str) and isinstance(ev.get("data"), str):
            return self.texts.blob_event(ev["h"], at, ev["data"])
        if k == "turn" and type(ev.get("turn")) is int and isinstance(ev.get("trace"), dict):
            # Held for a while (the fold reads it soon), then found again by its number through the index.
            return self.texts.hold_trace(ev["turn"], ev["trace"])
        return _light(ev)

    def _table(self) -> CountTable | None:
        """The recording's token-count table, when it has a usable one and is finished (a followed file
        is still being written: its table comes at close)."""
        with self._lock:
            if self._counts is False:
                self._counts = None
                if not self.follow_file:
                    try:
                        self._counts = self.reader.token_counts()
                    except CountTableError:
                        pass
            return self._counts if isinstance(self._counts, CountTable) else None

    def _counter(self) -> TokenCounter:
        """The replay counts with the recording's own table (the agent counted every text it sent): the
        first fold of a long recording tokenized each text again, ~24 s of the ~33 s a 218 MB recording
        took to show its last turn. The table is checked against the recording on the first turn built
        (_built); a text it lacks is tokenized as before."""
        with self._lock:
            if self._carried is None and not self._counts_checked:
                table = self._table()
                if table is not None:
                    try:
                        self._carried = CarriedCounter(table)
                    except CountTableError:  # counted by another tokenizer than this reader's
                        self._counts_checked = True
            return self._carried if self._carried is not None else shared_counter()

    def _sim_counts(self) -> tuple[TokenCounter | None, CountTable | None]:
        """The session-wide what-if takes the table as `cp-inspect simulate` does (simulate checks it
        against the recording's traces and counts afresh, with a note, where it disagrees)."""
        table = self._table()
        return (None, table) if table is not None else super()._sim_counts()

    def _built(self, turn: int) -> Built:
        built = super()._built(turn)
        with self._lock:
            if self._carried is None or self._counts_checked:
                return built
            self._counts_checked = True
            recorded = self.full_trace(turn)
            if built.trace.get("final_tokens") == recorded.get("final_tokens"):
                return built
            # The table disagrees with the recording's own figures: fold again with a fresh count.
            self._carried, self._replayer, self._replayer_len, self._cache = None, None, 0, None
        return super()._built(turn)

    def shadow_summary(self) -> dict[str, Any] | None:
        """None at once for a finished recording whose journal holds no `shadow_config` before its first
        turn: a Pipeline journals its shadow candidate when it is made, before any turn, so a session
        without one there has none. The app asks when a recording opens, and the summary read (and
        decoded) the whole journal to find that out: on a 218 MB recording all of its texts and 7,000
        traces, held from then on."""
        if not self.follow_file:
            with self._lock:
                nums = self.reader.turn_numbers()
                if nums:
                    _, end = self.reader.turn_frame(nums[0])
                    head = (ev for _, ev in self.reader.event_frames(stop=end))
                    if not any(ev.get("k") == "shadow_config" for ev in head):
                        return None
        return super().shadow_summary()

    def full_trace(self, turn: int) -> Trace:
        """The whole trace of turn `turn`, decoded from the recording (cached for the last few turns)."""
        with self._lock:
            trace = self._traces.get(turn)
            if trace is None:
                # The read-ahead's copy when it is still held: reading the turn's chunk here decompressed
                # it again, and from its stream's start (the reader's stream had moved on past it).
                held = self.texts.held_trace(turn)
                trace = self._remember(turn, held if held is not None else trace_of(self.reader.turn(turn)))
            else:
                self._traces.move_to_end(turn)
            return cast(Trace, trace)  # decoded from the recording: the shape engine.trace built

    def _remember(self, turn: int, trace: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._traces[turn] = trace
            if len(self._traces) > self.TRACE_CACHE:
                self._traces.popitem(last=False)
        return trace

    def load_initial(self) -> list[dict[str, Any]]:
        """Every turn's full trace (tests, tools; the app uses load_chunks)."""
        return [trace_of(self.reader.turn(t)) for t in self.reader.turn_numbers()]

    # The first chunk: the turns decoded before the first frame (~0.25 ms a turn). 50 fill the 120x40
    # screen's timeline; 200 (until session 36) cost ~35 ms more before that frame. The rest follow in
    # larger chunks, on the reader thread, once it is drawn (SourceReader).
    FIRST_CHUNK = 50
    # The file is at hand: SourceReader.start decodes the first chunk on the app's thread, before the
    # first layout, so the first frame shows turns (a live agent's first turns are read on the thread).
    first_chunk_at_once = True

    def load_chunks(self, first: int = FIRST_CHUNK, size: int = 2000) -> Iterator[Chunk]:
        """Every turn's summary through the index (opening a long recording does not replay it), a small
        chunk first so the app can draw while the rest decodes. Each chunk says whether more follow
        from the index's turn count, so it is handed on before the next one is decoded."""
        numbers = self.reader.turn_numbers()
        at, n = 0, first
        while at < len(numbers):
            chunk: list[dict[str, Any]] = []
            try:
                for t in numbers[at : at + n]:
                    chunk.append(summarize(trace_of(self.reader.turn(t))))
            except Exception:
                # A recording damaged part way (a corrupt frame mid-file): the turns before the damage
                # are handed on, then the error (the status line says what and how to salvage). The
                # chunk holding the damaged turn was lost whole: the screen stayed at "waiting for the
                # first turn…" though explain and salvage read every turn before it. `more`: the reader
                # asks for the next chunk, and that is this error.
                if chunk:
                    yield Chunk(chunk, more=True)
                raise
            at, n = at + n, size
            yield Chunk(chunk, more=at < len(numbers))

    def close(self) -> None:
        """Close the recording (under the lock every read of it takes: a read that comes later, from a
        worker still running as the app exits, fails on the closed reader, never on a reused descriptor)."""
        with self._lock:
            self.reader.close()
        self.texts.close()  # its own reader (the window's lock, not this one: a fold reads through it)

    def _read_on(self) -> list[dict[str, Any]]:
        """The events another process appended since the last look (follow). When `events` had caught
        up, they are added as the lazy reader adds them (texts and traces left in the file: a followed
        session held every text it wrote), read again from the frames with their offsets; otherwise the
        lazy reader gets to them when it is asked."""
        with self._lock:
            caught_up = self._read_pos >= self.reader.data_end
            new = self.reader.refresh()
            if caught_up and self.reader.data_end > self._read_pos:
                stop = self.reader.data_end
                self.paged.extend_frames(self.reader.event_frames(self._read_pos, stop))
                self._read_pos = stop
        return new

    def follow(self) -> Iterator[SourceEvent]:
        if not self.follow_file:
            return
        from watchfiles import watch

        # The app's quit ends the wait (watch() looks at the flag every `step` ms): without it the reader
        # thread waited for the file's next change, and the app's exit for that thread.
        stop = cancelled_event()
        for _changes in watch(self.path, debounce=50, step=50, yield_on_timeout=False, stop_event=stop):
            new = self._read_on()
            for ev in new:
                if ev.get("k") == "turn":
                    yield NewTurn(summarize(self._remember(ev["turn"], trace_of(ev))))


