"""The app's part that takes what the source sends (InspectorApp.arrivals): turns arriving (the timeline
extended, the alerts and the strip told, the start turn found, a burst of live turns drawn once at the
newest), start-up's end (the first frame drawn, then the rest of the load, the collector and the hidden
What-if controls, paced behind the person's keys), and the source's end (an agent gone or failed, a
source that cannot be read, a live agent's history filled in behind its first frame).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspector.app import InspectorApp

import time
from collections.abc import Callable

from textual.timer import Timer

from engine.wording import counted
from inspector import startup_gc
from inspector.messages import (
    EventsDropped,
    HistoryProgressed,
    HistoryRefreshed,
    SourceDisconnected,
    SourceFailed,
    TurnsReceived,
)
from inspector.screens import GoToTurnScreen, SaveScreen
from inspector.status import FINISHED, failed_head
from panels.alerts import AlertsPanel
from panels.timeline_strip import TimelineStrip

# Work deferred at start-up (the hidden What-if controls) goes on only after this long without a key
# press or click: a person's first steps are not slowed by it (a held arrow key repeats well within it).
INPUT_QUIET_S = 0.25
# How often, and how long, the app asks how an agent that went away ended (InspectorApp.agent_ended).
ENDED_ASK_S = 0.2
ENDED_WAIT_S = 5.0


class Arrivals:
    def __init__(self, app: InspectorApp) -> None:
        self.app = app
        self.newest_pending = False  # live turns are arriving: the newest is drawn once they are in
        self.first_chunk = False  # the source's first chunk arrived (start-up ends with its frame)
        self.first_frame_checks = 0  # frames drawn since, waiting for the footer's keys
        self.released = False  # the first screen is complete: the rest of the load and the collector went on
        self.ended_asks = 0  # how often the app has asked how the agent ended (ask_agent_ended)
        self.ended_timer: Timer | None = None
        self.ended_reason = ""  # the source's word for the end, said if how the agent ended is not learnt
        self.kept_where = ""  # where the turns received are kept, for the toast at the end

    def turns_received(self, message: TurnsReceived) -> None:
        app = self.app
        if app.viewer is None or not app.is_running or not app.viewer.is_attached:
            # The app is closing (its screens are pruned before its messages stop): turns the reader
            # posted meanwhile have nothing to go to (a query for the panels raised NoMatches). Shutdown
            # marks the app not running first, then prunes the widgets in no fixed order: the viewer
            # could still be attached with the Alerts panel gone (tests/tui/test_shutdown_turns.py).
            return
        view, timeline = app.view, app.view.timeline
        first = len(timeline)
        if not self.first_chunk:  # once its frame is drawn, the rest may load and the collector run
            self.first_chunk = True
            app.call_after_refresh(app.first_frame_drawn)
        timeline.extend(message.traces)
        self.count_for_save()
        if app.whatif_panel is not None:
            app.whatif_panel.set_received(len(timeline))
        app.query_one("#alerts", AlertsPanel).add_traces(message.traces, first)
        app.query_one("#strip", TimelineStrip).count = len(timeline)
        if not view.loaded and len(timeline):
            found = None if view.start_turn is None else timeline.index_of_turn(view.start_turn)
            if found is not None or not message.more:  # the start turn may be in a later chunk
                view.loaded = True
                if view.start_turn is not None:
                    timeline.go(found if found is not None else timeline.last)
        view.loading = message.more
        if not message.more:
            # A long recording leaves ~10^6 long-lived objects (summaries, alerts): move them out of the
            # cyclic GC's reach, or each full collection rescans them all mid-step (100+ ms pauses).
            startup_gc.freeze_app()
        if not message.more:
            app.whatif.shadow()  # cached by the source per journal length: cheap when nothing changed
        if app.index == timeline.current and not message.more and app.content_deferred:
            app.watch_index(app.index)  # the initial load is complete: now fetch the content
        if view.loaded and not message.more and timeline.follow and 0 <= app.index < timeline.current:
            # Live turns that arrive back to back are drawn once, at the newest: the callback runs after
            # the turns already queued, so a burst is one frame and the view does not fall behind a fast
            # agent drawing a frame for every turn in between.
            if not self.newest_pending:
                self.newest_pending = True
                app.call_later(self.show_newest)
            app.update_status()
            self.end_early_steps(message.more)
            return
        if len(timeline):
            # Not before the first turn: a live session attached before its first turn came answers
            # with no turns, and index 0 then (the timeline's current) left that turn undrawn when it
            # came (the index did not change): `cp-inspect run` showed "waiting for the first turn…"
            # beside "turn 0 (1/1)" until the agent's second call.
            app.index = timeline.current
        app.update_status()
        self.end_early_steps(message.more)

    def end_early_steps(self, more: bool) -> None:
        # Steps typed while nothing was shown run once the start turn is: the first turn of the first
        # chunk, or the turn asked for with --turn once its chunk is in (early_steps.py).
        app = self.app
        view = app.view
        if not app.early_steps.waiting:
            return
        if view.loaded or (len(view.timeline) and view.start_turn is None):
            app.early_steps.start_shown()
        elif not more:
            app.early_steps.nothing_to_show()

    def first_frame_drawn(self) -> None:
        # The first screen is complete once the footer's keys are drawn too: the footer lays them out when
        # the bindings settle, a frame or two after the first turn may already be on screen. Until then
        # nothing else starts (the rest of the load, the collector, the hidden What-if controls), or it
        # would hold that frame back.
        # The main screen's widgets are held from mount: a modal screen (help, go to) may be on top by now.
        app = self.app
        assert app.footer is not None and app.whatif_panel is not None
        keys = app.footer.children
        if (not keys or keys[-1].region.width == 0) and self.first_frame_checks < 10:
            self.first_frame_checks += 1
            app.call_after_refresh(app.first_frame_drawn)
            return
        app.reader.first_frame_drawn()
        startup_gc.release()
        self.released = True
        app.whatif_panel.add_controls(pace=self.when_input_quiet)
        self.check_startup_finished()

    def when_input_quiet(self, go: Callable[[], None]) -> None:
        """Call `go` once no key press or click has come for INPUT_QUIET_S: start-up's deferred work
        yields to the person's first steps, one small piece at a time."""
        app = self.app
        wait = app.last_input + INPUT_QUIET_S - time.monotonic()
        if wait > 0:
            app.set_timer(wait, lambda: self.when_input_quiet(go))
        else:
            app.call_later(go)  # behind the messages already queued: a key just pressed goes first

    def check_startup_finished(self) -> None:
        app = self.app
        assert app.whatif_panel is not None
        if self.released and app.whatif_panel.controls_ready and not app.startup_finished:
            app.startup_finished = True

    def show_newest(self) -> None:
        app = self.app
        self.newest_pending = False
        if app.timeline.follow:  # the person may have stepped back meanwhile: then stay there
            app.index = app.timeline.current
        app.update_status()

    def source_disconnected(self, message: SourceDisconnected) -> None:
        app = self.app
        app.disconnected = message.reason
        kept = app.source.header.get("recording")
        where = f"the agent's recording is kept at {kept}" if kept else "press s to save them"
        if not kept and app.save_on_quit:  # (attach --record: written when the inspector is left)
            where = f"they are written to {app.save_on_quit} when you quit"
        removed = getattr(app.source, "recording_removed", None)  # (a recording follower's: sources/live_recording)
        if kept and removed is not None and removed():
            # Removed while attached (the agent wrote it, and the follower read it, through open
            # descriptors): "kept at PATH" named a file that is gone. What was received can be saved (the
            # follower reads its open descriptor); the status line's banner says so too (no "recording").
            del app.source.header["recording"]
            where = f"the agent's recording {kept} was removed; press s to save them"
        self.kept_where = where
        if app.agent_ended is not None and message.reason != FINISHED:
            # The agent closes its socket a moment before its process ends (its probe flushes first, up
            # to ~2 s): asked a few times a second until it has, for at most ENDED_WAIT_S. The toast waits
            # for the answer: "Agent pid 4242 disconnected" over an agent that had run to its end read as
            # a connection lost (it is said so only if the process is still there when the asking stops).
            self.ended_asks = 0
            self.ended_reason = message.reason
            self.ended_timer = app.set_interval(ENDED_ASK_S, self.ask_agent_ended)
        else:
            self.say_kept(message.reason)

    def ask_agent_ended(self) -> None:
        app = self.app
        ended = app.agent_ended() if app.agent_ended is not None else None
        self.ended_asks += 1
        if ended is None and self.ended_asks * ENDED_ASK_S < ENDED_WAIT_S:
            return
        if self.ended_timer is not None:
            self.ended_timer.stop()
        app.agent_ended = None  # said once
        if ended is not None:
            # The status line: "Agent exited" (in the success colour for status 0), "Agent exited with
            # status 3" (a failure: it said "Agent disconnected", a connection lost, over it).
            app.disconnected = ended
        self.say_kept(ended if ended is not None else self.ended_reason)

    def say_kept(self, reason: str) -> None:
        """The toast at the end of a live session: who went and how, the turns kept and where. The reason
        leads, as a sentence ("agent pid 4242 disconnected", "connection lost: ...", "the agent's process
        has ended"): wrapped in "Agent disconnected (...)" it read "Agent disconnected (agent pid 4242
        disconnected)". An agent that failed ("the agent exited with status 3 (its output: FILE)") is one
        toast in the error colour, with where its output is."""
        app = self.app
        failed = failed_head(reason) is not None
        said = reason[:1].upper() + reason[1:]
        app.notify(
            f"{said}. {counted(len(app.timeline), 'turn')} kept; {self.kept_where}.",
            title="the agent failed" if failed else "",
            severity="error" if failed else "warning",
            timeout=15 if failed else 8,
            markup=False,
        )

    def source_failed(self, message: SourceFailed) -> None:
        app = self.app
        app.view.loading = False
        startup_gc.release()
        app.failed = message.error
        app.notify(message.error, title="cannot read the source", severity="error", timeout=30, markup=False)

    def count_for_save(self) -> None:
        app = self.app
        for screen in app.screen_stack:  # a save prompt open meanwhile counts what it would save
            if isinstance(screen, SaveScreen):
                screen.set_turns(len(app.timeline), app.disconnected is None)
            elif isinstance(screen, GoToTurnScreen) and len(app.timeline):
                # and a go-to prompt takes the turns that arrived while it was open
                screen.set_last(app.timeline.traces[-1]["turn"])

    def history_refreshed(self, message: HistoryRefreshed) -> None:
        # The history before a live agent's newest turn arrived after the first frame, into the turns
        # drawn for it (sources.HistoryFilled): what is worked out from every turn, again.
        app = self.app
        app.view.timeline.refresh()
        app.query_one("#alerts", AlertsPanel).reset(app.view.timeline.traces)
        app.query_one("#strip", TimelineStrip).restate()  # the stand-ins drawn were filled in place
        app.view.history = None
        app.update_status()

    def history_progressed(self, message: HistoryProgressed) -> None:
        # Part of that history is in: the strip draws those turns now (only they are worked out again),
        # and the status line says how far the rest has come.
        app = self.app
        done = app.view.history[0] if app.view.history else 0
        app.query_one("#strip", TimelineStrip).restate(message.first + done, message.first + message.filled)
        app.view.history = (message.filled, message.total)
        app.update_status()

    def events_dropped(self, message: EventsDropped) -> None:
        app = self.app
        app.view.dropped += message.count
        app.update_status()
