"""The agent's own rebuild of turns its journal moved to disk unbuilt (issue 15).

A turn nobody read keeps its trace as a recipe (engine/trace_lazy.py). When the bounded journal
(event_log.EventLog) moves such a turn to disk it writes the turn's `{"k": "turn_deferred", "turn": N}`
marker, not the built trace: a record cannot be pickled cheaply (it holds the previous request's
blocks), and building it there put the trace work of an untraced agent back in its thread, in bursts.
Everything the trace is made from is in the journal already (the session, the sources, the messages,
the request events with their bound content, the usage, the errors): `TurnFold` folds those events, in
journal order, into a replay Pipeline (engine/recording/replay.py) and rebuilds each request as the
agent's turn did (Pipeline.rebuild_turn: the trace, the cache break against the previous request, the
request-time alerts; then the outcome and the rules that read it). It is the fold a live inspector
runs on the probe's fold stream (inspector/sources/live_fold.py), in the engine: a reader of the
journal (its iteration, indexing, a range read, the recorder, the probe's history) gets the same `turn`
event it got when the spill built it.

A rebuilt request whose hash is not the request event's `sha` (a state the journal does not say, such as
a history spill that failed in the live session) gives no trace: the reader is handed the marker, and
one warning says so (event_log.EventLog._rebuild).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine import alerts as alert_rules
from engine.tokens import TokenCounter, Tokenizer

if TYPE_CHECKING:
    from engine.pipeline import Pipeline


class TurnFold:
    """Folds journal events from the first, in order; `feed` hands back (turn, trace or None) for the
    event that closes a turn the journal holds as its marker. Not thread-safe (the log locks it)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        # A counter of its own: the agent's is the agent thread's (its caches are not locked), and the
        # tokenizer is what makes the counts the same.
        self.counter = TokenCounter(tokenizer)
        self.pipe: Pipeline | None = None
        self._open: dict[str, Any] | None = None  # the open turn's rebuilt trace
        self._said: Any = None  # the alert rules' verdict on it at its request
        self._matched = False  # whether the open turn's rebuilt request is the journaled one

    def feed(self, ev: dict[str, Any]) -> tuple[int, dict[str, Any] | None] | None:
        k = ev.get("k")
        pipe = self.pipe
        if k == "session" and pipe is None:
            from engine.recording.history_log import CHUNK_DEFAULT
            from engine.recording.replay import Replayer

            # The conversation behind the compaction cut on disk, as the agent's own is: a fold kept
            # for a reader of a long session holds its live window, not every message.
            self.pipe = pipe = Replayer([ev], self.counter, history_chunk=CHUNK_DEFAULT).new_pipeline()
        if pipe is None:
            return None
        if k == "request":
            self._open, self._said, self._matched = pipe.rebuild_turn(ev)
        elif k == "usage":
            pipe.fold(ev)
            self._outcome(pipe, "usage", dict(ev["usage"]))
        elif k == "error":
            pipe.fold(ev)
            self._outcome(pipe, "error", f"{ev.get('kind')}: {ev.get('message', '')}"[:500])
        elif k == "annotate":  # (journaled on its own while a probe had clients: see Pipeline.annotate)
            t = self._open
            if t is not None and t.get("turn") == ev.get("turn"):
                t[ev["key"]] = ev.get("value")
        elif k == "turn_deferred":
            return self._close(ev.get("turn"))
        elif k == "turn":
            # Built by the agent (read, or written whole): its own trace, for the rules of the turns after.
            traces = pipe.traces
            if self._open is not None and traces and traces.raw(-1) is self._open:
                traces.pop()
            traces.append(ev["trace"])
            self._open, self._said = None, None
        else:
            pipe.fold(ev)
        return None

    def _outcome(self, pipe: Pipeline, key: str, value: Any) -> None:
        if self._open is not None:
            settle_outcome(pipe, self._open, self._said, key, value)

    def _close(self, turn: Any) -> tuple[int, dict[str, Any] | None] | None:
        t, matched = self._open, self._matched
        self._open, self._said = None, None
        if type(turn) is not int:
            return None
        if t is None or t.get("turn") != turn or not matched:
            return turn, None
        return turn, t


def settle_outcome(pipe: Pipeline, t: dict[str, Any], said: Any, key: str, value: Any) -> None:
    """What Pipeline._settle does to an open turn's rebuilt trace `t`: the outcome (`usage` or `error`)
    on it, and the alert rules that read it run again (against what they said at the request, `said`,
    when `t` is still the newest trace). Shared by this fold and the inspector's (live_fold.TraceFold):
    both must settle a rebuilt turn exactly as the agent did."""
    t[key] = value
    traces = pipe.traces
    if said is not None and traces and traces.raw(-1) is t:
        out = alert_rules.reevaluate(t, traces.views(len(traces) - 1, alert_rules.LOOKBACK), said)
    else:
        out = alert_rules.evaluate_rules(t, traces.views(len(traces) - 1, len(traces)))
    t["alerts"] = alert_rules.alerts_of(out)
