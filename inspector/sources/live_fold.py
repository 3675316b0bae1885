"""The live source's own fold of an agent's journal, for the probe's fold stream (engine.probe.elide.fold_out).

On that stream the agent does not build its turns' traces (an attached inspector would otherwise make
every turn build one: ~100-200 us of a 1-2 ms turn). It sends the events the engine folds, and in place
of each turn event it left unbuilt a `{"k": "turn_deferred", "turn": N}` marker. `TraceFold` folds those
events, in journal order, into a replay Pipeline of its own (what `replay` does with a recording's
journal, engine/recording/replay.py) and builds each request as the agent did (Pipeline._finish):
the trace, its cache-break attribution against the previous request, the alert rules over the recent
traces, then the outcome (usage or error, and the rules that read it) and the annotations in journal
order. At the marker the turn's trace is done: `feed` hands it back.

Each rebuilt request's hash is compared with the request event's `sha`; a turn that does not match is
handed back as a mismatch, and the source asks the agent for its own trace of it (`trace N`). A `turn`
event the agent did build (for a recorder, another client) is its trace as it is, and replaces the
rebuilt one for the turns after it. A spill write the agent's run failed is failed by the fold's pipeline
too, from the request event that first lists it (as content_search.JournalStream does): the agent kept
that content, and a fold that spilled it rebuilt every later request to another hash.

`on_build`, when given, is handed each request's whole build as it is made (the turn, the Built):
`cp-inspect find PID` indexes what each turn sent from it (content_search.FoldIndex), so that a turn is
built once, not once for its trace and again for the search.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.pipeline import Pipeline
from engine.recording.journal import trace_of
from engine.recording.replay import Replayer
from engine.recording.turn_fold import settle_outcome
from engine.spill import MemorySpill
from engine.tokens import TokenCounter

if TYPE_CHECKING:
    from engine.pipeline_request import Built


@dataclass
class Folded:
    """One turn closed by the journal: its trace rebuilt (`trace`), or None when the rebuilt request's
    hash did not match the agent's (`mismatch`) or the turn's request was not folded (from before what
    the fold has)."""

    turn: int
    trace: dict[str, Any] | None
    mismatch: bool = False


class TraceFold:
    """Folds journal events (from the first, in order) and rebuilds each turn's trace; not thread-safe."""

    def __init__(
        self,
        counter: TokenCounter | None = None,
        on_build: Callable[[int, Built], None] | None = None,
    ) -> None:
        self.counter = counter if counter is not None else TokenCounter()
        self.on_build = on_build  # handed each request's build (see the module's docstring)
        self.pipe: Pipeline | None = None
        self.folded = 0  # events fed
        self.rebuilt = 0  # turns whose trace was rebuilt to the request's hash
        self.mismatches: list[int] = []  # turns whose rebuilt request did not match
        self._open: dict[str, Any] | None = None  # the open turn's trace (rebuilt)
        self._said: Any = None  # the alert rules' verdict on it at its request
        self._bad: int | None = None  # the open turn, if its rebuilt request did not match

    def feed(self, ev: dict[str, Any]) -> Folded | None:
        """Fold one event; a turn's result when `ev` closes it (its marker, or its built `turn`)."""
        self.folded += 1
        k = ev.get("k")
        pipe = self.pipe
        if k == "session" and pipe is None:
            self.pipe = pipe = Replayer([ev], self.counter).new_pipeline()
        if pipe is None:
            return None
        if k == "request":
            self._request(pipe, ev)
            return None
        if k == "usage":
            pipe.fold(ev)
            self._outcome(pipe, "usage", dict(ev["usage"]))
            return None
        if k == "error":
            pipe.fold(ev)
            kind, message = ev.get("kind"), ev.get("message", "")
            self._outcome(pipe, "error", f"{kind}: {message}"[:500])
            return None
        if k == "annotate":
            t = self._open
            if t is not None and t.get("turn") == ev.get("turn"):
                t[ev["key"]] = ev.get("value")
            return None
        if k == "turn_deferred" or (k == "turn" and not isinstance(ev.get("trace"), dict)):
            # (A turn held only as its summary, not its trace: closed as the marker closes it.)
            return self._close(ev.get("turn"))
        if k == "turn":
            # Built by the agent: its own trace, for this turn and for the rules of the turns after it.
            trace = trace_of(ev)
            traces = pipe.traces
            if self._open is not None and traces and traces.raw(-1) is self._open:
                traces.pop()
            traces.append(trace)
            self._open, self._said, self._bad = None, None, None
            return Folded(ev["turn"], trace)
        pipe.fold(ev)
        return None

    def _request(self, pipe: Pipeline, ev: dict[str, Any]) -> None:
        """What Pipeline._finish does for a turn, on the folded state (Pipeline.rebuild_request)."""
        listed, spill = ev.get("spill_failures"), pipe.spill
        if listed and isinstance(spill, MemorySpill):  # (the replay's: its fail_keys read at each write)
            keys = frozenset(str(f).split(":", 1)[0] for f in listed)
            if not keys <= spill.fail_keys:
                spill.fail_keys = spill.fail_keys | keys
        built, said, matched = pipe.rebuild_request(ev)
        self._open, self._said = built.trace, said
        self._bad = None if matched else ev["turn"]
        if self.on_build is not None:
            self.on_build(ev["turn"], built)

    def _outcome(self, pipe: Pipeline, key: str, value: Any) -> None:
        """Pipeline._settle on the open turn's trace: the outcome, and the rules that read it again."""
        if self._open is not None:
            settle_outcome(pipe, self._open, self._said, key, value)

    def _close(self, turn: Any) -> Folded | None:
        t, bad = self._open, self._bad
        self._open, self._said, self._bad = None, None, None
        if type(turn) is not int:
            return None
        if t is None or t.get("turn") != turn:
            return Folded(turn, None)  # its request is before what was folded
        if bad is not None:
            self.mismatches.append(turn)
            return Folded(turn, None, mismatch=True)
        self.rebuilt += 1
        return Folded(turn, t)
