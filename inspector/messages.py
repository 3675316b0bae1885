"""Messages posted by workers and panels; handlers in the app turn them into reactive updates."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from inspector.source import Overrides


@dataclass
class TurnsReceived(Message):
    """New traces from the source (live probe or a growing file). `more`: the initial load of a long
    recording is still arriving in chunks."""

    traces: list[dict]
    more: bool = False


@dataclass
class SourceDisconnected(Message):
    reason: str


@dataclass
class EventsDropped(Message):
    count: int


@dataclass
class JumpToTurn(Message):
    """A panel asks to show the turn at this timeline position (alert selected, strip clicked)."""

    index: int


@dataclass
class SectionSelected(Message):
    section_id: str


@dataclass
class ReplanRequested(Message):
    overrides: Overrides
    session: bool = False  # session-wide what-if: re-run the whole session, not the selected turn


@dataclass
class SimulationFinished(Message):
    overrides: Overrides
    report: dict | None
    error: str | None = None


@dataclass
class ReplanFinished(Message):
    index: int
    overrides: Overrides
    trace: dict


@dataclass
class ContentLoaded(Message):
    title: str
    text: str
