"""What the app knows about the session it shows: the source, the timeline, and the loading state.

A plain object, not a widget: the app's collaborators (reader, content loader, what-if runner) each
hold a reference to it instead of reaching into each other's attributes."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.trace_schema import Trace
from inspector.sources import Source
from inspector.timeline import Timeline

SPEEDS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # turns per second
NARROW_BELOW = 100  # columns; below this the layout re-stacks (80x24 must stay usable)
SPARK_TURNS = 240  # pressure sparkline history; more than any terminal is wide


@dataclass
class SessionView:
    """What the inspector shows of one source: its timeline and how far loading has come."""
    source: Source
    start_turn: int | None = None
    timeline: Timeline = field(default_factory=Timeline)
    dropped: int = 0  # events the probe dropped for us (we re-synced)
    loaded: bool = False  # the start turn has been shown
    loading: bool = False  # the initial chunks of a long recording are still arriving
    # A live agent's history before its newest turn, still arriving: (turns in, turns in all), or None.
    history: tuple[int, int] | None = None

    def full_trace(self, index: int) -> Trace | None:
        """The whole trace at timeline position `index`. A long recording's timeline holds summaries;
        its source decodes the full trace on demand (a small LRU keeps stepping cheap)."""
        summary = self.timeline.trace(index)
        if summary is None:
            return None
        return self.source.full_trace(summary["turn"])
