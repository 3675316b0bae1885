"""Reading the source off the UI thread: a thread worker turns `load_chunks()` and `follow()` into
small messages (as memray's live view and posting do it); the app's handlers update the timeline."""

from __future__ import annotations

from textual.app import App
from textual.worker import get_current_worker

from inspector.messages import EventsDropped, SourceDisconnected, SourceFailed, TurnsReceived
from inspector.sources import Disconnected, EventsLost, NewTurn, Source


class SourceReader:
    def __init__(self, app: App[None], source: Source) -> None:
        self.app, self.source = app, source

    def start(self) -> None:
        self.app.run_worker(self._read, thread=True, exclusive=True, group="source", exit_on_error=False)

    def _read(self) -> None:
        try:
            self._read_source()
        except Exception as exc:  # a damaged file or a broken socket: the app shows it (no silent wait)
            self.app.post_message(SourceFailed(str(exc) or type(exc).__name__))

    def _read_source(self) -> None:
        worker = get_current_worker()
        post = self.app.post_message
        # A long recording arrives in chunks, so the first frame does not wait for the last turn.
        pending = iter(self.source.load_chunks())
        traces = next(pending, [])
        for following in pending:
            if worker.is_cancelled:
                return
            post(TurnsReceived(traces, more=True))
            traces = following
        post(TurnsReceived(traces))
        for event in self.source.follow():
            if worker.is_cancelled:
                return
            if isinstance(event, NewTurn):
                post(TurnsReceived([event.trace]))
            elif isinstance(event, Disconnected):
                post(SourceDisconnected(event.reason))
            elif isinstance(event, EventsLost):
                post(EventsDropped(event.count))
