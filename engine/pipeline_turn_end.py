"""How a turn ends besides Pipeline._finish's general path: the journal's request event of a turn
(`_request_event`, eager and deferred turns alike), an express-lane turn's end (`_lane_record`, for
engine/pipeline_express.py), a recorded request rebuilt on a folded state as the live turn made it
(`rebuild_turn`; `rebuild_request` with its whole build: the inspector's fold of a probe's stream), and the switch from a replayed state to live
(`go_live`); `_prefix_blocks`, the cached prefix's block count every end records for the next turn's
cache-break attribution.

A base class of Pipeline (see engine/pipeline_state.py for the chain).
"""

from __future__ import annotations

from itertools import compress
from operator import attrgetter
from typing import Any

from engine import alerts as alert_rules
from engine.pipeline_feedback import Feedback
from engine.pipeline_request import Built, Request
from engine.policy.state import CompactionState
from engine.providers import SerializedRequest
from engine.recording.journal import Event
from engine.trace_lazy import TurnRecord

_MARKER = attrgetter("marker")


def _prefix_blocks(ser: SerializedRequest) -> int:
    last = ser.last_marked  # the serializer's (it placed the markers), else found in C
    if last is None:
        marks = list(compress(range(len(ser.blocks)), map(_MARKER, ser.blocks)))
        last = marks[-1] if marks else -1
    if last >= 0:
        return last + 1
    return max(0, len(ser.blocks) - 1) if ser.provider in ("openai", "prefix") else 0


class TurnEnd(Feedback):
    """A Pipeline's turn ends (the general one, _finish, is Pipeline's: it runs the express lane)."""

    def rebuild_turn(self, ev: Event) -> tuple[dict[str, Any], Any, bool]:
        """Rebuild a journaled request event `ev` on this folded state as the live turn made it (see
        _finish): its trace with the cache-break attribution and the request-time alerts, appended to
        the recent traces, then the event folded. Returns (the trace, the alert rules' verdict for
        `alerts.reevaluate` once the outcome is on it, whether the rebuilt request's hash is the
        event's `sha`). The agent's own fold of the turns it moved to disk builds each turn with it."""
        built, said, matched = self.rebuild_request(ev)
        return built.trace, said, matched

    def rebuild_request(self, ev: Event) -> tuple[Built, Any, bool]:
        """rebuild_turn, handing back the whole build (its trace is `.trace`): the inspector's fold of a
        probe's fold stream, whose build `cp-inspect find PID` searches (the turn is not built again)."""
        self.begin_request(ev["turn"])
        built = self.build(ev.get("bound", {}))
        trace = built.trace
        self._attribute(trace, built.serialized, built.plan)
        said = alert_rules.evaluate_rules(trace, self._recent_traces())
        trace["alerts"] = alert_rules.alerts_of(said)
        self._prev = (built.serialized.blocks, _prefix_blocks(built.serialized), self.config.model)
        self.traces.append(trace)
        self.fold(ev)
        return built, said, built.serialized.request_sha256 == ev.get("sha")

    def go_live(self, last: Built | None = None) -> None:
        """Continue live from a folded (replayed) state: the next request's cache-break attribution
        compares with `last` (the rebuilt previous request), and summaries call the summarizer again."""
        self._replay = False
        self._prev = (
            (last.serialized.blocks, _prefix_blocks(last.serialized), self.config.model) if last else None
        )

    def _lane_record(self, rec: TurnRecord, ser: SerializedRequest, sections: dict[str, str]) -> Request:
        """The end of an express-lane turn (engine/pipeline_express.py): its request event and record, as
        _finish_unobserved ends a turn."""
        # _request_event's event and fold's request branch, for what the lane's turn is: nothing bound,
        # the compaction state the pipeline holds (so no `compaction` field) and no spill failure.
        turn = self.turn
        ev: Event = {
            "k": "request",
            "turn": turn,
            "sha": ser.request_sha256,
            "time": self.clock(),
            "sections": sections,
        }
        # _close_pending's work: the message the pending parts close into is the lane's own, made from
        # these very parts this turn (_pending_msg), and the lane took the turn only because they send
        # something and do not fail silently (express.appended_since): neither list is to be told.
        closing = self._pending_msg
        if closing is not None:
            self.history.append(closing)
            self.pending = []
            self._pending_msg = None
        else:
            self._close_pending()
        if self.emergent.items:  # (expire's own test, without its frame)
            self.emergent.expire(turn - 1)
        self.turn = turn + 1
        self.flipped = []
        if self.history.chunk is not None:
            self._release_history()
        self.journal.append(ev)
        # (_prefix_blocks' answer where the serializer knows the last marked block, without its frame.)
        last = ser.last_marked
        self._prev = (
            ser.blocks,
            last + 1 if last is not None and last >= 0 else _prefix_blocks(ser),
            self.config.model,
        )
        self._open = rec
        self._open_alerts = None
        self.traces.append(rec)
        return Request(rec.turn, ser, rec)

    def _request_event(
        self,
        sha: str,
        sections: dict[str, str],
        bound: dict[str, dict[str, Any]],
        state: CompactionState | None,
        spill_failures: list[str],
    ) -> Event:
        """The journal's request event of this turn (eager and deferred turns alike)."""
        ev: Event = {
            "k": "request",
            "turn": self.turn,
            "sha": sha,
            "time": self.clock(),
            "sections": sections,
        }
        # Bind outputs and spill failures are what replay cannot recompute; omitted when empty.
        if bound:
            ev["bound"] = bound
        # The compaction state changes only at a compaction; replay folds it from here. (Identity
        # first: a held turn hands back the very state, and `!=` runs the dataclass's field-by-field
        # __eq__.)
        if state is not None and state is not self.compaction and state != self.compaction:
            ev["compaction"] = state.to_event()
        if spill_failures:
            ev["spill_failures"] = spill_failures
        return ev
