"""Reading the source and fetching content, off the UI thread.

A thread worker reads `source.follow()` and posts small messages (as memray's live view and posting
do it); handlers update the Timeline and the `index` reactive. Section content and request bodies are
built by the source's embedded engine in a worker that a newer step cancels.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

from textual import on, work
from textual.worker import get_current_worker

from inspector.app_state import CONTENT_DEBOUNCE_S, AppState
from inspector.messages import (
    ContentLoaded,
    EventsDropped,
    SourceDisconnected,
    TurnsReceived,
)
from inspector.sources import Disconnected, EventsLost, NewTurn
from panels.alerts import AlertsPanel
from panels.content_viewer import ContentViewer
from panels.manifest import SectionSelected
from panels.timeline_strip import TimelineStrip


class SourceMixin(AppState):
    # ---- source -------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="source", exit_on_error=False)
    def read_source(self) -> None:
        worker = get_current_worker()
        # A long recording arrives in chunks, so the first frame does not wait for the last turn.
        pending: Iterator[list[dict]] = iter(self.source.load_chunks())
        traces = next(pending, [])
        for following in pending:
            if worker.is_cancelled:
                return
            self.post_message(TurnsReceived(traces, more=True))
            traces = following
        self.post_message(TurnsReceived(traces))
        for event in self.source.follow():
            if worker.is_cancelled:
                return
            if isinstance(event, NewTurn):
                self.post_message(TurnsReceived([event.trace]))
            elif isinstance(event, Disconnected):
                self.post_message(SourceDisconnected(event.reason))
            elif isinstance(event, EventsLost):
                self.post_message(EventsDropped(event.count))

    @on(TurnsReceived)
    def _turns_received(self, message: TurnsReceived) -> None:
        first = len(self.timeline)
        self.timeline.extend(message.traces)
        self.query_one("#alerts", AlertsPanel).add_traces(message.traces, first)
        self.query_one("#strip", TimelineStrip).count = len(self.timeline)
        if not self._loaded and len(self.timeline):
            found = None if self.start_turn is None else self.timeline.index_of_turn(self.start_turn)
            if found is not None or not message.more:  # the start turn may be in a later chunk
                self._loaded = True
                if self.start_turn is not None:
                    self.timeline.go(found if found is not None else self.timeline.last)
        self._loading = message.more
        if not message.more:
            # A long recording leaves ~10^6 long-lived objects (summaries, alerts): move them out of the
            # cyclic GC's reach, or each full collection rescans them all mid-step (100+ ms pauses).
            gc.freeze()
        if self.index == self.timeline.current and not message.more and self._content_deferred:
            self.watch_index(self.index)  # the initial load is complete: now fetch the content
        self.index = self.timeline.current
        self._update_status()

    def watch_index(self, index: int) -> None:
        raise NotImplementedError  # app.InspectorApp

    @on(SourceDisconnected)
    def _source_disconnected(self, message: SourceDisconnected) -> None:
        self.disconnected = message.reason
        self.notify(f"Agent disconnected ({message.reason}). {len(self.timeline)} turns kept; press s to save.",
                    severity="warning", timeout=8)

    def watch_disconnected(self) -> None:
        self._update_status()

    @on(EventsDropped)
    def _events_dropped(self, message: EventsDropped) -> None:
        self.dropped += message.count
        self._update_status()

    # ---- content ------------------------------------------------------------------------------

    def _load_content(self, section_id: str | None, stepping: bool = False) -> None:
        trace = self.full_trace(self.index)
        if trace is None:
            return
        # Held-down arrow keys step many turns a second: the content of a turn the person has
        # already left is never fetched (the worker waits a moment and a newer step cancels it).
        now = time.monotonic()
        wait = CONTENT_DEBOUNCE_S if stepping and now - self._last_step < CONTENT_DEBOUNCE_S else 0.0
        if stepping:
            self._last_step = now
        if self._show_request:
            self.fetch_content(trace["turn"], None, f"request body · turn {trace['turn']}", wait)
        elif section_id is not None:
            form = next((s["form"] for s in trace["sections"] if s["id"] == section_id), "")
            self.fetch_content(trace["turn"], section_id, f"{section_id} · turn {trace['turn']} · {form}", wait)

    @work(thread=True, exclusive=True, group="content", exit_on_error=False)
    def fetch_content(self, turn: int, section_id: str | None, title: str, wait: float = 0.0) -> None:
        worker = get_current_worker()
        if wait:
            time.sleep(wait)
            if worker.is_cancelled:
                return
        text = (self.source.request_body(turn) if section_id is None
                else self.source.section_content(turn, section_id))
        if not worker.is_cancelled:
            self.post_message(ContentLoaded(title, text))

    @on(ContentLoaded)
    def _content_loaded(self, message: ContentLoaded) -> None:
        if not self._frozen_fold:  # the journal folded for the first content view is long-lived too
            self._frozen_fold = True
            gc.freeze()
        self.query_one("#content", ContentViewer).show(message.title, message.text)

    @on(SectionSelected)
    def _section_selected(self, message: SectionSelected) -> None:
        self._show_request = False
        self._load_content(message.section_id)
