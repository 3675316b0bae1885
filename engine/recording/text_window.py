"""A recording's texts and traces read on demand: events that keep their place in the file, not their content.

A replay that held every journal event held every text the session ever saw: a 1 GB recording grew
the inspector to ~1.3 GB. The texts are in the file, and the reader reaches any of them from the offset
of the frame holding it (one chunk to inflate, bounded by the format's stream restarts). So a replay
keeps each blob event as a `LazyBlob` (its kind, its hash and that offset, ~300 bytes) and reads the
text when something asks for `ev["data"]`, through a `TextWindow`: the texts used last, up to a
budget of bytes, are kept, so stepping back and forth over a few turns reads nothing again. A turn
event is kept as a `LazyTurn` the same way (a decoded trace is ~13 KB, 350 MB over a 27,000-turn
file): its trace is read by its turn number when asked for (a fold reads the last one before the turn
it stops at; the reader keeps its last few chunks decoded).

The window opens its own reader (a reader is for one thread; the window serializes its reads) and
gives its descriptor back with close(), or when it is collected.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from engine.recording.cpsession import RecordingError, RecordingReader

# What a replay keeps of the texts it has read: a few hundred turns of a busy session, well under the
# ~300 MB an inspector on a long recording is allowed.
DEFAULT_BUDGET = 64 << 20
# Traces handed over by the reader that read the journal ahead of the fold (see hold_trace), at most this
# many (~13 KB each, decoded), and none more than TRACES_BEHIND turns before the last one asked for.
HELD_TRACES = 320
TRACES_BEHIND = 8


class TextWindow:
    """Blob texts of one recording by (hash, frame offset), the most recently used kept up to `budget`
    bytes (what the str objects take: `sys.getsizeof`)."""

    def __init__(
        self, path: str | Path, budget: int = DEFAULT_BUDGET, held_traces: int = HELD_TRACES
    ) -> None:
        if budget < 0:
            raise ValueError(f"budget must be >= 0 bytes, got {budget}")
        self.held_traces = held_traces
        self.path = Path(path)
        self.budget = budget
        self.held = 0  # bytes of the texts kept
        self.reads = 0  # texts read from the file (a miss), for tests and benchmarks
        self.trace_reads = 0  # traces read from the file (not held), likewise
        self._texts: OrderedDict[str, str] = OrderedDict()  # least recently used first
        self._traces: OrderedDict[int, dict[str, Any]] = OrderedDict()  # turn -> trace, oldest first
        self._reader: RecordingReader | None = None  # opened by the first miss
        self._closed = False
        self._lock = threading.Lock()

    def blob_event(self, h: str, at: int, text: str | None = None) -> LazyBlob:
        """The in-memory form of the blob event `h` read from the frame at `at`; `text`, when the reader
        has just decoded it, starts in the window (the fold that follows a read-ahead finds it)."""
        if text is not None:
            self.keep(h, text)
        return LazyBlob(h, at, self)

    def keep(self, h: str, text: str) -> None:
        size = sys.getsizeof(text)
        with self._lock:
            old = self._texts.pop(h, None)
            if old is not None:
                self.held -= sys.getsizeof(old)
            if size > self.budget:
                return  # larger than the whole window: read each time it is asked for
            self._texts[h] = text
            self.held += size
            while self.held > self.budget:
                _, gone = self._texts.popitem(last=False)
                self.held -= sys.getsizeof(gone)

    def text(self, h: str, at: int) -> str:
        """The text of blob `h` in the frame at offset `at` (RecordingError when the file no longer
        holds it there: damaged or replaced since it was read)."""
        with self._lock:
            text = self._texts.get(h)
            if text is not None:
                self._texts.move_to_end(h)
                return text
            if self._reader is None:
                self._reader = self._open()
            elif at >= self._reader.data_end:
                # A file still being written (replay --follow): its reader sees the file as it was when
                # opened; the frames appended since are read on.
                self._reader.refresh()
            data = self._reader.blob(h, at=at)
            self.reads += 1
        text = data if isinstance(data, str) else data.decode()
        self.keep(h, text)
        return text

    def frame_events(self, at: int) -> list[dict[str, Any]]:
        """The events of the frame at offset `at`, as the reader decodes them (engine/recording/
        paged_events.py reads a page of the journal again this way)."""
        with self._lock:
            if self._reader is None:
                self._reader = self._open()
            elif at >= self._reader.data_end:
                self._reader.refresh()  # a file still being written, as in text()
            return self._reader.frame_events(at)

    def turn_event(self, n: int) -> LazyTurn:
        return LazyTurn(n, self)

    def hold_trace(self, n: int, trace: dict[str, Any]) -> LazyTurn:
        """The in-memory form of turn `n`'s event, whose trace a reader has just decoded: the trace is
        held for the next HELD_TRACES turns read (the fold that follows a read-ahead reads the last trace
        before the turn it stops at). Read again from the file, each chunk was decompressed and decoded
        twice, once for the journal's events and once for the trace (~2 of the 8.4 s a replay of a
        218 MB recording took to reach its last turn)."""
        with self._lock:
            held = self._traces
            held[n] = trace
            held.move_to_end(n)
            while len(held) > self.held_traces:
                held.popitem(last=False)
        return LazyTurn(n, self)

    def held_trace(self, n: int) -> dict[str, Any] | None:
        """Turn `n`'s trace when it is held (see hold_trace), else None: nothing is read."""
        with self._lock:
            return self._passed(n)

    def _passed(self, n: int) -> dict[str, Any] | None:
        """Turn `n`'s held trace, the traces of turns well before it let go: a fold or a person asking for
        turn n has moved past those (stepping back a few turns finds them still held)."""
        held = self._traces
        while held:
            first = next(iter(held))
            if first >= n - TRACES_BEHIND:
                break
            del held[first]
        return held.get(n)

    def trace(self, n: int) -> dict[str, Any]:
        """The trace of turn `n` (RecordingError or IndexError when the file no longer holds it)."""
        with self._lock:
            held = self._passed(n)
            if held is not None:
                return held
            self.trace_reads += 1
            if self._reader is None:
                self._reader = self._open()
            try:
                trace: dict[str, Any] = self._reader.turn(n)["trace"]
            except IndexError:  # a turn appended since the reader was opened (replay --follow)
                self._reader.refresh()
                trace = self._reader.turn(n)["trace"]
            return trace

    def _open(self) -> RecordingReader:
        if self._closed:
            # A worker still folding as the app exits: it fails here, not on a descriptor reopened.
            raise RecordingError(f"{self.path}: the replay's text window is closed")
        # salvage: a damaged file's events were read up to the damage by the caller's reader, and the
        # window is asked only for those; without it, opening the same file here would refuse it.
        return RecordingReader.open(self.path, salvage=True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._reader is not None:
                self._reader.close()
                self._reader = None
            self._texts.clear()
            self._traces.clear()
            self.held = 0


class LazyBlob(dict[str, Any]):
    """A `blob` event whose text stays in the recording: `ev["data"]` and `ev.get("data")` read it
    through its window; the map itself holds only the kind and the hash (`"data" in ev` is False, so
    code that can do without the text sees it is not here). `whole()` is the event as recorded."""

    __slots__ = ("_at", "_window")

    def __init__(self, h: str, at: int, window: TextWindow) -> None:
        super().__init__(k="blob", h=h)
        self._at = at
        self._window = window

    def __missing__(self, key: str) -> Any:
        if key == "data":
            return self._window.text(dict.__getitem__(self, "h"), self._at)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if key == "data":
            return self["data"]
        return dict.get(self, key, default)

    def whole(self) -> dict[str, Any]:
        return {"k": "blob", "h": self["h"], "data": self["data"]}


class LazyTurn(dict[str, Any]):
    """A `turn` event whose trace stays in the recording: `ev["trace"]`, `ev.get("trace")` and
    `"trace" in ev` behave as on the plain event (journal.trace_of and the fold read it so); the map
    holds the kind and the turn number. `whole()` is the event as recorded."""

    __slots__ = ("_window",)

    def __init__(self, n: int, window: TextWindow) -> None:
        super().__init__(k="turn", turn=n)
        self._window = window

    def __missing__(self, key: str) -> Any:
        if key == "trace":
            return self._window.trace(dict.__getitem__(self, "turn"))
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key == "trace" or dict.__contains__(self, key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if key == "trace":
            return self["trace"]
        return dict.get(self, key, default)

    def whole(self) -> dict[str, Any]:
        return {"k": "turn", "turn": self["turn"], "trace": self["trace"]}
