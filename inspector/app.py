"""cp-inspect's Textual app: one Source feeds one Timeline; panels render the current turn.

Data flow (as memray's live view and posting do it): a thread worker reads `source.follow()` and
posts small messages; handlers update the Timeline and the `index` reactive; the watcher hands the
current trace to each panel's reactives. Nothing that may block (socket, file, re-plan) runs on the
UI thread, and only the current turn is ever drawn, so a 10,000-turn recording opens quickly.

The app holds a few named collaborators instead of a mixin chain: `view` (SessionView: source,
timeline, loading state), `reader` (SourceReader: the source's worker), `content` (ContentLoader:
section text and request bodies) and `whatif` (WhatIfRunner: re-plans and session-wide what-ifs).
The app itself keeps the bindings, the reactives and the message handlers that tie them together.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from textual import events, on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.driver import Driver
from textual.events import Resize
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, TabbedContent, TabPane
from textual.worker import Worker, WorkerState

from engine.errors import ContextPipeError
from engine.trace_schema import Trace
from engine.wording import counted
from inspector import startup_gc, young_gc
from inspector.content_loader import ContentLoader
from inspector.content_search import LEAVES, describe
from inspector.early_steps import EarlySteps
from inspector.key_order import KeyOrder
from inspector.key_route import run_step_key, step_keys
from inspector.keys_footer import KeysFooter
from inspector.messages import (
    ContentLoaded,
    EventsDropped,
    HistoryProgressed,
    HistoryRefreshed,
    ReplanFinished,
    ShadowLoaded,
    SimulationFinished,
    SourceDisconnected,
    SourceFailed,
    TurnsReceived,
    WhyMissed,
)
from inspector.partial_compositor import MainScreen
from inspector.recording_open import salvage_advice
from inspector.screens import GoToTurnScreen, HelpScreen, SaveScreen, SearchScreen
from inspector.search_runner import SearchDone, SearchProgress, SearchRunner
from inspector.session_view import NARROW_BELOW, SPARK_TURNS, SPEEDS, SessionView
from inspector.source_reader import SourceReader
from inspector.sources import Source
from inspector.status import EXITED, FINISHED, SESSION_ENDED, status_parts, status_whole
from inspector.step_timing import StepTiming
from inspector.terminal_driver import driver_for
from inspector.timeline import Timeline
from inspector.whatif_runner import WhatIfRunner
from panels.alerts import AlertsPanel
from panels.cache_layout import CacheLayoutPanel
from panels.content_viewer import DEFAULT_WIDTH, ContentViewer, Screenful
from panels.detail_tabs import DetailTabs
from panels.keys import SECTION_GROUP, TURN_GROUP
from panels.manifest import ManifestPanel, SectionSelected
from panels.markup_line import MarkupLine
from panels.navigation import JumpToTurn
from panels.pressure import PressurePanel
from panels.shadow import ShadowPanel
from panels.skipped import SkippedPanel
from panels.tier import TierPanel
from panels.timeline_strip import TimelineStrip
from panels.whatif import ReplanRequested, WhatIfPanel
from panels.why_miss import WhyMissPanel
from themes import DEFAULT_VARIABLES, THEMES, pick_theme

__all__ = ["InspectorApp", "SPEEDS", "main"]

# Work deferred at start-up (the hidden What-if controls) goes on only after this long without a key
# press or click: a person's first steps are not slowed by it (a held arrow key repeats well within it).
INPUT_QUIET_S = 0.25
# Rows below which the detail tabs get no room to show anything beside the overview, strips and manifest
# (stacked: 16 fixed rows, and the tab strip takes 2 of what is left; side by side: 22 fixed rows). There a
# detail tab chosen by its key takes the screen (`zoom`) until Esc brings the overview back.
SHORT_BELOW_NARROW = 24
SHORT_BELOW_WIDE = 30


# How often, and how long, the app asks how an agent that went away ended (InspectorApp.agent_ended).
ENDED_ASK_S = 0.2
ENDED_WAIT_S = 5.0


class InspectorApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "ContextPipe Inspector"
    # Below this width the footer's right-docked "^p palette" hint draws over its last keys (a live
    # footer's end at column 67, and the hint takes 11): it gives way there; Ctrl+P still opens the palette.
    PALETTE_HINT_MIN_WIDTH = 80
    BINDINGS = [
        # First, so that the footer (in binding order) shows it even at 40 columns while a tab is zoomed;
        # hidden otherwise (check_action), when Esc goes on to focus the manifest.
        Binding("escape", "unzoom", "Back", tooltip="short terminal: leave the detail tab for the overview"),
        Binding("left", "step(-1)", "Prev", tooltip="previous turn", group=TURN_GROUP),
        Binding("right", "step(1)", "Next", tooltip="next turn", group=TURN_GROUP),
        Binding("home", "first", "First", show=False, tooltip="first turn"),
        Binding("end", "last", "Last", show=False, tooltip="last turn (and follow the newest, live)"),
        # While a tab is zoomed the manifest is hidden (and loses focus), so ↑/↓ had nothing to move: here
        # they move its selection and the Content tab shows the section (hidden otherwise: check_action).
        Binding("up", "section(-1)", "Prev section", tooltip="short terminal, tab zoomed: the previous section",
                group=SECTION_GROUP),
        Binding("down", "section(1)", "Next section", tooltip="short terminal, tab zoomed: the next section",
                group=SECTION_GROUP),
        Binding("g", "goto", "Go to", tooltip="go to turn N"),
        # n/N are the interesting turns': the search's next/previous are f/F (shown in its bar and in help).
        Binding("f", "find(1)", "Next match", show=False,
                tooltip="next turn the searched text enters or leaves the prompt"),
        Binding("F", "find(-1)", "Previous match", show=False,
                tooltip="previous turn the searched text enters or leaves the prompt"),
        Binding("space", "play", "Play", tooltip="play / pause"),
        Binding("plus,equals_sign", "speed(1)", "Faster", show=False, tooltip="play faster"),
        Binding("minus", "speed(-1)", "Slower", show=False, tooltip="play slower"),
        Binding("n,right_square_bracket", "next_interesting", "Next ★",
                tooltip="next interesting turn (tier change, cache break, alert)"),
        Binding("N,left_square_bracket", "prev_interesting", "Prev ★", show=False,
                tooltip="previous interesting turn"),
        Binding("c", "content", "Content", show=False, tooltip="show the Content tab"),
        Binding("w", "tab('tab-whatif')", "What-if", tooltip="show the What-if tab (again: focus its first slider)"),
        Binding("W", "session_whatif", "Session what-if", show=False,
                tooltip="session-wide what-if: re-run and price the whole session (toggle)"),
        Binding("k", "tab('tab-skipped')", "Skipped", show=False, tooltip="show the Skipped tab"),
        Binding("a", "tab('tab-alerts')", "Alerts", show=False, tooltip="show the Alerts tab"),
        Binding("r", "tab('tab-shadow')", "Shadow", show=False,
                tooltip="shadow rollout: the candidate configuration beside the live one (when recorded)"),
        Binding("m", "tab('tab-why')", "Why miss", show=False,
                tooltip="why the cache missed: this request against the previous one"),
        Binding("b", "request_body", "Request", show=False, tooltip="show the serialized request body"),
        Binding("s", "save", "Save", tooltip="save the received turns (live)"),
        # `s` in a replay (check_action hides the one above there): it did nothing, silently. No tooltip:
        # help and the palette list `s` once, by the binding above.
        Binding("s", "save_replay", show=False),
        # While a search runs Esc stops it; once it has answered, Esc puts the search away (check_action:
        # with no search, Esc goes on to focus the manifest).
        Binding("escape", "search_escape", "Stop search", show=False),
        Binding("escape", "focus_manifest", "Sections", show=False, tooltip="focus the section manifest"),
        Binding("question_mark", "help", "Help", tooltip="this help"),
        Binding("q", "quit", "Quit", tooltip="quit"),
        # After Quit: the footer shows keys in this order and hides those it has no room for, and an 80-column
        # live footer (s Save) has none left for it; Quit stays. `?` and the palette list it.
        Binding("slash", "search", "Find", key_display="/",
                tooltip="search what each turn sent: the turns a text enters or leaves the prompt"),
    ]

    # The app draws nothing itself: its watchers hand values to the panels, which refresh what they
    # show. A repainting reactive here would repaint the whole screen on every step (a full update
    # of every widget, most of a step's time), so none of these repaints.
    index: reactive[int] = reactive(-1, init=False, repaint=False)  # position in the timeline, -1 before data
    playing: reactive[bool] = reactive(False, init=False, repaint=False)
    speed: reactive[int] = reactive(1, init=False, repaint=False)  # index into SPEEDS
    disconnected: reactive[str | None] = reactive(None, init=False, repaint=False)
    failed: reactive[str | None] = reactive(None, init=False, repaint=False)  # the source could not be read
    saved_to: reactive[str | None] = reactive(None, init=False, repaint=False)  # where `s` last saved it
    saved_turns: int | None = None  # how many turns that save holds
    # How the agent ended, once it has (None while it runs): set by a command that started the agent
    # and so knows its exit status (demo, run). An agent that finished is then "Agent exited", not the
    # red "Agent disconnected" over a demo that ran to its end; an attached agent's status is unknown.
    agent_ended: Callable[[], str | None] | None = None
    _ended_asks = 0
    _ended_timer: Timer | None = None

    def __init__(self, source: Source, theme: str | None = None, start_turn: int | None = None) -> None:
        super().__init__()
        self.view = SessionView(source, start_turn)
        self.reader = SourceReader(self, source)
        self.content = ContentLoader(self, source, self._content_width, self._content_screen)
        self.whatif = WhatIfRunner(self, source)
        self.search = SearchRunner(self, source)
        self._play_timer: Timer | None = None
        self._content_deferred = False  # a step arrived while the initial load was still decoding
        self._newest_pending = False  # live turns are arriving: the newest is drawn once they are in
        self._frozen_fold = False
        self._theme_warning: str | None = None
        self._shadow_tab = False  # the Shadow tab is added once the source shows a shadow rollout
        self._short = False  # too few rows for the detail tabs beside the rest (_apply_size)
        self._zoom = False  # a detail tab has the screen (short terminals only)
        self._viewer: ContentViewer | None = None  # the main screen's content viewer, from mount
        self._last_index = -1  # the turn shown before, and the way the person steps (+1 or -1): the
        self._direction = 1  # content worker prepares the next turn that way while they look
        self._content_error: str | None = None  # the last content failure notified (said once, not per step)
        self._status_drawn = False  # watch_index drew the status line for the index _go set
        self._first_chunk = False  # the source's first chunk arrived (start-up ends with its frame)
        self._first_frame_checks = 0  # frames drawn since, waiting for the footer's keys
        self._footer: Footer | None = None  # the main screen's footer and What-if panel, from mount
        self._whatif: WhatIfPanel | None = None
        self._released = False  # the first screen is complete: the rest of the load and the collector went on
        self._last_input = 0.0  # monotonic time of the last key press or click (INPUT_QUIET_S)
        # True once start-up is over: the first screen complete, the rest of the load let go, and the
        # hidden What-if controls mounted. Until then the app is still doing deferred work between the
        # person's key presses; tests that time or count a step wait for it (tests/tui/conftest.settle).
        self.startup_finished = False
        # CONTEXTPIPE_STEP_TIMING=FILE: each key press's UI CPU and wall up to its frame, as JSON lines.
        self.step_timing = StepTiming.from_env(lambda: (self.size.width, self.size.height),
                                               self.call_after_refresh)
        # Keys bound to stepping turns: routed to their binding at once when no widget would see them.
        self._step_keys = step_keys(list(self.BINDINGS))
        # Steps typed before the start turn is on screen run once it is (early_steps.py).
        self._early_steps = EarlySteps()
        # Keys read together are handled in order, each where focus is once the one before is done.
        self._key_order = KeyOrder(self)
        for t in THEMES:
            self.register_theme(t)
        wanted = theme or os.environ.get("TEXTUAL_THEME")
        origin = "" if theme else "$TEXTUAL_THEME"
        self.theme, self._theme_warning = pick_theme(wanted, self.available_themes, origin)

    def get_default_screen(self) -> Screen:
        # A step changes rows at the top and the bottom of the screen: MainScreen's compositor renders
        # only the widgets and rows that changed, not everything in between (partial_compositor.py).
        return MainScreen(id="_default")

    def get_driver_class(self) -> type[Driver]:
        return driver_for(super().get_driver_class())  # one that survives its terminal closing

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {**super().get_theme_variable_defaults(), **DEFAULT_VARIABLES}

    def compose(self) -> ComposeResult:
        with Vertical(id="root"):
            yield MarkupLine(id="status")
            with Horizontal(id="overview"):
                yield PressurePanel(id="pressure")
                yield TierPanel(id="tier")
            yield CacheLayoutPanel(id="cache")
            yield TimelineStrip(id="strip")
            with Horizontal(id="main"):
                yield ManifestPanel(id="manifest")
                with DetailTabs(id="details", initial="tab-content"):
                    with TabPane("Content", id="tab-content"):
                        yield ContentViewer(id="content")
                    with TabPane("What-if", id="tab-whatif"):
                        yield WhatIfPanel(id="whatif")
                    with TabPane("Skipped", id="tab-skipped"):
                        yield SkippedPanel(id="skipped")
                    with TabPane("Alerts", id="tab-alerts"):
                        yield AlertsPanel(id="alerts")
                    with TabPane("Why miss", id="tab-why"):
                        yield WhyMissPanel(id="why")
            yield MarkupLine(id="search-bar")  # (shown while a search is on: `/`)
        yield KeysFooter(compact=True)  # (recomposed only when its keys change: keys_footer.py)

    def on_mount(self) -> None:
        self._viewer = self.query_one("#content", ContentViewer)
        self._footer, self._whatif = self.query_one(Footer), self.query_one("#whatif", WhatIfPanel)
        # What every step updates, held from mount: ten look-ups by id a step were ~0.3 ms of it.
        self._pressure, self._tier = self.query_one("#pressure", PressurePanel), self.query_one("#tier", TierPanel)
        self._cache_panel = self.query_one("#cache", CacheLayoutPanel)
        self._skipped, self._strip = self.query_one("#skipped", SkippedPanel), self.query_one("#strip", TimelineStrip)
        self._manifest, self._status = self.query_one("#manifest", ManifestPanel), self.query_one("#status", MarkupLine)
        # The status line fits its parts to its width (status_parts): laid out at another, drawn again.
        self._status.on_width = lambda _width: self._update_status()
        # Hovering the status line shows what it cut (and the file or command it never shows whole).
        self._status.whole = lambda: "\n".join(self.status_whole()) or None
        self.query_one("#strip", TimelineStrip).traces = self.timeline.traces
        self._apply_size(self.size.width, self.size.height)
        self._update_status()
        # Every notification that names something from outside (a theme, a path, an error, a reason) is
        # plain text: as markup, `[b]` in it was styled away and `[/]` raised MarkupError in the toast
        # and ended the app.
        if self._theme_warning:
            self.notify(self._theme_warning, severity="warning", markup=False)
        damage = self.source.header.get("damage")
        if damage:  # a recovered tail or a rebuilt index: said on screen, not only after quitting
            path = self.source.header.get("path")
            # What to do about it, as verify says it: the turns shown are whole, salvage makes a clean copy.
            advice = f"; the turns shown are whole: {salvage_advice(path)}" if path else ""
            self.notify(f"recording damaged: {damage}{advice}", severity="warning", timeout=12, markup=False)
        self.query_one("#manifest").focus()
        first = self.reader.start()
        if first is not None:  # a recording's first chunk, read now: the first frame shows its turns
            self._turns_received(TurnsReceived(first.traces, more=first.more))

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseDown)) and not event.is_forwarded:
            self._last_input = time.monotonic()
            if isinstance(event, events.Key):
                if self._key_order.hold(event):  # a key before it is still on its way (key_order.py)
                    return
                if self.step_timing is not None:
                    self.step_timing.key(event.key, event.time)
                if await run_step_key(self, event, self._step_keys):
                    return
                target = self.focused or self.screen  # where Textual forwards a key no priority binding took
                await super().on_event(event)
                if event.is_forwarded:
                    self._key_order.forwarded(target)
                return
        await super().on_event(event)

    def on_unmount(self) -> None:
        startup_gc.release()
        young_gc.restore()
        # The source's file or socket (and ring) closed: at once, or by the reader thread as it ends (the
        # quit cancelled it). Then what the app froze goes back to the collector (startup_gc.thaw): an app
        # that exits inside a process that goes on (top's attach and return, the tests) is collected.
        self.workers.cancel_group(self, "source")
        self.search.clear()
        self.reader.close_source()
        startup_gc.thaw()
        if self.step_timing is not None:
            self.step_timing.close()

    @property
    def source(self) -> Source:
        return self.view.source

    @property
    def timeline(self) -> Timeline:
        return self.view.timeline

    def full_trace(self, index: int) -> Trace | None:
        return self.view.full_trace(index)

    # ---- current turn -------------------------------------------------------------------------

    def watch_index(self, index: int) -> None:
        young_gc.raise_threshold()  # a step allocates thousands of short-lived objects (young_gc.py)
        trace = self.full_trace(index)
        if trace is None:
            return
        recent = self.timeline.traces[max(0, index - SPARK_TURNS): index + 1]
        pressure = self._pressure
        pressure.recent = [(t["pressure"]["predictive"], t["tier"]) for t in recent]
        pressure.trace = trace
        self._tier.trace = trace
        self._cache_panel.trace = trace
        self._skipped.trace = trace
        whatif = self._whatif
        assert whatif is not None
        whatif.trace = trace
        self._strip.current = index
        manifest = self._manifest
        manifest.show(trace)
        if self.search.scan is not None:  # the sections that hold the searched text, where it is known
            counts = self.search.scan.at(index)
            manifest.set_marked(frozenset(counts or ()))
        # While a long recording is still loading, the source is busy decoding: content comes after.
        self._content_deferred = self.view.loading
        if index != self._last_index:
            self._direction = -1 if index < self._last_index else 1
            self._last_index = index
        if not self.view.loading:
            section = manifest.selected_section()
            shown = False
            if section is not None and not self.content.show_request and self._viewer is not None:
                shown = self._show_prepared(trace, section)
            if shown:
                assert section is not None
                # What a worker still running for an earlier turn posts is dropped from now on.
                self.content.wanted = self.content.section_title(trace, section)[0]
                # Nothing to fetch for this turn: the worker only prepares the next one. Started after
                # this step's frame is written, so neither starting it (a worker, its state messages)
                # nor its thread (the GIL) delays the frame the person is waiting for.
                self.call_after_refresh(self._prepare_ahead, index, section)
            else:
                self._load_content(section, stepping=True)
            if self.step_timing is not None:
                expects = self.content.show_request or (section is not None and not shown)
                self.step_timing.stepped(index, trace["turn"], section, shown, expects)
        self._refresh_why()
        if self._shadow_tab:
            self.query_one("#shadow", ShadowPanel).turn = trace["turn"]
        overrides = whatif.overrides()
        if not overrides.is_empty() and not whatif.session:  # session-wide results do not depend on the turn
            self.whatif.replan(index, trace["turn"], overrides)
        self._update_status()
        self._status_drawn = True

    def _update_status(self) -> None:
        parts = status_parts(
            self.view, self.index, self.playing, self.speed, self.disconnected, self.failed, self.saved_to,
            self._status.content_region.width or None, saved_turns=self.saved_turns,
        )
        self._status.update(parts)  # a no-op when the parts are the same

    def status_whole(self) -> list[str]:
        """The status line whole, when the terminal cuts it, and the source's file or command (status_whole)."""
        return status_whole(
            self.view, self.index, self.playing, self.speed, self.disconnected, self.failed, self.saved_to,
            self._status.content_region.width or None, saved_turns=self.saved_turns,
        )

    def _go(self, index: int | None) -> None:
        if index is not None:
            self._status_drawn = False
            self.index = index
            # A new index has just drawn the status line (watch_index, synchronously): building its
            # parts again to find them unchanged was ~0.5 ms of every step. The same index (a step
            # past either end, live follow switched) still updates it here.
            if not self._status_drawn:
                self._update_status()

    # ---- the source ---------------------------------------------------------------------------

    @on(TurnsReceived)
    def _turns_received(self, message: TurnsReceived) -> None:
        if self._viewer is None or not self.is_running or not self._viewer.is_attached:
            # The app is closing (its screens are pruned before its messages stop): turns the reader
            # posted meanwhile have nothing to go to (a query for the panels raised NoMatches). Shutdown
            # marks the app not running first, then prunes the widgets in no fixed order: the viewer
            # could still be attached with the Alerts panel gone (tests/tui/test_shutdown_turns.py).
            return
        view, timeline = self.view, self.view.timeline
        first = len(timeline)
        if not self._first_chunk:  # once its frame is drawn, the rest may load and the collector run
            self._first_chunk = True
            self.call_after_refresh(self._first_frame_drawn)
        timeline.extend(message.traces)
        self._count_for_save()
        if self._whatif is not None:
            self._whatif.set_received(len(timeline))
        self.query_one("#alerts", AlertsPanel).add_traces(message.traces, first)
        self.query_one("#strip", TimelineStrip).count = len(timeline)
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
            self.whatif.shadow()  # cached by the source per journal length: cheap when nothing changed
        if self.index == timeline.current and not message.more and self._content_deferred:
            self.watch_index(self.index)  # the initial load is complete: now fetch the content
        if view.loaded and not message.more and timeline.follow and 0 <= self.index < timeline.current:
            # Live turns that arrive back to back are drawn once, at the newest: the callback runs after
            # the turns already queued, so a burst is one frame and the view does not fall behind a fast
            # agent drawing a frame for every turn in between.
            if not self._newest_pending:
                self._newest_pending = True
                self.call_later(self._show_newest)
            self._update_status()
            self._end_early_steps(message.more)
            return
        if len(timeline):
            # Not before the first turn: a live session attached before its first turn came answers
            # with no turns, and index 0 then (the timeline's current) left that turn undrawn when it
            # came (the index did not change): `cp-inspect run` showed "waiting for the first turn…"
            # beside "turn 0 (1/1)" until the agent's second call.
            self.index = timeline.current
        self._update_status()
        self._end_early_steps(message.more)

    def _end_early_steps(self, more: bool) -> None:
        # Steps typed while nothing was shown run once the start turn is: the first turn of the first
        # chunk, or the turn asked for with --turn once its chunk is in (early_steps.py).
        view = self.view
        if not self._early_steps.waiting:
            return
        if view.loaded or (len(view.timeline) and view.start_turn is None):
            self._early_steps.start_shown()
        elif not more:
            self._early_steps.nothing_to_show()

    def _first_frame_drawn(self) -> None:
        # The first screen is complete once the footer's keys are drawn too: the footer lays them out when
        # the bindings settle, a frame or two after the first turn may already be on screen. Until then
        # nothing else starts (the rest of the load, the collector, the hidden What-if controls), or it
        # would hold that frame back.
        # The main screen's widgets are held from mount: a modal screen (help, go to) may be on top by now.
        assert self._footer is not None and self._whatif is not None
        keys = self._footer.children
        if (not keys or keys[-1].region.width == 0) and self._first_frame_checks < 10:
            self._first_frame_checks += 1
            self.call_after_refresh(self._first_frame_drawn)
            return
        self.reader.first_frame_drawn()
        startup_gc.release()
        self._released = True
        self._whatif.add_controls(pace=self._when_input_quiet)
        self._check_startup_finished()

    def _when_input_quiet(self, go: Callable[[], None]) -> None:
        """Call `go` once no key press or click has come for INPUT_QUIET_S: start-up's deferred work
        yields to the person's first steps, one small piece at a time."""
        wait = self._last_input + INPUT_QUIET_S - time.monotonic()
        if wait > 0:
            self.set_timer(wait, lambda: self._when_input_quiet(go))
        else:
            self.call_later(go)  # behind the messages already queued: a key just pressed goes first

    @on(WhatIfPanel.ControlsReady)
    def _check_startup_finished(self) -> None:
        assert self._whatif is not None
        if self._released and self._whatif.controls_ready and not self.startup_finished:
            self.startup_finished = True

    def _show_newest(self) -> None:
        self._newest_pending = False
        if self.timeline.follow:  # the person may have stepped back meanwhile: then stay there
            self.index = self.timeline.current
        self._update_status()

    @on(SourceDisconnected)
    def _source_disconnected(self, message: SourceDisconnected) -> None:
        self.disconnected = message.reason
        kept = self.source.header.get("recording")
        where = f"the agent's recording is kept at {kept}" if kept else "press s to save them"
        # The reason says who went and how ("agent pid 4242 disconnected", "connection lost: ..."): it leads,
        # as a sentence. Wrapped in "Agent disconnected (...)" it read "Agent disconnected (agent pid 4242
        # disconnected)".
        reason = message.reason[:1].upper() + message.reason[1:]
        self.notify(f"{reason}. {counted(len(self.timeline), 'turn')} kept; {where}.", severity="warning", timeout=8, markup=False)
        if self.agent_ended is not None and message.reason != FINISHED:
            # The agent closes its socket a moment before its process ends (its probe flushes first, up
            # to ~2 s): asked a few times a second until it has, for at most ENDED_WAIT_S.
            self._ended_asks = 0
            self._ended_timer = self.set_interval(ENDED_ASK_S, self._ask_agent_ended)

    def _ask_agent_ended(self) -> None:
        ended = self.agent_ended() if self.agent_ended is not None else None
        self._ended_asks += 1
        if ended is None and self._ended_asks * ENDED_ASK_S < ENDED_WAIT_S:
            return
        if self._ended_timer is not None:
            self._ended_timer.stop()
        self.agent_ended = None  # said once
        if ended in (FINISHED, EXITED, SESSION_ENDED):
            self.disconnected = ended  # the status line: "Agent exited" (in the success colour for status 0)
        elif ended is not None:
            self.notify(ended[:1].upper() + ended[1:], title="the agent failed", severity="error", timeout=15,
                        markup=False)

    @on(SourceFailed)
    def _source_failed(self, message: SourceFailed) -> None:
        self.view.loading = False
        startup_gc.release()
        self.failed = message.error
        self.notify(message.error, title="cannot read the source", severity="error", timeout=30,
                    markup=False)

    def watch_disconnected(self) -> None:
        self._update_status()
        self._count_for_save()  # the agent is gone: an open save prompt's count is final

    def _count_for_save(self) -> None:
        for screen in self.screen_stack:  # a save prompt open meanwhile counts what it would save
            if isinstance(screen, SaveScreen):
                screen.set_turns(len(self.timeline), self.disconnected is None)
            elif isinstance(screen, GoToTurnScreen) and len(self.timeline):
                # and a go-to prompt takes the turns that arrived while it was open
                screen.set_last(self.timeline.traces[-1]["turn"])

    def watch_failed(self) -> None:
        self._update_status()

    def watch_saved_to(self) -> None:
        self._update_status()

    @on(HistoryRefreshed)
    def _history_refreshed(self, message: HistoryRefreshed) -> None:
        # The history before a live agent's newest turn arrived after the first frame, into the turns
        # drawn for it (sources.HistoryFilled): what is worked out from every turn, again.
        self.view.timeline.refresh()
        self.query_one("#alerts", AlertsPanel).reset(self.view.timeline.traces)
        self.query_one("#strip", TimelineStrip).restate()  # the stand-ins drawn were filled in place
        self.view.history = None
        self._update_status()

    @on(HistoryProgressed)
    def _history_progressed(self, message: HistoryProgressed) -> None:
        # Part of that history is in: the strip draws those turns now (only they are worked out again),
        # and the status line says how far the rest has come.
        done = self.view.history[0] if self.view.history else 0
        self.query_one("#strip", TimelineStrip).restate(message.first + done, message.first + message.filled)
        self.view.history = (message.filled, message.total)
        self._update_status()

    @on(EventsDropped)
    def _events_dropped(self, message: EventsDropped) -> None:
        self.view.dropped += message.count
        self._update_status()

    # ---- content ------------------------------------------------------------------------------

    def _show_prepared(self, trace: Trace, section: str) -> bool:
        """Show this turn's section in the step's own frame if it can be. A document the content worker
        prepared for this turn while the person looked at the previous one is shown, and then True:
        the worker need not fetch it. Else the same text as shown (tools, identity: same content hash)
        is retitled, and still fetched: the hash is the trace's word for the text, the worker's copy
        is the text, and it changes nothing when they agree."""
        assert self._viewer is not None
        title, key = self.content.section_title(trace, section)
        note = self.content.section_note(trace, section)
        prepared = self.content.prepared(trace["turn"], section)
        if prepared is None:
            self._viewer.retitle(title, key, note)
            return False
        text, document = prepared
        self._viewer.show(title, text, document, document.dark, key, note)
        return True

    def _prepare_ahead(self, index: int, section: str | None) -> None:
        if index == self.index and not self.content.show_request:  # else a newer step or view asks itself
            self._load_content(section, stepping=True, shown=True)

    def _load_content(self, section_id: str | None, stepping: bool = False, shown: bool = False) -> None:
        trace = self.full_trace(self.index)
        if trace is not None:
            ahead = self.index + self._direction  # the turn the person would step to next
            ahead_turn = self.timeline.traces[ahead]["turn"] if 0 <= ahead < len(self.timeline) else None
            self.content.load(trace, section_id, stepping, ahead_turn, shown)

    @on(ContentLoaded)
    def _content_loaded(self, message: ContentLoaded) -> None:
        # Content comes from a worker and may land at any moment: under a modal screen (help, go to,
        # palette) or while the app is closing. The viewer is held from mount rather than looked up
        # here (a lookup resolved against whatever screen is current raised NoMatches: issue 15.8),
        # and a message that outlives the main screen is dropped.
        viewer = self._viewer
        if viewer is None or not viewer.is_attached:
            return
        if message.title != self.content.wanted:
            # A worker that a step replaced had already posted: the step may have shown its own
            # turn at once (no later message would put it back), so an older turn is dropped.
            return
        if not self._frozen_fold:  # the journal folded for the first content view is long-lived too
            self._frozen_fold = True
            startup_gc.freeze_app()
        viewer.show(message.title, message.text, message.document, message.dark, message.key, message.note)
        if self.step_timing is not None:
            self.step_timing.content_shown()

    @on(Worker.StateChanged)
    def _worker_state_changed(self, event: Worker.StateChanged) -> None:
        # The content worker does not stop the app when it fails (exit_on_error=False), so a failure
        # would leave the previous turn's text on screen under its own title with no word of why.
        if event.worker.group != "content":
            return
        if event.state == WorkerState.ERROR:
            error = f"{type(event.worker.error).__name__}: {event.worker.error}"
            if error != self._content_error:
                self._content_error = error
                self.notify(error, title="cannot show this content", severity="error", timeout=10,
                            markup=False)
        elif event.state == WorkerState.SUCCESS:
            self._content_error = None

    def _content_width(self) -> int:
        return self._viewer.wrap_width if self._viewer is not None else DEFAULT_WIDTH

    def _content_screen(self) -> Screenful | None:
        return self._viewer.first_screen() if self._viewer is not None and self._viewer.is_mounted else None

    @on(SectionSelected)
    def _section_selected(self, message: SectionSelected) -> None:
        self.content.show_request = False
        self._load_content(message.section_id)

    # ---- what-if ------------------------------------------------------------------------------

    @on(ReplanRequested)
    def _replan_requested(self, message: ReplanRequested) -> None:
        whatif = self.query_one("#whatif", WhatIfPanel)
        if message.session:
            self.whatif.cancel(session=False)
            self.whatif.simulate(message.overrides)
        elif message.overrides.is_empty():
            self.whatif.cancel()
            whatif.result = None
        elif self.index >= 0:
            self.whatif.replan(self.index, self.timeline.traces[self.index]["turn"], message.overrides)

    @on(SimulationFinished)
    def _simulation_finished(self, message: SimulationFinished) -> None:
        whatif = self.query_one("#whatif", WhatIfPanel)
        if not whatif.session or message.overrides != whatif.overrides():
            return
        if message.error is not None:
            whatif.show_error(f"session-wide what-if failed: {message.error}")
        else:
            whatif.session_result = message.report

    @on(ReplanFinished)
    def _replan_finished(self, message: ReplanFinished) -> None:
        whatif = self.query_one("#whatif", WhatIfPanel)
        if message.index != self.index or message.overrides != whatif.overrides():
            return
        if message.trace is None:
            whatif.result = None
            whatif.show_error(f"cannot re-plan this turn: {message.error}")
            return
        actual = self.full_trace(message.index)
        if actual is not None:
            whatif.result = (actual, message.trace)

    # ---- why the cache missed (two re-plans per turn: only while its tab is showing) ---------------

    def _refresh_why(self) -> None:
        if self.index < 0 or self.query_one("#details", TabbedContent).active != "tab-why":
            return
        self.query_one("#why", WhyMissPanel).why = None
        self.whatif.why_missed(self.index, self.timeline.traces[self.index]["turn"])

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "tab-whatif":  # shown by a click on its tab
            self.whatif.warm()
            self.query_one("#whatif", WhatIfPanel).sync()
        elif event.pane.id == "tab-why":
            self._refresh_why()

    @on(ShadowLoaded)
    async def _shadow_loaded(self, message: ShadowLoaded) -> None:
        if message.summary is None:
            return
        if not self._shadow_tab:
            await self.query_one("#details", TabbedContent).add_pane(
                TabPane("Shadow", ShadowPanel(id="shadow"), id="tab-shadow")
            )
            self._shadow_tab = True
        panel = self.query_one("#shadow", ShadowPanel)
        panel.summary = message.summary
        if self.index >= 0:
            panel.turn = self.timeline.traces[self.index]["turn"]

    @on(WhyMissed)
    def _why_missed(self, message: WhyMissed) -> None:
        if message.index == self.index:
            self.query_one("#why", WhyMissPanel).why = message.why

    # ---- stepping -----------------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        self._early_steps.run_or_hold(lambda: self._go(self.timeline.step(delta)))

    def action_first(self) -> None:
        self._early_steps.run_or_hold(lambda: self._go(self.timeline.go(0)))

    def action_last(self) -> None:
        self._early_steps.run_or_hold(lambda: self._go(self.timeline.go(self.timeline.last)))

    def action_next_interesting(self) -> None:
        self._early_steps.run_or_hold(self._next_interesting)

    def action_prev_interesting(self) -> None:
        self._early_steps.run_or_hold(self._prev_interesting)

    def _next_interesting(self) -> None:
        if self.timeline.next_interesting() is None:
            self.notify("no later interesting turn", timeout=2)
        self._go(self.timeline.current)

    def _prev_interesting(self) -> None:
        if self.timeline.prev_interesting() is None:
            self.notify("no earlier interesting turn", timeout=2)
        self._go(self.timeline.current)

    # ---- content search -------------------------------------------------------------------------

    def action_search(self) -> None:
        if not len(self.timeline):
            return
        scan = self.search.scan

        def done(query: str | None) -> None:
            if not query:
                return
            if scan is None or query != scan.query:
                self.search.start(query)
                self._viewer_query(query.lower())
            self._seek(1, inclusive=scan is None or query != scan.query)

        self.push_screen(SearchScreen(scan.query if scan is not None else ""), done)

    def action_find(self, direction: int) -> None:
        if self.search.scan is None:
            self.notify("no search yet: press / to search what each turn sent", timeout=3)
            return
        self._seek(direction)

    def _seek(self, direction: int, inclusive: bool = False) -> None:
        turns = [t["turn"] for t in self.timeline.traces]
        origin = max(self.index, 0)  # (F at the first turn wraps to the last change: SearchDone.wrapped)
        self.search.seek(direction, origin, turns, inclusive)
        scan = self.search.scan
        assert scan is not None
        if scan.scanned < (len(turns) if direction > 0 else origin):
            self._search_bar(f"searching turn {turns[min(scan.scanned, len(turns) - 1)]:,} "
                             f"({scan.scanned + 1:,} of {len(turns):,})…  Esc stops")

    def _viewer_query(self, needle: str) -> None:
        assert self._viewer is not None
        self._viewer.set_query(needle)

    def _search_bar(self, text: str) -> None:
        scan = self.search.scan
        bar = self.query_one("#search-bar", MarkupLine)
        if scan is None:
            bar.display = False
            return
        bar.update([("/", "bold $accent"), (scan.query, "bold"), ("  ", ""), (text, "")])
        bar.display = True

    @on(SearchProgress)
    def _search_progress(self, message: SearchProgress) -> None:
        scan = self.search.scan
        if scan is None or message.query != scan.query or not self.search.running:
            return
        self._search_bar(f"searching turn {message.turn:,} ({message.position + 1:,} of {message.total:,})…  "
                         "Esc stops")

    @on(SearchDone)
    def _search_done(self, message: SearchDone) -> None:
        scan = self.search.scan
        if scan is None or message.query != scan.query:
            return
        self.search.running = False
        change = message.change
        keys = "  ·  f next, F previous, Esc clears"
        if change is None:  # (a search that meets the end wraps: none at all, then)
            where = (f"turns {self.timeline.traces[0]['turn']:,}–{self.timeline.traces[message.scanned - 1]['turn']:,}"
                     if message.scanned else "no turns")
            unread = f"; {scan.unreadable} turns could not be read" if scan.unreadable else ""
            self._search_bar(f"not found in what {where} sent{unread}")
            return
        # Wrapped all the way round to the turn it started from: there is no other (`f` at the only change
        # said the same "search wrapped to turn 0 · turn 0: ..." again and again, as if it had moved).
        only = message.wrapped and change.index == self.index and message.scanned == len(self.timeline)
        self._go(self.timeline.go(change.index))
        if change.kind != LEAVES:
            self._manifest.select(change.section)
            assert self._viewer is not None
            trace = self.timeline.traces[change.index]
            self._viewer.reveal_when_shown(f"{change.section} · turn {trace['turn']} ·")
        wrapped = ""
        if only:
            self._search_bar(f"turn {change.turn:,} is the only turn it enters or leaves the prompt: "
                             f"{describe(change, scan.query)}  ·  Esc clears")
            return
        if message.wrapped:  # as `less` says it: the end was met, the search went on from the other end
            end = self.timeline.traces[0 if message.direction > 0 else message.scanned - 1]["turn"]
            wrapped = f"search wrapped to turn {end:,}  ·  "
        self._search_bar(f"{wrapped}turn {change.turn:,}: {describe(change, scan.query)}{keys}")

    def action_search_escape(self) -> None:
        if self.search.running:
            self.search.cancel()
            at = min(self.search.at, len(self.timeline) - 1)
            self._search_bar(f"stopped at turn {self.timeline.traces[at]['turn']:,} ({at + 1:,} of "
                             f"{len(self.timeline):,})  ·  f goes on, Esc clears")
            return
        self.search.clear()
        self._viewer_query("")
        self._manifest.set_marked(frozenset())
        self._search_bar("")

    @on(JumpToTurn)
    def _jump(self, message: JumpToTurn) -> None:
        self._go(self.timeline.go(message.index))

    def action_goto(self) -> None:
        if not len(self.timeline):
            return
        first, last = self.timeline.traces[0]["turn"], self.timeline.traces[-1]["turn"]

        def done(turn: int | None) -> None:
            if turn is None:
                return
            index = self.timeline.index_of_turn(turn)
            if index is None:
                # Inside first–last but not received (a live session re-synced past dropped events): the
                # next turn there is, and said so. It jumped to the first turn without a word.
                index = self.timeline.index_at_or_after(turn)
                self.notify(f"turn {turn} is not in this session; showing turn "
                            f"{self.timeline.traces[index]['turn']}", severity="warning", timeout=4)
            self._go(self.timeline.go(index))

        self.push_screen(GoToTurnScreen(first, last), done)

    # ---- play ---------------------------------------------------------------------------------

    def action_play(self) -> None:
        self.playing = not self.playing

    def watch_playing(self, playing: bool) -> None:
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if playing:
            if self.timeline.current >= self.timeline.last:
                self.timeline.go(0)  # play from the start, as a media player does at the end
                self.index = 0
            self._play_timer = self.set_interval(1 / SPEEDS[self.speed], self._tick)
        self._update_status()

    def _tick(self) -> None:
        if self.timeline.current >= self.timeline.last:
            self.playing = False
        else:
            self.action_step(1)

    def action_speed(self, delta: int) -> None:
        self.speed = min(max(0, self.speed + delta), len(SPEEDS) - 1)
        if self.playing:
            self.watch_playing(True)
        self._update_status()

    # ---- tabs and views -----------------------------------------------------------------------

    def action_tab(self, tab: str) -> None:
        if tab == "tab-shadow" and not self._shadow_tab:
            self.notify("this session has no shadow rollout (Pipeline(..., shadow=...))", timeout=3)
            return
        # Showing a tab never moves focus: ←/→/Home/End keep stepping turns. A slider takes the arrows
        # only once focused (Tab or a click), and the footer then says so and how to leave (Esc).
        details = self.query_one("#details", TabbedContent)
        if tab == "tab-whatif":  # its controls skip the steps taken while it was hidden: catch up first
            self.whatif.warm()  # the tokenizer, before the first slider move needs it
            whatif = self.query_one("#whatif", WhatIfPanel)
            if details.active == tab and whatif.focus_first_slider():
                return  # `w` on the shown What-if tab: its first slider takes the arrows (Esc gives them back)
            whatif.sync()
        details.active = tab
        if self._short:  # the tab has no rows beside the rest on a short terminal: it takes the screen
            self._set_zoom(True)

    def action_session_whatif(self) -> None:
        self.action_tab("tab-whatif")
        self.query_one("#whatif", WhatIfPanel).toggle_session()

    def action_focus_manifest(self) -> None:
        self.query_one("#manifest").focus()

    def action_unzoom(self) -> None:
        self._set_zoom(False)
        self.action_focus_manifest()

    def action_section(self, delta: int) -> None:
        # The manifest's own cursor move: it posts SectionSelected for the new row, which loads its content.
        self._manifest.action_cursor(delta)
        if self.query_one("#details", TabbedContent).active != "tab-content" or self.content.show_request:
            self.content.show_request = False
            self.action_tab("tab-content")  # the section is what Content shows: the zoomed tab follows
            self._load_content(self._manifest.selected_section())

    def action_content(self) -> None:
        # The Content tab also shows the request body (`b`): `c` after `b` showed the tab with the body
        # still in it, and the section came back only with Enter on the manifest. `c` is the section's.
        if self.content.show_request:
            self.content.show_request = False
            self._load_content(self._manifest.selected_section())
        self.action_tab("tab-content")

    def action_request_body(self) -> None:
        self.content.show_request = True
        self.action_tab("tab-content")
        self._load_content(None)

    # ---- save, help, palette ------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("save", "save_replay"):
            return (self.source.kind == "live") == (action == "save")
        if action == "search_escape":
            return self.search.scan is not None
        if action in ("unzoom", "section"):  # (False: Esc falls through to focus_manifest, and the footer
            return self._zoom                # hides these; ↑/↓ go to whatever has focus)
        return True

    def action_save(self) -> None:
        pid = self.source.header.get("pid", "session")
        if self.source.header.get("session") is not None:  # one conversation of several: its own name
            pid = f"{pid}.{self.source.header['session']}"
        self.push_screen(SaveScreen(f"cp-{pid}.cpsession", len(self.timeline), still_arriving=self.disconnected is None),
                         self._save_to)

    def action_save_replay(self) -> None:
        self.notify("s: live sessions only (this is a replay)", timeout=3)

    def _save_to(self, path: str | None) -> None:
        if path:
            self.save_worker(path)

    def save_worker(self, path: str) -> None:
        # What the save holds: the turns received by the time it is written; the status says the count
        # the source wrote (the timeline's, read when the path was given, could be a turn short of the
        # file: turns go on arriving), so a save made while the agent ran is not taken for all of it later.
        def saved(turns: int) -> None:
            self.saved_turns = turns  # (before saved_to, whose watcher redraws the status)
            self.saved_to = path

        def work() -> None:
            try:
                turns = self.source.save(path)
            except (OSError, ContextPipeError) as exc:  # (a live session whose agent is gone: what is missing)
                self.call_from_thread(self.notify, f"could not save to {path}: {exc}", severity="error",
                                      markup=False)
                return
            self.call_from_thread(self.notify, f"saved {counted(turns, 'turn')} to {path}", markup=False)
            self.call_from_thread(saved, turns)

        self.run_worker(work, thread=True, group="save", exit_on_error=False)

    def action_help(self) -> None:
        self.push_screen(HelpScreen([b for b in self.BINDINGS if isinstance(b, Binding)], self.status_whole()))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            if binding.action in ("quit",) or not binding.tooltip:
                continue
            title = binding.tooltip[0].upper() + binding.tooltip[1:]
            yield SystemCommand(title, f"key: {binding.key}",
                                lambda a=binding.action: self.call_later(self.run_action, a))

    # ---- layout -------------------------------------------------------------------------------

    def on_resize(self, event: Resize) -> None:
        self._apply_size(event.size.width, event.size.height)

    def _apply_size(self, width: int, height: int) -> None:
        narrow = width < NARROW_BELOW
        show_hint = width >= self.PALETTE_HINT_MIN_WIDTH
        footer = self._footer
        if footer is not None and footer.show_command_palette != show_hint:
            footer.show_command_palette = show_hint
            footer.refresh(recompose=True)  # a plain reactive: Footer does not recompose for it
        self._short = height < (SHORT_BELOW_NARROW if narrow else SHORT_BELOW_WIDE)
        root = self.query_one("#root")
        root.set_class(narrow, "narrow")
        self.query_one("#manifest", ManifestPanel).set_compact(narrow)
        if not self._short:  # grown tall enough: everything fits again, and Esc means what it did
            self._set_zoom(False)
        root.set_class(self._short and self._zoom, "zoom")

    def _set_zoom(self, zoom: bool) -> None:
        if zoom == self._zoom:
            return
        self._zoom = zoom
        self.query_one("#root").set_class(zoom and self._short, "zoom")
        if not zoom:  # ↑/↓ moved the hidden manifest's cursor: its row is brought into view once laid out
            self.call_after_refresh(self._manifest.show_cursor)
        self.refresh_bindings()  # the footer's "esc Back" comes and goes with it

    def watch_theme(self) -> None:
        # Syntax colours come from pygments, not CSS: re-highlight for a dark or light theme.
        if self.index >= 0:
            self._load_content(self.query_one("#manifest", ManifestPanel).selected_section())


def main(argv: list[str] | None = None) -> None:
    """Development entry: `python -m inspector.app --synthetic [--live] [--turns N] [--theme NAME]`."""
    import argparse

    from inspector.sources.synthetic import SyntheticSource

    parser = argparse.ArgumentParser(prog="python -m inspector.app")
    parser.add_argument("--synthetic", action="store_true", help="synthetic session (the only source here)")
    parser.add_argument("--live", action="store_true", help="pretend to be attached: turns keep arriving")
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--initial", type=int, default=None, help="live: turns already there on attach")
    parser.add_argument("--delay", type=float, default=1.5, help="live: seconds between turns")
    parser.add_argument("--theme", default=None)
    parser.add_argument("--turn", type=int, default=None)
    args = parser.parse_args(argv)
    initial = args.initial if args.initial is not None else (args.turns // 2 if args.live else None)
    source = SyntheticSource(args.turns, live=args.live, initial=initial, delay=args.delay)
    InspectorApp(source, theme=args.theme, start_turn=args.turn).run()


if __name__ == "__main__":
    main()
