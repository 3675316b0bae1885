"""Messages the app's own workers post; handlers in the app turn them into reactive updates.

Messages a panel posts live with the panel (`panels.navigation.JumpToTurn`,
`panels.manifest.SectionSelected`, `panels.whatif.ReplanRequested`)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message

from engine.trace_schema import Trace
from engine.whatif import Overrides
from panels.text_document import TextDocument


@dataclass
class TurnsReceived(Message):
    """New traces from the source (live probe or a growing file). `more`: the initial load of a long
    recording is still arriving in chunks."""

    traces: list[dict]
    more: bool = False


@dataclass
class SourceDisconnected(Message):
    """The live source went away (the agent exited or closed its socket)."""
    reason: str


@dataclass
class SourceFailed(Message):
    """The source could not be read (a damaged recording, a lost socket): shown, never swallowed."""

    error: str


@dataclass
class SourceNotice(Message):
    """Something about how the session is read now, to say on screen once (sources.Notice: a followed
    recording that went wrong, the session sent live from there on)."""

    text: str
    title: str = ""


@dataclass
class EventsDropped(Message):
    """The probe dropped events for this client; the view re-syncs."""
    count: int


@dataclass
class HistoryRefreshed(Message):
    """The turns the timeline held as stand-ins (a live agent's history, fetched after its newest turn)
    hold their summaries now (sources.HistoryFilled)."""


@dataclass
class HistoryProgressed(Message):
    """The first `filled` of `total` stand-ins hold their summaries now (sources.HistoryProgress)."""

    filled: int
    total: int
    first: int = 0


@dataclass
class SimulationFinished(Message):
    """A session-wide what-if finished: its report, or the error that stopped it."""
    overrides: Overrides
    report: dict | None
    error: str | None = None


@dataclass
class ReplanFinished(Message):
    """A what-if re-plan of one turn finished in the background: its trace, or the error that stopped it."""
    index: int
    overrides: Overrides
    trace: Trace | None
    error: str | None = None


@dataclass
class ContentLoaded(Message):
    """A content view's text, loaded (and wrapped) by a worker, ready to show."""
    title: str
    text: str
    # The text already split and wrapped in the worker for a dark (True) or light theme and the viewer's
    # width, its first screenful drawn (highlighting runs for the rows drawn): wrapping a long history
    # is milliseconds that need not run on the UI thread. None: prepared on show.
    document: TextDocument | Text | None = None
    dark: bool | None = None
    key: tuple[str, str] | None = None  # (section id, content hash); None for the request body
    note: str = ""  # the section's note in this turn's trace (why it was sent as it was), "" for none


@dataclass
class WhyMissed(Message):
    """Why a turn missed the cache, worked out in the background."""
    index: int
    why: dict


@dataclass
class ShadowLoaded(Message):
    """The shadow session's summary arrived (None: there is none)."""
    summary: dict | None
