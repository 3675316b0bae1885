"""The one data-source interface the inspector app is written against.

LiveSource (probe socket), FileSource (recording) and SyntheticSource (tests, development)
all implement `Source`. The app only ever calls `follow()`, `replan()`, `simulate()`, `request_body()`,
`section_content()` and `save()` from worker threads, so an implementation may block. A source may
also offer `load_chunks()` (an iterator of trace lists) so a long recording is drawn before it is
fully decoded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

THRESHOLD_KEYS: tuple[str, ...] = ("trim_schemas", "compact_history", "aggressive_prune")
GATE_KEYS: tuple[str, ...] = ("reorder", "trim_schemas", "clear_tool_results", "spill", "llm_summary", "drop_rounds")
PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "bedrock", "prefix")


@dataclass(frozen=True)
class Overrides:
    """What-if settings; `None` means "as recorded"."""

    budget: int | None = None
    thresholds: dict[str, float] | None = None
    gates: dict[str, bool] | None = None
    provider: str | None = None

    def is_empty(self) -> bool:
        return not (self.budget or self.thresholds or self.gates or self.provider)


@dataclass(frozen=True)
class NewTurn:
    trace: dict


@dataclass(frozen=True)
class Disconnected:
    reason: str


@dataclass(frozen=True)
class Dropped:
    """The probe dropped `count` events because this client was too slow."""

    count: int


SourceEvent = NewTurn | Disconnected | Dropped


@runtime_checkable
class Source(Protocol):
    kind: str  # "live" | "replay"
    header: dict  # model, provider, pid/command (live) or path (replay), engine_version

    def load_initial(self) -> list[dict]: ...

    def follow(self) -> Iterator[SourceEvent]: ...

    def section_content(self, turn: int, section_id: str) -> str: ...

    def request_body(self, turn: int) -> str: ...

    def replan(self, turn: int, overrides: Overrides) -> dict: ...

    def save(self, path: str | Path) -> None: ...

    def simulate(self, overrides: Overrides, cancelled: Callable[[], bool] | None = None) -> dict:
        """Session-wide what-if: the whole session under `overrides`, priced, as `cp-inspect simulate
        --json` prints it with per-turn figures (policies pipeline, gates_closed, as_sent, actual).
        `cancelled` is polled while it runs; when it returns True the call raises SimulationCancelled."""
        ...


class SimulationCancelled(Exception):
    """A newer session-wide what-if replaced this one."""
