"""cp-inspect's Textual app: one Source feeds one Timeline; panels render the current turn.

Data flow (as memray's live view and posting do it): a thread worker reads `source.follow()` and
posts small messages; handlers update the Timeline and the `index` reactive; the watcher hands the
current trace to each panel's reactives. Nothing that may block (socket, file, re-plan) runs on the
UI thread, and only the current turn is ever drawn, so a 10,000-turn recording opens quickly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.events import Resize
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Static, Switch, TabbedContent, TabPane
from textual.timer import Timer
from textual.worker import get_current_worker

from inspector.messages import (
    ContentLoaded,
    EventsDropped,
    JumpToTurn,
    ReplanFinished,
    ReplanRequested,
    SectionSelected,
    SimulationFinished,
    SourceDisconnected,
    TurnsReceived,
)
from inspector.screens import GoToTurnScreen, HelpScreen, SaveScreen
from inspector.source import Disconnected, Dropped, NewTurn, Overrides, SimulationCancelled, Source
from inspector.status import status_markup
from inspector.timeline import Timeline
from panels.alerts import AlertsPanel
from panels.cache_layout import CacheLayoutPanel
from panels.content_viewer import ContentViewer
from panels.manifest import ManifestPanel
from panels.pressure import PressurePanel
from panels.skipped import SkippedPanel
from panels.tier import TierPanel
from panels.timeline_strip import TimelineStrip
from panels.whatif import WhatIfPanel
from themes import ALIASES, DEFAULT_THEME, DEFAULT_VARIABLES, THEMES

SPEEDS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # turns per second
NARROW_BELOW = 100  # columns; below this the layout re-stacks (80x24 must stay usable)
SPARK_TURNS = 240  # pressure sparkline history; more than any terminal is wide
CONTENT_DEBOUNCE_S = 0.08  # steps closer together than this are a held key: fetch content once it stops


class InspectorApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "ContextPipe Inspector"
    BINDINGS = [
        Binding("left", "step(-1)", "Prev", tooltip="previous turn"),
        Binding("right", "step(1)", "Next", tooltip="next turn"),
        Binding("home", "first", "First", show=False, tooltip="first turn"),
        Binding("end", "last", "Last", show=False, tooltip="last turn (and follow the newest, live)"),
        Binding("g", "goto", "Go to", tooltip="go to turn N"),
        Binding("space", "play", "Play", tooltip="play / pause"),
        Binding("plus,equals_sign", "speed(1)", "Faster", show=False, tooltip="play faster"),
        Binding("minus", "speed(-1)", "Slower", show=False, tooltip="play slower"),
        Binding("n,right_square_bracket", "next_interesting", "Next ★",
                tooltip="next interesting turn (tier change, cache break, alert)"),
        Binding("N,left_square_bracket", "prev_interesting", "Prev ★", show=False,
                tooltip="previous interesting turn"),
        Binding("c", "tab('tab-content')", "Content", show=False, tooltip="show the Content tab"),
        Binding("w", "tab('tab-whatif')", "What-if", tooltip="show the What-if tab"),
        Binding("W", "session_whatif", "Session what-if", show=False,
                tooltip="session-wide what-if: re-run and price the whole session (toggle)"),
        Binding("k", "tab('tab-skipped')", "Skipped", show=False, tooltip="show the Skipped tab"),
        Binding("a", "tab('tab-alerts')", "Alerts", show=False, tooltip="show the Alerts tab"),
        Binding("b", "request_body", "Request", show=False, tooltip="show the serialized request body"),
        Binding("s", "save", "Save", tooltip="save the received turns (live)"),
        Binding("escape", "focus_manifest", "Sections", show=False, tooltip="focus the section manifest"),
        Binding("question_mark", "help", "Help", tooltip="this help"),
        Binding("q", "quit", "Quit", tooltip="quit"),
    ]

    index: reactive[int] = reactive(-1, init=False)  # position in the timeline, -1 before data
    playing: reactive[bool] = reactive(False, init=False)
    speed: reactive[int] = reactive(1, init=False)  # index into SPEEDS
    disconnected: reactive[str | None] = reactive(None, init=False)

    def __init__(self, source: Source, theme: str | None = None, start_turn: int | None = None) -> None:
        super().__init__()
        self.source = source
        self.timeline = Timeline()
        self.start_turn = start_turn
        self.dropped = 0
        self._loaded = False
        self._show_request = False
        self._play_timer: Timer | None = None
        self._status_markup = ""
        self._last_step = 0.0
        self._loading = False  # the initial chunks of a long recording are still arriving
        self._content_deferred = False
        self._theme_warning: str | None = None
        for t in THEMES:
            self.register_theme(t)
        wanted = theme or os.environ.get("TEXTUAL_THEME") or DEFAULT_THEME
        wanted = ALIASES.get(wanted, wanted)
        if wanted not in self.available_themes:
            # As posting does: a bad theme name is a notification, not a crash.
            self._theme_warning = f"unknown theme {wanted!r}; using {DEFAULT_THEME}"
            wanted = DEFAULT_THEME
        self.theme = wanted

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {**super().get_theme_variable_defaults(), **DEFAULT_VARIABLES}

    def compose(self) -> ComposeResult:
        with Vertical(id="root"):
            yield Static(id="status")
            with Horizontal(id="overview"):
                yield PressurePanel(id="pressure")
                yield TierPanel(id="tier")
            yield CacheLayoutPanel(id="cache")
            yield TimelineStrip(id="strip")
            with Horizontal(id="main"):
                yield ManifestPanel(id="manifest")
                with TabbedContent(id="details", initial="tab-content"):
                    with TabPane("Content", id="tab-content"):
                        yield ContentViewer(id="content")
                    with TabPane("What-if", id="tab-whatif"):
                        yield WhatIfPanel(id="whatif")
                    with TabPane("Skipped", id="tab-skipped"):
                        yield SkippedPanel(id="skipped")
                    with TabPane("Alerts", id="tab-alerts"):
                        yield AlertsPanel(id="alerts")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#strip", TimelineStrip).traces = self.timeline.traces
        self._apply_size(self.size.width)
        self._update_status()
        if self._theme_warning:
            self.notify(self._theme_warning, severity="warning")
        self.query_one("#manifest").focus()
        self.read_source()

    # ---- source -------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="source", exit_on_error=False)
    def read_source(self) -> None:
        worker = get_current_worker()
        # A long recording arrives in chunks, so the first frame does not wait for the last turn.
        chunks = getattr(self.source, "load_chunks", None)
        pending: Iterator[list[dict]] = iter(chunks() if chunks is not None else [self.source.load_initial()])
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
            elif isinstance(event, Dropped):
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
        if self.index == self.timeline.current and not message.more and self._content_deferred:
            self.watch_index(self.index)  # the initial load is complete: now fetch the content
        self.index = self.timeline.current
        self._update_status()

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

    # ---- current turn -------------------------------------------------------------------------

    def watch_index(self, index: int) -> None:
        trace = self.timeline.trace(index)
        if trace is None:
            return
        recent = self.timeline.traces[max(0, index - SPARK_TURNS): index + 1]
        pressure = self.query_one("#pressure", PressurePanel)
        pressure.recent = [(t["pressure"]["predictive"], t["tier"]) for t in recent]
        pressure.trace = trace
        for panel in ("#tier", "#cache", "#skipped", "#whatif"):
            self.query_one(panel).trace = trace  # type: ignore[attr-defined]
        self.query_one("#strip", TimelineStrip).current = index
        manifest = self.query_one("#manifest", ManifestPanel)
        manifest.show(trace)
        # While a long recording is still loading, the source is busy decoding: content comes after.
        self._content_deferred = self._loading
        if not self._loading:
            self._load_content(manifest.selected_section(), stepping=True)
        whatif = self.query_one("#whatif", WhatIfPanel)
        overrides = whatif.overrides()
        if not overrides.is_empty() and not whatif.session:  # session-wide results do not depend on the turn
            self.run_replan(index, overrides)
        self._update_status()

    def _update_status(self) -> None:
        markup = status_markup(self)
        if markup != self._status_markup:  # one line of fixed height: no layout pass needed
            self._status_markup = markup
            self.query_one("#status", Static).update(markup, layout=False)

    def _go(self, index: int | None) -> None:
        if index is not None:
            self.index = index
            self._update_status()

    # ---- content ------------------------------------------------------------------------------

    def _load_content(self, section_id: str | None, stepping: bool = False) -> None:
        trace = self.timeline.trace(self.index)
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
        self.query_one("#content", ContentViewer).show(message.title, message.text)

    @on(SectionSelected)
    def _section_selected(self, message: SectionSelected) -> None:
        self._show_request = False
        self._load_content(message.section_id)

    # ---- what-if ------------------------------------------------------------------------------

    @on(ReplanRequested)
    def _replan_requested(self, message: ReplanRequested) -> None:
        whatif = self.query_one("#whatif", WhatIfPanel)
        if message.session:
            self.workers.cancel_group(self, "replan")
            self.run_simulation(message.overrides)
        elif message.overrides.is_empty():
            self.workers.cancel_group(self, "simulate")
            self.workers.cancel_group(self, "replan")
            whatif.result = None
        elif self.index >= 0:
            self.run_replan(self.index, message.overrides)

    @work(thread=True, exclusive=True, group="replan", exit_on_error=False)
    def run_replan(self, index: int, overrides: Overrides) -> None:
        """exclusive=True cancels the previous re-plan; a cancelled one finishes but never posts."""
        worker = get_current_worker()
        trace = self.source.replan(self.timeline.traces[index]["turn"], overrides)
        if not worker.is_cancelled:
            self.post_message(ReplanFinished(index, overrides, trace))

    @work(thread=True, exclusive=True, group="simulate", exit_on_error=False)
    def run_simulation(self, overrides: Overrides) -> None:
        """Session-wide what-if. Newest settings win: exclusive=True cancels the previous run, which
        stops at its next check (the source polls `cancelled`) and never posts."""
        worker = get_current_worker()
        try:
            report = self.source.simulate(overrides, cancelled=lambda: worker.is_cancelled)
        except SimulationCancelled:
            return
        except Exception as exc:  # an unknown model or setting is a message in the panel, not a crash
            if not worker.is_cancelled:
                self.post_message(SimulationFinished(overrides, None, f"{type(exc).__name__}: {exc}"))
            return
        if not worker.is_cancelled:
            self.post_message(SimulationFinished(overrides, report))

    @on(SimulationFinished)
    def _simulation_finished(self, message: SimulationFinished) -> None:
        whatif = self.query_one("#whatif", WhatIfPanel)
        if not whatif.session or message.overrides != whatif.overrides():
            return
        if message.error is not None:
            whatif.show_session_error(f"session-wide what-if failed: {message.error}")
        else:
            whatif.session_result = message.report

    @on(ReplanFinished)
    def _replan_finished(self, message: ReplanFinished) -> None:
        whatif = self.query_one("#whatif", WhatIfPanel)
        if message.index == self.index and message.overrides == whatif.overrides():
            whatif.result = (self.timeline.traces[message.index], message.trace)

    # ---- actions ------------------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        self._go(self.timeline.step(delta))

    def action_first(self) -> None:
        self._go(self.timeline.go(0))

    def action_last(self) -> None:
        self._go(self.timeline.go(self.timeline.last))

    def action_next_interesting(self) -> None:
        if self.timeline.next_interesting() is None:
            self.notify("no later interesting turn", timeout=2)
        self._go(self.timeline.current)

    def action_prev_interesting(self) -> None:
        if self.timeline.prev_interesting() is None:
            self.notify("no earlier interesting turn", timeout=2)
        self._go(self.timeline.current)

    @on(JumpToTurn)
    def _jump(self, message: JumpToTurn) -> None:
        self._go(self.timeline.go(message.index))

    def action_goto(self) -> None:
        if not len(self.timeline):
            return
        first, last = self.timeline.traces[0]["turn"], self.timeline.traces[-1]["turn"]

        def done(turn: int | None) -> None:
            if turn is not None:
                self._go(self.timeline.go(self.timeline.index_of_turn(turn) or 0))

        self.push_screen(GoToTurnScreen(first, last), done)

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

    def action_tab(self, tab: str) -> None:
        self.query_one("#details", TabbedContent).active = tab
        if tab == "tab-whatif":
            self.query_one("#budget").focus()  # arrows now move the slider; Esc goes back to stepping

    def action_session_whatif(self) -> None:
        self.query_one("#details", TabbedContent).active = "tab-whatif"
        self.query_one("#session", Switch).toggle()

    def action_focus_manifest(self) -> None:
        self.query_one("#manifest").focus()

    def action_request_body(self) -> None:
        self._show_request = True
        self.action_tab("tab-content")
        self._load_content(None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "save":
            return self.source.kind == "live"
        return True

    def action_save(self) -> None:
        pid = self.source.header.get("pid", "session")
        self.push_screen(SaveScreen(f"cp-{pid}.cpsession", len(self.timeline)), self._save_to)

    def _save_to(self, path: str | None) -> None:
        if path:
            self.save_worker(path)

    @work(thread=True, group="save", exit_on_error=False)
    def save_worker(self, path: str) -> None:
        try:
            self.source.save(path)
        except OSError as exc:
            self.call_from_thread(self.notify, f"could not save to {path}: {exc}", severity="error")
            return
        self.call_from_thread(self.notify, f"saved {len(self.timeline)} turns to {path}")

    def action_help(self) -> None:
        self.push_screen(HelpScreen(list(self.BINDINGS)))  # type: ignore[arg-type]

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            if binding.action in ("quit",) or not binding.tooltip:
                continue
            title = binding.tooltip[0].upper() + binding.tooltip[1:]
            yield SystemCommand(title, f"key: {binding.key}", lambda a=binding.action: self.call_later(self.run_action, a))

    # ---- layout -------------------------------------------------------------------------------

    def on_resize(self, event: Resize) -> None:
        self._apply_size(event.size.width)

    def _apply_size(self, width: int) -> None:
        narrow = width < NARROW_BELOW
        self.query_one("#root").set_class(narrow, "narrow")
        self.query_one("#manifest", ManifestPanel).set_compact(narrow)

    def watch_theme(self) -> None:
        # Syntax colours come from pygments, not CSS: re-highlight for a dark or light theme.
        if self.index >= 0:
            self._load_content(self.query_one("#manifest", ManifestPanel).selected_section())


def main(argv: list[str] | None = None) -> None:
    """Development entry: `python -m inspector.app --synthetic [--live] [--turns N] [--theme NAME]`."""
    import argparse

    from inspector.synthetic import SyntheticSource

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
