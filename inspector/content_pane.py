"""What the Content tab shows as the person steps (InspectorApp.pane): a section's document the content
worker prepared ahead shown in the step's own frame, the next turn prepared while the person looks, a
worker's text shown when it is still the one wanted, and a worker's failure said once. The fetching and
preparing are the worker's (content_loader.ContentLoader, InspectorApp.content).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspector.app import InspectorApp


from textual.worker import Worker, WorkerState

from engine.trace_schema import Trace
from inspector import startup_gc
from inspector.messages import (
    ContentLoaded,
)
from panels.content_viewer import DEFAULT_WIDTH, Screenful


class ContentPane:
    def __init__(self, app: InspectorApp) -> None:
        self.app = app
        self.frozen_fold = (
            False  # the journal folded for the first content view went out of the collector's reach
        )
        self.content_error: str | None = None  # the last content failure notified (said once, not per step)

    def show_prepared(self, trace: Trace, section: str) -> bool:
        """Show this turn's section in the step's own frame if it can be. A document the content worker
        prepared for this turn while the person looked at the previous one is shown, and then True:
        the worker need not fetch it. Else the same text as shown (tools, identity: same content hash)
        is retitled, and still fetched: the hash is the trace's word for the text, the worker's copy
        is the text, and it changes nothing when they agree."""
        app = self.app
        assert app.viewer is not None
        title, key = app.content.section_title(trace, section)
        note = app.content.section_note(trace, section)
        prepared = app.content.prepared(trace["turn"], section)
        if prepared is None:
            app.viewer.retitle(title, key, note)
            return False
        text, document = prepared
        app.viewer.show(title, text, document, document.dark, key, note)
        return True

    def prepare_ahead(self, index: int, section: str | None) -> None:
        app = self.app
        if index == app.index and not app.content.show_request:  # else a newer step or view asks itself
            self.load(section, stepping=True, shown=True)

    def load(self, section_id: str | None, stepping: bool = False, shown: bool = False) -> None:
        app = self.app
        trace = app.full_trace(app.index)
        if trace is not None:
            ahead = app.index + app.step_direction  # the turn the person would step to next
            ahead_turn = app.timeline.traces[ahead]["turn"] if 0 <= ahead < len(app.timeline) else None
            app.content.load(trace, section_id, stepping, ahead_turn, shown)

    def loaded(self, message: ContentLoaded) -> None:
        # Content comes from a worker and may land at any moment: under a modal screen (help, go to,
        # palette) or while the app is closing. The viewer is held from mount rather than looked up
        # here (a lookup resolved against whatever screen is current raised NoMatches: issue 15.8),
        # and a message that outlives the main screen is dropped.
        app = self.app
        viewer = app.viewer
        if viewer is None or not viewer.is_attached:
            return
        if message.title != app.content.wanted:
            # A worker that a step replaced had already posted: the step may have shown its own
            # turn at once (no later message would put it back), so an older turn is dropped.
            return
        if not self.frozen_fold:  # the journal folded for the first content view is long-lived too
            self.frozen_fold = True
            startup_gc.freeze_app()
        viewer.show(message.title, message.text, message.document, message.dark, message.key, message.note)
        if app.step_timing is not None:
            app.step_timing.content_shown()

    def worker_state_changed(self, event: Worker.StateChanged) -> None:
        # The content worker does not stop the app when it fails (exit_on_error=False), so a failure
        # would leave the previous turn's text on screen under its own title with no word of why.
        app = self.app
        if event.worker.group != "content":
            return
        if event.state == WorkerState.ERROR:
            error = f"{type(event.worker.error).__name__}: {event.worker.error}"
            if error != self.content_error:
                self.content_error = error
                app.notify(
                    error, title="cannot show this content", severity="error", timeout=10, markup=False
                )
        elif event.state == WorkerState.SUCCESS:
            self.content_error = None

    def width(self) -> int:
        app = self.app
        return app.viewer.wrap_width if app.viewer is not None else DEFAULT_WIDTH

    def screen(self) -> Screenful | None:
        app = self.app
        return app.viewer.first_screen() if app.viewer is not None and app.viewer.is_mounted else None
