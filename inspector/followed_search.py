"""What each turn of a followed recording sent, indexed for the content search (`/`) from the file as the
follower reads it (`RecordingStream`, a RecordingFollower's `search_index`), off the UI thread.

The follower shows the agent's turns from its recording, traces as the agent wrote them: nothing builds a
turn there, so the first `/` built every earlier turn in a JournalStream over the follower's own journal
(content_search.JournalStream: each request planned, optimized, serialized and traced, the journal's pages
decoded again as the text window let them go, and the follower's replayer folded to the newest turn first
to make the stream's pipeline): ~1 ms a turn, ~1 s at 1,000 turns before the answer. Here a reader of the
stream's own reads the file's events once, in order (each chunk decoded once), a pipeline of its own folds
them, and each request is only decided (`Pipeline.decide`: planned and optimized, what is sent), not
serialized or traced: the search counts what each section's items say, which the decision holds
(tests/test_followed_search.py checks every turn's sections against the build's). The follower indexes the
turns this way in its own thread as it reads them (`index_ahead`, a batch between two looks at the file,
the history before the attach first), so that a `/` finds them counted; one that comes before the stream
has caught up builds the rest in its worker, as before. After a fall-back to the live stream, the turns
the file lacks come from the live source's fold, as a JournalStream's do (`add`, `reach`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.recording.cpsession import RecordingReader
from inspector.content_search import JournalStream, Sections

if TYPE_CHECKING:
    from engine.pipeline import Built

# Turns a follower indexes between two looks at its file: ~30-50 ms of its thread's CPU at a time.
INDEX_BATCH = 100


class RecordingStream(JournalStream):
    """The content search's stream of a followed recording (see the module docstring). `source`: the
    RecordingFollower (its `reach_live` after a fall-back); `path`: its file, opened here again."""

    def __init__(self, source: Any, path: str | Path, *, standing: bool = True) -> None:
        """`standing`: the source's own (a follower's, for the session); False: a scan's (`replay
        --follow`'s: content_search.stream_for), closed with it."""
        super().__init__(source, standing=standing)
        self.path = path
        self.reader: RecordingReader | None = None  # opened when the first turn is indexed
        self._first: Iterator[tuple[int, dict[str, Any]]] | None = None
        self._queue: deque[dict[str, Any]] = deque()  # events read on (refresh) not folded yet
        self.ended = False  # the file has no event past those folded (for now: it may grow)

    def reach(self, turn: int) -> None:
        """After a fall-back, the live source's journal through `turn` folded (its builds reach `add`)."""
        live = getattr(self.source, "reach_live", None)
        if callable(live):
            live(turn)

    def sections_of(self, turn: int) -> Sections | None:
        got = self.turns.get(turn)
        if got is None and self.past < turn:
            self.build_of(turn)
            got = self.turns.get(turn)
        return got

    def build_of(self, turn: int) -> Built | None:
        """The file read on through turn `turn`, each request on the way decided and indexed (`turns`):
        no Built is made, so None."""
        self._index(lambda t: t >= turn)
        return None

    def index_ahead(self, most: int = INDEX_BATCH) -> int:
        """Index up to `most` more turns of what the file holds (the follower's thread, holding
        `scan_lock`); the number indexed (0: caught up with the file)."""
        done = [0]

        def enough(_: int) -> bool:
            done[0] += 1
            return done[0] >= most

        self._index(enough)
        return done[0]

    def _next(self) -> dict[str, Any] | None:
        reader = self.reader
        if reader is None:
            reader = self.reader = RecordingReader.open(self.path, from_end=True)
            # (A turn event's trace is not read: its fields are skipped, not built: lean_turns.py.)
            self._first = reader.event_frames(stop=reader.data_end, trace_fields=("turn",))
        if self._first is not None:
            got = next(self._first, None)
            if got is not None:
                return got[1]
            self._first = None
        if not self._queue:
            self._queue.extend(reader.refresh())  # the frames appended since (complete ones)
        return self._queue.popleft() if self._queue else None

    def _index(self, stop: Any) -> None:
        """Fold the file's events and decide each request, indexing it, until `stop(turn)` says so after
        one, or the file has no more."""
        while True:
            ev = self._next()
            if ev is None:
                self.ended = True
                return
            self.ended = False
            k = ev.get("k")
            if self.pipe is None:
                self.pipe = self._pipeline(ev)
            if k == "request":
                got = ev["turn"]
                self._spill_failures(ev)
                pipe = self.pipe
                pipe.begin_request(got)
                d = pipe.decide(ev.get("bound", {}), pipe.config)
                if d.finish is not None:
                    d.finish()
                sent = ((sec.id, sec.items) for sec in d.res.asm if sec.items)
                with self._index_lock:
                    if got not in self.turns:  # (one the live fold handed in stays as it is)
                        self.turns[got] = self._numbered(sent, self._last)
                pipe.fold(ev)
                self.past = got
                if stop(got):
                    return
            elif k not in ("turn", "turn_deferred"):  # (a turn's trace: no build reads it)
                self.pipe.fold(ev)

    def _pipeline(self, first: dict[str, Any]) -> Any:
        """The stream's pipeline, from the recording's first event (its session): the spill writes the
        agent's run failed are failed as each request lists them (JournalStream._spill_failures)."""
        from engine.recording.replay import Replayer

        self.fail_keys = frozenset()
        return Replayer([first]).new_pipeline()

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
