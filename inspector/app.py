"""cp-inspect's Textual app: one Source feeds one Timeline; panels render the current turn.

Data flow (as memray's live view and posting do it): a thread worker reads `source.follow()` and
posts small messages; handlers update the Timeline and the `index` reactive; the watcher hands the
current trace to each panel's reactives. Nothing that may block (socket, file, re-plan) runs on the
UI thread, and only the current turn is ever drawn, so a 10,000-turn recording opens quickly.

The app is assembled from one mixin per concern: app_source (reading the source, content),
app_whatif (re-plans), app_actions (bindings and commands), on the shared state in app_state.
"""

from __future__ import annotations

import os

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.events import Resize
from textual.widgets import Footer, Static, TabbedContent, TabPane

from inspector.app_actions import ActionsMixin
from inspector.app_source import SourceMixin
from inspector.app_state import NARROW_BELOW, SPARK_TURNS, SPEEDS
from inspector.app_whatif import WhatIfMixin
from inspector.sources import Source
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

__all__ = ["InspectorApp", "SPEEDS", "main"]


class InspectorApp(ActionsMixin, WhatIfMixin, SourceMixin):
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

    def __init__(self, source: Source, theme: str | None = None, start_turn: int | None = None) -> None:
        super().__init__()
        self._init_state(source, start_turn)
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

    # ---- current turn -------------------------------------------------------------------------

    def watch_index(self, index: int) -> None:
        trace = self.full_trace(index)
        if trace is None:
            return
        recent = self.timeline.traces[max(0, index - SPARK_TURNS): index + 1]
        pressure = self.query_one("#pressure", PressurePanel)
        pressure.recent = [(t["pressure"]["predictive"], t["tier"]) for t in recent]
        pressure.trace = trace
        self.query_one("#tier", TierPanel).trace = trace
        self.query_one("#cache", CacheLayoutPanel).trace = trace
        self.query_one("#skipped", SkippedPanel).trace = trace
        whatif = self.query_one("#whatif", WhatIfPanel)
        whatif.trace = trace
        self.query_one("#strip", TimelineStrip).current = index
        manifest = self.query_one("#manifest", ManifestPanel)
        manifest.show(trace)
        # While a long recording is still loading, the source is busy decoding: content comes after.
        self._content_deferred = self._loading
        if not self._loading:
            self._load_content(manifest.selected_section(), stepping=True)
        overrides = whatif.overrides()
        if not overrides.is_empty() and not whatif.session:  # session-wide results do not depend on the turn
            self.run_replan(index, overrides)
        self._update_status()

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
