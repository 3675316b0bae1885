"""The state every part of the inspector app shares: reactives, the source and timeline, status line.

InspectorApp (app.py) is assembled from mixins that each hold one concern (app_source.py: reading the
source and fetching content; app_whatif.py: re-plans and session-wide what-ifs; app_actions.py: key
bindings and commands). Each mixin derives from AppState, so Textual registers its `@on` handlers and
mypy sees the shared attributes.
"""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static

from inspector.sources import Source
from inspector.status import status_markup
from inspector.timeline import Timeline

SPEEDS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # turns per second
NARROW_BELOW = 100  # columns; below this the layout re-stacks (80x24 must stay usable)
SPARK_TURNS = 240  # pressure sparkline history; more than any terminal is wide
CONTENT_DEBOUNCE_S = 0.08  # steps closer together than this are a held key: fetch content once it stops


class AppState(App[None]):
    index: reactive[int] = reactive(-1, init=False)  # position in the timeline, -1 before data
    playing: reactive[bool] = reactive(False, init=False)
    speed: reactive[int] = reactive(1, init=False)  # index into SPEEDS
    disconnected: reactive[str | None] = reactive(None, init=False)

    source: Source
    timeline: Timeline
    start_turn: int | None
    dropped: int
    _loaded: bool
    _show_request: bool
    _play_timer: Timer | None
    _status_markup: str
    _last_step: float
    _loading: bool  # the initial chunks of a long recording are still arriving
    _content_deferred: bool
    _frozen_fold: bool

    def _init_state(self, source: Source, start_turn: int | None) -> None:
        self.source = source
        self.timeline = Timeline()
        self.start_turn = start_turn
        self.dropped = 0
        self._loaded = False
        self._show_request = False
        self._play_timer = None
        self._status_markup = ""
        self._last_step = 0.0
        self._loading = False
        self._content_deferred = False
        self._frozen_fold = False

    def full_trace(self, index: int) -> dict[str, Any] | None:
        """The whole trace at timeline position `index`. A long recording's timeline holds summaries;
        its source decodes the full trace on demand (a small LRU keeps stepping cheap)."""
        summary = self.timeline.trace(index)
        if summary is None:
            return None
        return self.source.full_trace(summary["turn"])

    def _update_status(self) -> None:
        markup = status_markup(self)
        if markup != self._status_markup:  # one line of fixed height: no layout pass needed
            self._status_markup = markup
            self.query_one("#status", Static).update(markup, layout=False)

    def _go(self, index: int | None) -> None:
        if index is not None:
            self.index = index
            self._update_status()

    def _load_content(self, section_id: str | None, stepping: bool = False) -> None:
        raise NotImplementedError  # app_source.SourceMixin

    def run_replan(self, index: int, overrides: Any) -> Any:
        raise NotImplementedError  # app_whatif.WhatIfMixin
