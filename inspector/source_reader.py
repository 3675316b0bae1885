"""Reading the source off the UI thread: a thread worker turns `load_chunks()` and `follow()` into
small messages (as memray's live view and posting do it); the app's handlers update the timeline."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from textual.app import App
from textual.worker import Worker, get_current_worker

from inspector.messages import (
    EventsDropped,
    HistoryProgressed,
    HistoryRefreshed,
    SourceDisconnected,
    SourceFailed,
    SourceNotice,
    TurnsReceived,
)
from inspector.sources import (
    Chunk,
    Disconnected,
    EventsLost,
    HistoryFilled,
    HistoryProgress,
    NewTurn,
    Notice,
    Source,
)

# How long the rest of a long recording waits for the first screen before it is read anyway (a frame
# that never comes, e.g. a suspended app, must not stall the load; on a loaded machine the first screen
# has taken several seconds of wall time).
FIRST_FRAME_WAIT_S = 10.0


class SourceReader:
    def __init__(self, app: App[None], source: Source) -> None:
        self.app, self.source = app, source
        self._drawn = threading.Event()  # the app drew the first chunk's frame (first_frame_drawn)
        # Closing the source (close_source): done by whichever comes last, the app's exit or the end of
        # the reader thread, so the source is never closed under the thread reading it.
        self._close_lock = threading.Lock()
        self._reading = False  # the reader thread runs
        self._closing = False  # the app asked for the source to be closed
        self.closed = False  # the source was closed
        # What start() read on the app's thread: the chunks it began (the thread reads on from there),
        # the first of them, or what reading it raised.
        self._chunks: Iterator[Chunk] | None = None
        self._first: Chunk | None = None
        self._failed: Exception | None = None

    def start(self) -> Chunk | None:
        """Start the reader thread. A source whose first chunk is at hand (a recording file:
        `first_chunk_at_once`) has it decoded here, on the app's thread, and returned for the app to show
        at once: the first frame then shows the turns. Read on the thread, it arrived after the app's
        first layout, and the screen was laid out and drawn once empty ("waiting for the first turn…")
        and again with the turns: ~60-90 ms of CPU before the first screen with turns. Any other source
        (a live agent may take a while to send anything) is read on the thread only."""
        with self._close_lock:
            if self._closing:
                return None  # (the app exited before its reader started)
            self._reading = True
        first: Chunk | None = None
        if getattr(self.source, "first_chunk_at_once", False):
            self._chunks = self.source.load_chunks()
            try:
                first = self._first = next(self._chunks, None)
            except Exception as exc:  # a damaged file: the reader thread reports it, as it does its own
                self._failed = exc
        self.app.run_worker(self._read, thread=True, exclusive=True, group="source", exit_on_error=False)
        return first

    def close_source(self) -> None:
        """The app exits: close the source (its file, or its socket and ring) now if the reader thread
        has ended, or as that thread ends (the app's quit cancelled it: it ends within a wait of the
        source's). Not left to the collector: the app (and the source with it) may live on after it
        exits, as each inspector `cp-inspect top` attaches does, and a frozen app is never collected."""
        with self._close_lock:
            self._closing = True
            if self._reading:
                return
        self._close()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self.source.close()

    def first_frame_drawn(self) -> None:
        """Called by the app once the frame showing the first chunk is on screen: the rest may load."""
        self._drawn.set()

    def _read(self) -> None:
        try:
            self._read_source()
        except Exception as exc:  # a damaged file or a broken socket: the app shows it (no silent wait)
            self.app.post_message(SourceFailed(str(exc) or type(exc).__name__))
        finally:
            with self._close_lock:
                self._reading = False
                closing = self._closing
            if closing:  # the app exited while this thread read: the source is closed now it is done
                self._close()

    def _read_source(self) -> None:
        worker = get_current_worker()
        post = self.app.post_message
        # A long recording arrives in chunks, so the first frame does not wait for the last turn: each
        # chunk is posted as soon as it is decoded (it says itself whether more follow).
        posted, more = False, False
        if self._failed is not None:
            raise self._failed
        chunks = self._chunks if self._chunks is not None else self.source.load_chunks()
        if self._first is not None:  # the app has shown it (start): the rest waits for that frame
            posted, more = True, self._first.more
            if more and not self._wait_for_first_frame(worker):
                return
        for chunk in chunks if more or not posted else ():
            if worker.is_cancelled:
                return
            post(TurnsReceived(chunk.traces, more=chunk.more))
            if chunk.more and not posted and not self._wait_for_first_frame(worker):
                return
            posted, more = True, chunk.more
        if not posted or more:  # an empty source, or one whose last chunk promised more: the load ends
            post(TurnsReceived([]))
        for event in self.source.follow():
            if worker.is_cancelled:
                return
            if isinstance(event, NewTurn):
                post(TurnsReceived([event.trace]))
            elif isinstance(event, Disconnected):
                post(SourceDisconnected(event.reason))
            elif isinstance(event, EventsLost):
                post(EventsDropped(event.count))
            elif isinstance(event, HistoryFilled):
                post(HistoryRefreshed())
            elif isinstance(event, HistoryProgress):
                post(HistoryProgressed(event.filled, event.total, event.first))
            elif isinstance(event, Notice):
                post(SourceNotice(event.text, event.title))

    def _wait_for_first_frame(self, worker: Worker[None]) -> bool:
        """Hold the rest of the load until the first chunk is drawn: decoding it meanwhile would only
        compete with the UI thread for the GIL and the CPU, and delay that frame by as much as it
        decodes. False when the worker was cancelled while it waited."""
        give_up = time.monotonic() + FIRST_FRAME_WAIT_S
        while not self._drawn.wait(0.05):
            if worker.is_cancelled:
                return False
            if time.monotonic() >= give_up:
                break
        return True
