"""cp-inspect's Textual app: one Source feeds one Timeline; panels render the current turn.

Data flow (as memray's live view and posting do it): a thread worker reads `source.follow()` and
posts small messages; handlers update the Timeline and the `index` reactive; the watcher hands the
current trace to each panel's reactives. Nothing that may block (socket, file, re-plan) runs on the
UI thread, and only the current turn is ever drawn, so a 10,000-turn recording opens quickly.

The app holds named collaborators instead of a mixin chain (Textual collects message handlers,
actions and watchers from the App's own class, not from mixins): `view` (SessionView: source,
timeline, loading state); its workers `reader` (SourceReader: the source's), `content` (ContentLoader:
section text and request bodies), `whatif` (WhatIfRunner: re-plans and session-wide what-ifs) and
`search` (SearchRunner: the content search's scan); and its parts, each given the app: `arrivals`
(turns arriving, start-up's end, the source's end: arrivals.py), `pane` (what the Content tab shows as
the person steps: content_pane.py), `whatif_tabs` (the What-if, Why miss and Shadow tabs' answers:
whatif_tabs.py), `search_bar` (the search as the person drives it: search_bar.py), `tabs_layout`
(which tab shows; narrow and short terminals: tab_layout.py), `stepping` (interesting turns, go to,
play: stepping.py) and `saving` (`s`: session_save.py). The app itself keeps the bindings, the
reactives, the step's own path (watch_index: what every step draws, kept here where it runs fastest)
and thin handlers that hand each message, action and watcher to the part that holds it. The parts
read the app through public names only (grouped in __init__: its widgets, `update_status`, `go`, ...);
its private ones are its own.
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
from textual.widgets import Footer, TabbedContent, TabPane
from textual.worker import Worker

from engine.trace_schema import Trace
from inspector import startup_gc, young_gc
from inspector.app_bindings import APP_BINDINGS
from inspector.arrivals import Arrivals
from inspector.content_loader import ContentLoader
from inspector.content_pane import ContentPane
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
    SourceNotice,
    TurnsReceived,
    WhyMissed,
)
from inspector.opening_notices import opening_notices
from inspector.partial_compositor import MainScreen
from inspector.screens import HelpScreen
from inspector.search_bar import SearchBar
from inspector.search_runner import SearchDone, SearchProgress, SearchRunner
from inspector.session_save import SessionSave
from inspector.session_view import SPARK_TURNS, SPEEDS, SessionView
from inspector.source_reader import SourceReader
from inspector.sources import Source
from inspector.status import status_lines, status_whole
from inspector.step_timing import StepTiming
from inspector.stepping import Stepping
from inspector.tab_layout import TabLayout
from inspector.terminal_driver import driver_for
from inspector.timeline import Timeline
from inspector.whatif_runner import WhatIfRunner
from inspector.whatif_tabs import WhatIfTabs
from panels.alerts import AlertsPanel
from panels.cache_layout import CacheLayoutPanel
from panels.content_viewer import ContentViewer
from panels.detail_tabs import DetailTabs
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


class InspectorApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "ContextPipe Inspector"
    # Below this width the footer's right-docked "^p palette" hint draws over its last keys (a live
    # footer's end at column 67, and the hint takes 11): it gives way there; Ctrl+P still opens the palette.
    PALETTE_HINT_MIN_WIDTH = 80
    BINDINGS = APP_BINDINGS  # (app_bindings.py)

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
    # The file `attach --record` writes what was received to once the inspector is left (None: none): the
    # end's banner and toast said "press s to save" over a session that is saved anyway.
    save_on_quit: str | None = None

    def __init__(self, source: Source, theme: str | None = None, start_turn: int | None = None) -> None:
        super().__init__()
        self.view = SessionView(source, start_turn)
        # The app's parts, each given the app (they read its widgets, held from mount, and its reactives).
        self.arrivals = Arrivals(self)  # turns arriving from the source, start-up's end, the source's end
        self.pane = ContentPane(self)  # what the Content tab shows as the person steps
        self.whatif_tabs = WhatIfTabs(self)  # the What-if, Why miss and Shadow tabs' answers
        self.search_bar = SearchBar(self)  # the content search as the person drives it (`/`, f/F, Esc)
        self.tabs_layout = TabLayout(self)  # which detail tab shows; narrow and short terminals
        self.stepping = Stepping(self)  # interesting turns, go to turn N, play
        self.saving = SessionSave(self)  # `s`: the received turns saved
        # Its workers.
        self.reader = SourceReader(self, source)
        self.content = ContentLoader(self, source, self.pane.width, self.pane.screen)
        self.whatif = WhatIfRunner(self, source)
        self.search = SearchRunner(self, source)
        # What the parts read of the app besides its reactives and workers (their interface to it, with
        # update_status(), go(index) and first_frame_drawn()): the main screen's widgets, held from mount
        # (a modal screen may be on top when a part wants them; `manifest` too), and the state below.
        self.viewer: ContentViewer | None = None  # the content viewer
        self.footer: Footer | None = None
        self.whatif_panel: WhatIfPanel | None = None
        self.content_deferred = False  # a step arrived while the initial load was still decoding
        self.step_direction = 1  # the way the person steps (+1 or -1): the content worker prepares the
        # next turn that way while they look
        self.last_input = 0.0  # monotonic time of the last key press or click (INPUT_QUIET_S)
        # The app's own.
        self._theme_warning: str | None = None
        self._last_index = -1  # the turn shown before (step_direction)
        self._status_drawn = False  # watch_index drew the status line for the index go() set
        # True once start-up is over: the first screen complete, the rest of the load let go, and the
        # hidden What-if controls mounted. Until then the app is still doing deferred work between the
        # person's key presses; tests that time or count a step wait for it (tests/tui/conftest.settle).
        self.startup_finished = False
        # CONTEXTPIPE_STEP_TIMING=FILE: each key press's UI CPU and wall up to its frame, as JSON lines.
        self.step_timing = StepTiming.from_env(lambda: (self.size.width, self.size.height),
                                               self.call_after_refresh)
        # Keys bound to stepping turns: routed to their binding at once when no widget would see them.
        self._step_keys = step_keys(list(self.BINDINGS))
        # Steps typed before the start turn is on screen run once it is (early_steps.py; the parts read it).
        self.early_steps = EarlySteps()
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
            yield MarkupLine(id="status-where")  # (shown once an agent has ended, when the line above cuts where)
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
        self.viewer = self.query_one("#content", ContentViewer)
        self.footer, self.whatif_panel = self.query_one(Footer), self.query_one("#whatif", WhatIfPanel)
        # What every step updates, held from mount: ten look-ups by id a step were ~0.3 ms of it.
        self._pressure, self._tier = self.query_one("#pressure", PressurePanel), self.query_one("#tier", TierPanel)
        self._cache_panel = self.query_one("#cache", CacheLayoutPanel)
        self._skipped, self._strip = self.query_one("#skipped", SkippedPanel), self.query_one("#strip", TimelineStrip)
        self.manifest, self._status = self.query_one("#manifest", ManifestPanel), self.query_one("#status", MarkupLine)
        self._status_where = self.query_one("#status-where", MarkupLine)  # where an ended agent's session is
        # The status line fits its parts to its width (status_parts): laid out at another, drawn again.
        self._status.on_width = lambda _width: self.update_status()
        # Hovering the status line shows what it cut (and the file or command it never shows whole).
        self._status.whole = lambda: "\n".join(self.status_whole()) or None
        self.query_one("#strip", TimelineStrip).traces = self.timeline.traces
        self.tabs_layout.apply_size(self.size.width, self.size.height)
        self.update_status()
        for message, kw in opening_notices(self.source.header, self._theme_warning):
            self.notify(message, **kw)
        self.query_one("#manifest").focus()
        first = self.reader.start()
        if first is not None:  # a recording's first chunk, read now: the first frame shows its turns
            self._turns_received(TurnsReceived(first.traces, more=first.more))

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseDown)) and not event.is_forwarded:
            self.last_input = time.monotonic()
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
        whatif = self.whatif_panel
        assert whatif is not None
        whatif.trace = trace
        self._strip.current = index
        manifest = self.manifest
        manifest.show(trace)
        if self.search.scan is not None:  # the sections that hold the searched text, where it is known
            counts = self.search.scan.at(index)
            manifest.set_marked(frozenset(counts or ()))
        # While a long recording is still loading, the source is busy decoding: content comes after.
        self.content_deferred = self.view.loading
        if index != self._last_index:
            self.step_direction = -1 if index < self._last_index else 1
            self._last_index = index
        if not self.view.loading:
            section = manifest.selected_section()
            shown = False
            if section is not None and not self.content.show_request and self.viewer is not None:
                shown = self.pane.show_prepared(trace, section)
            if shown:
                assert section is not None
                # What a worker still running for an earlier turn posts is dropped from now on.
                self.content.wanted = self.content.section_title(trace, section)[0]
                # Nothing to fetch for this turn: the worker only prepares the next one. Started after
                # this step's frame is written, so neither starting it (a worker, its state messages)
                # nor its thread (the GIL) delays the frame the person is waiting for.
                self.call_after_refresh(self.pane.prepare_ahead, index, section)
            else:
                self.pane.load(section, stepping=True)
            if self.step_timing is not None:
                expects = self.content.show_request or (section is not None and not shown)
                self.step_timing.stepped(index, trace["turn"], section, shown, expects)
        self.whatif_tabs.refresh_why()
        if self.whatif_tabs.shadow_tab:
            self.query_one("#shadow", ShadowPanel).turn = trace["turn"]
        overrides = whatif.overrides()
        if not overrides.is_empty() and not whatif.session:  # session-wide results do not depend on the turn
            self.whatif.replan(index, trace["turn"], overrides)
        self.update_status()
        self._status_drawn = True

    def update_status(self) -> None:
        parts, where = status_lines(
            self.view, self.index, self.playing, self.speed, self.disconnected, self.failed, self.saved_to,
            self._status.content_region.width or None, saved_turns=self.saved_turns, save_on_quit=self.save_on_quit,
        )
        self._status.update(parts)  # a no-op when the parts are the same
        if where is not None:
            self._status_where.update(where)
        if self._status_where.display != (where is not None):
            self._status_where.display = where is not None

    def status_whole(self) -> list[str]:
        """The status line whole, when the terminal cuts it, and the source's file or command (status_whole)."""
        return status_whole(
            self.view, self.index, self.playing, self.speed, self.disconnected, self.failed, self.saved_to,
            self._status.content_region.width or None, saved_turns=self.saved_turns, save_on_quit=self.save_on_quit,
        )

    def go(self, index: int | None) -> None:
        if index is not None:
            self._status_drawn = False
            self.index = index
            # A new index has just drawn the status line (watch_index, synchronously): building its
            # parts again to find them unchanged was ~0.5 ms of every step. The same index (a step
            # past either end, live follow switched) still updates it here.
            if not self._status_drawn:
                self.update_status()

    # ---- the source ---------------------------------------------------------------------------

    @on(TurnsReceived)
    def _turns_received(self, message: TurnsReceived) -> None:
        self.arrivals.turns_received(message)

    def first_frame_drawn(self) -> None:
        self.arrivals.first_frame_drawn()

    @on(WhatIfPanel.ControlsReady)
    def _check_startup_finished(self) -> None:
        self.arrivals.check_startup_finished()

    @on(SourceDisconnected)
    def _source_disconnected(self, message: SourceDisconnected) -> None:
        self.arrivals.source_disconnected(message)

    @on(SourceFailed)
    def _source_failed(self, message: SourceFailed) -> None:
        self.arrivals.source_failed(message)

    @on(SourceNotice)
    def _source_notice(self, message: SourceNotice) -> None:
        # (a followed recording that went wrong: the header's follow_stopped, shown as not_followed is)
        self.notify(message.text, title=message.title, severity="warning", timeout=12, markup=False)

    def watch_disconnected(self) -> None:
        self.update_status()
        self.arrivals.count_for_save()  # the agent is gone: an open save prompt's count is final

    def watch_failed(self) -> None:
        self.update_status()

    def watch_saved_to(self) -> None:
        self.update_status()

    @on(HistoryRefreshed)
    def _history_refreshed(self, message: HistoryRefreshed) -> None:
        self.arrivals.history_refreshed(message)

    @on(HistoryProgressed)
    def _history_progressed(self, message: HistoryProgressed) -> None:
        self.arrivals.history_progressed(message)

    @on(EventsDropped)
    def _events_dropped(self, message: EventsDropped) -> None:
        self.arrivals.events_dropped(message)

    # ---- content ------------------------------------------------------------------------------

    @on(ContentLoaded)
    def _content_loaded(self, message: ContentLoaded) -> None:
        self.pane.loaded(message)

    @on(Worker.StateChanged)
    def _worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.pane.worker_state_changed(event)

    @on(SectionSelected)
    def _section_selected(self, message: SectionSelected) -> None:
        self.content.show_request = False
        self.pane.load(message.section_id)

    # ---- what-if ------------------------------------------------------------------------------

    @on(ReplanRequested)
    def _replan_requested(self, message: ReplanRequested) -> None:
        self.whatif_tabs.replan_requested(message)

    @on(SimulationFinished)
    def _simulation_finished(self, message: SimulationFinished) -> None:
        self.whatif_tabs.simulation_finished(message)

    @on(ReplanFinished)
    def _replan_finished(self, message: ReplanFinished) -> None:
        self.whatif_tabs.replan_finished(message)

    # ---- why the cache missed (two re-plans per turn: only while its tab is showing) ---------------

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.whatif_tabs.tab_activated(event)

    @on(ShadowLoaded)
    async def _shadow_loaded(self, message: ShadowLoaded) -> None:
        await self.whatif_tabs.shadow_loaded(message)

    @on(WhyMissed)
    def _why_missed(self, message: WhyMissed) -> None:
        self.whatif_tabs.why_missed(message)

    # ---- stepping -----------------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        self.early_steps.run_or_hold(lambda: self.go(self.timeline.step(delta)))

    def action_first(self) -> None:
        self.early_steps.run_or_hold(lambda: self.go(self.timeline.go(0)))

    def action_last(self) -> None:
        self.early_steps.run_or_hold(lambda: self.go(self.timeline.go(self.timeline.last)))

    def action_next_interesting(self) -> None:
        self.early_steps.run_or_hold(self.stepping.next_interesting)

    def action_prev_interesting(self) -> None:
        self.early_steps.run_or_hold(self.stepping.prev_interesting)

    # ---- content search -------------------------------------------------------------------------

    def action_search(self) -> None:
        self.search_bar.open()

    def action_find(self, direction: int) -> None:
        self.search_bar.find(direction)

    @on(SearchProgress)
    def _search_progress(self, message: SearchProgress) -> None:
        self.search_bar.progress(message)

    @on(SearchDone)
    def _search_done(self, message: SearchDone) -> None:
        self.search_bar.done(message)

    def action_search_escape(self) -> None:
        self.search_bar.escape()

    @on(JumpToTurn)
    def _jump(self, message: JumpToTurn) -> None:
        self.go(self.timeline.go(message.index))

    def action_goto(self) -> None:
        self.stepping.goto()

    # ---- play ---------------------------------------------------------------------------------

    def action_play(self) -> None:
        self.playing = not self.playing

    def watch_playing(self, playing: bool) -> None:
        self.stepping.play(playing)

    def action_speed(self, delta: int) -> None:
        self.stepping.speed(delta)

    # ---- tabs and views -----------------------------------------------------------------------

    def action_tab(self, tab: str) -> None:
        self.tabs_layout.show(tab)

    def action_session_whatif(self) -> None:
        self.action_tab("tab-whatif")
        self.query_one("#whatif", WhatIfPanel).toggle_session()

    def action_focus_manifest(self) -> None:
        self.query_one("#manifest").focus()

    def action_unzoom(self) -> None:
        self.tabs_layout.set_zoom(False)
        self.action_focus_manifest()

    def action_section(self, delta: int) -> None:
        self.tabs_layout.section(delta)

    def action_content(self) -> None:
        self.tabs_layout.content()

    def action_request_body(self) -> None:
        self.tabs_layout.request_body()

    # ---- save, help, palette ------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("save", "save_replay"):
            return (self.source.kind == "live") == (action == "save")
        if action == "search_escape":
            return self.search.scan is not None
        if action in ("unzoom", "section"):  # (False: Esc falls through to focus_manifest, and the footer
            return self.tabs_layout.zoom  # hides these; ↑/↓ go to whatever has focus)
        return True

    def action_save(self) -> None:
        self.saving.prompt()

    def action_save_replay(self) -> None:
        self.notify("s: live sessions only (this is a replay)", timeout=3)

    def save_worker(self, path: str) -> None:
        self.saving.worker(path)

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
        self.tabs_layout.apply_size(event.size.width, event.size.height)

    def watch_theme(self) -> None:
        # Syntax colours come from pygments, not CSS: re-highlight for a dark or light theme.
        if self.index >= 0:
            self.pane.load(self.query_one("#manifest", ManifestPanel).selected_section())


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
