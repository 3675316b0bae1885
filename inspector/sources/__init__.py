"""The one data-source interface the inspector app is written against, and the events a source yields.

Implementations: `file.FileSource` (a `.cpsession` recording, optionally followed as it grows),
`live.LiveSource` (a running agent's probe socket) and `synthetic.SyntheticSource` (tests,
development). The app calls these methods from worker threads only, so an implementation may block.
What-if settings are `engine.whatif.Overrides`: the panels and the engine share that one value.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

from engine.trace_schema import Trace
from engine.whatif import Overrides


@dataclass(frozen=True)
class NewTurn:
    """A turn's trace from the source."""
    trace: dict[str, Any]


@dataclass(frozen=True)
class Disconnected:
    """The source ended, and why."""
    reason: str


@dataclass(frozen=True)
class EventsLost:
    """The probe dropped `count` events because this client was too slow."""

    count: int


@dataclass(frozen=True)
class HistoryFilled:
    """The turns the first frame showed as stand-ins (a live agent's history, fetched after its newest
    turn) all hold their summaries now: what is worked out from every turn (alerts, the interesting
    turns) can be worked out again."""


@dataclass(frozen=True)
class HistoryProgress:
    """The first `filled` of the `total` stand-ins (timeline positions first..first+filled-1) hold their
    turns' summaries now; the rest are still on their way (a long history takes the agent minutes to send at
    its CPU budget: the person sees how far it has come)."""

    filled: int
    total: int
    first: int = 0  # the timeline position of the first stand-in (after a re-sync, past the turns it had)


@dataclass(frozen=True)
class Notice:
    """Something the person should know about how the session is read now (a followed recording that went
    wrong, the session sent live from there on), said once on screen; the view goes on."""

    text: str
    title: str = ""


SourceEvent = NewTurn | Disconnected | EventsLost | HistoryFilled | HistoryProgress | Notice


class Chunk(NamedTuple):
    """Some of the turns a source holds when it is opened. `more` says later chunks follow: the app
    can draw this one while the rest loads, and the reader need not decode the next chunk to know."""

    traces: list[dict[str, Any]]
    more: bool = False


@runtime_checkable
class Source(Protocol):
    kind: str  # "live" | "replay"
    header: dict[str, Any]  # model, provider, pid/command (live) or path (replay), engine_version

    def load_chunks(self) -> Iterator[Chunk]:
        """Every turn known so far, as traces (or per-turn summaries for a long recording), in chunks:
        a small one first, so the app draws before the rest is decoded."""
        ...

    def full_trace(self, turn: int) -> Trace:
        """The whole trace of `turn` (the timeline may hold only summaries)."""
        ...

    def follow(self) -> Iterator[SourceEvent]:
        """Blocks; yields new turns (live, or a growing file) until the source ends."""
        ...

    def section_content(self, turn: int, section_id: str) -> str: ...

    def request_body(self, turn: int) -> str: ...

    def replan(self, turn: int, overrides: Overrides) -> Trace: ...

    def shadow_summary(self) -> dict[str, Any] | None:
        """The session's shadow rollout (engine.shadow.shadow_summary), None when it has none."""
        ...

    def why_missed(self, turn: int) -> dict[str, Any]:
        """Turn `turn`'s request against the previous one (engine.recording.why.why_missed's dict)."""
        ...

    def save(self, path: str | Path) -> int:
        """Write what has been received to `path`; the number of turns the file holds (a live session's
        turns go on arriving while it is written)."""
        ...

    def simulate(self, overrides: Overrides, cancelled: Callable[[], bool] | None = None) -> dict[str, Any]:
        """Session-wide what-if: the whole session under `overrides`, priced, as `cp-inspect simulate
        --json` prints it with per-turn figures (policies pipeline, gates_closed, as_sent, actual).
        `cancelled` is polled while it runs; when it returns True the call raises SimulationCancelled."""
        ...


    def close(self) -> None:
        """Let go of what the source opened (a recording's descriptor, a probe socket and its shared-memory
        ring) once nothing reads it: the app calls it when it exits, after its reader thread has stopped.
        What was received stays (a live session can still be saved). Idempotent."""
        ...


def cancelled_event() -> threading.Event | None:
    """The cancel flag of the Textual worker this runs in (set when the app quits), for a source's
    `follow()` to wait on instead of sleeping through it; None outside a worker (a test, a tool)."""
    worker = sys.modules.get("textual.worker")
    if worker is None:  # textual never loaded: no worker can be running; importing it here would load
        return None  # textual, rich and asyncio into every FileSource replay a CLI tool makes
    try:
        return worker.get_current_worker().cancelled_event  # type: ignore[no-any-return]
    except Exception:  # not inside a worker (or no textual): nobody to cancel us
        return None


class SimulationCancelled(Exception):
    """A newer session-wide what-if replaced this one."""


class FoldCancelled(Exception):
    """The worker folding a recording toward a far turn was cancelled (a step to another turn replaced
    it, or the app quits): the fold stopped between two checkpoint spans and keeps what it folded."""
