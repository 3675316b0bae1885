"""Replay: the engine's state is a fold over its journal.

`Replayer(events)` folds a recorded journal with no I/O (binder outputs, summaries and spill failures
come from the journal itself). `verify()` rebuilds every request and compares hashes; `replan(turn,
overrides)` folds up to turn t's request and re-plans it under other settings: no execute, no feedback.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .assembly import Measure
from .journal import Event, trace_of
from .pipeline import Built, Pipeline
from .spill import MemorySpill
from .tokens import TokenCounter


class ReplayError(Exception):
    pass


@dataclass(frozen=True)
class Overrides:
    window: int | None = None
    thresholds: dict[str, float] | None = None
    gates: dict[str, bool] | None = None
    provider: str | None = None

    def any(self) -> bool:
        return any(v is not None for v in (self.window, self.thresholds, self.gates, self.provider))


@dataclass(frozen=True)
class Mismatch:
    turn: int
    expected: str
    actual: str
    section: str

    def __str__(self) -> str:
        return (
            f"turn {self.turn}: request hash {self.actual[:12]} does not match the recorded {self.expected[:12]}"
            f" (first differing section: {self.section})"
        )


@dataclass
class VerifyReport:
    turns: int
    mismatches: list[Mismatch]

    @property
    def ok(self) -> bool:
        return not self.mismatches


class Replayer:
    def __init__(self, events: Iterable[Event], counter: TokenCounter | None = None) -> None:
        self.events: list[Event] = list(events)
        if not self.events or self.events[0].get("k") != "session":
            first = next((e for e in self.events if e.get("k") == "session"), None)
            if first is None:
                raise ReplayError(
                    "the journal has no session event: it was not written by the ContextPipe engine"
                )
        self.counter = counter if counter is not None else TokenCounter()  # an empty counter is falsy
        self.measure = Measure(self.counter)
        self.fail_keys = frozenset(
            f.split(":", 1)[0]
            for e in self.events
            if e.get("k") == "request"
            for f in e.get("spill_failures", ())
        )
        self.request_index = {e["turn"]: i for i, e in enumerate(self.events) if e.get("k") == "request"}
        self.recorded_traces = {e["turn"]: trace_of(e) for e in self.events if e.get("k") == "turn"}

    @property
    def turns(self) -> int:
        return len(self.request_index)

    def _fresh(self) -> Pipeline:
        session = next(e for e in self.events if e.get("k") == "session")
        cfg = session["config"]
        pipe = Pipeline(
            cfg["model"],
            cfg["provider"],
            cfg["window"],
            counter=self.counter,
            spill=MemorySpill(self.fail_keys),
            _replay=True,
        )
        pipe.measure = self.measure
        return pipe

    def _fold(self, pipe: Pipeline, ev: Event) -> None:
        pipe._apply(ev)
        if ev.get("k") == "blob":
            return
        if ev.get("k") == "turn":
            pipe.traces.append(trace_of(ev))

    def state_before(self, turn: int) -> tuple[Pipeline, Event]:
        """The pipeline folded up to (not including) turn `turn`'s request, and that request event."""
        if turn < 0:
            turn += self.turns
        if turn not in self.request_index:
            raise ReplayError(f"turn {turn} is not in this journal (it has turns 0..{self.turns - 1})")
        pipe = self._fresh()
        stop = self.request_index[turn]
        for ev in self.events[:stop]:
            self._fold(pipe, ev)
        pipe._close_pending()
        pipe.turn = turn
        return pipe, self.events[stop]

    def replan(self, turn: int, overrides: Overrides | None = None) -> Built:
        """Plan + Optimize + serialize turn `turn` again, optionally under other settings."""
        pipe, req = self.state_before(turn)
        cfg = pipe.config
        if overrides is not None and overrides.any():
            cfg = cfg.with_overrides(
                overrides.window, overrides.thresholds, overrides.gates, overrides.provider
            )
        built = pipe.build(req.get("bound", {}), cfg)
        pipe._prev = None
        if pipe.traces:
            prev = pipe.traces[-1]
            built.trace["usage_prev"] = prev.get("usage")
        return built

    def verify(self) -> VerifyReport:
        """Rebuild every request in one pass and compare with the recorded hashes."""
        pipe = self._fresh()
        mismatches: list[Mismatch] = []
        for ev in self.events:
            if ev.get("k") == "request":
                pipe._close_pending()
                built = pipe.build(ev.get("bound", {}))
                if built.serialized.request_sha256 != ev["sha"]:
                    got = {s["id"]: s["sha256"][:16] for s in built.trace["sections"]}
                    want: dict[str, Any] = ev.get("sections", {})
                    diff = [k for k in list(want) + list(got) if want.get(k) != got.get(k)]
                    mismatches.append(
                        Mismatch(
                            ev["turn"],
                            ev["sha"],
                            built.serialized.request_sha256,
                            diff[0] if diff else "(envelope)",
                        )
                    )
                pipe.traces.append(built.trace)
            self._fold(pipe, ev)
        return VerifyReport(self.turns, mismatches)
