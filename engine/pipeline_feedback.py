"""Feedback, a turn's last stage: the cache break a request is attributed (`_attribute`: against the
request before it), the open turn's outcome (usage or error) settled on its trace with the alert rules
that read it run again, and the turn journaled (`_close_turn`). The public calls that bring the
outcome (record_usage, record_error, close_turn, annotate) are Pipeline's.

A base class of Pipeline (see engine/pipeline_state.py for the chain).
"""

from __future__ import annotations

from typing import Any

from engine import alerts as alert_rules
from engine.feedback import attribute_cache_break
from engine.pipeline_build import Building
from engine.plan import Plan
from engine.providers import SerializedRequest
from engine.trace_lazy import TurnEvent, TurnRecord


class Feedback(Building):
    """A Pipeline's Feedback stage (the open turn's outcome, alerts and journaling)."""

    def _attribute(self, trace: dict[str, Any], ser: SerializedRequest, p: Plan) -> None:
        prev = self._prev
        trace["cache_break"] = attribute_cache_break(
            prev[0] if prev else None,
            ser.blocks,
            prev[1] if prev else 0,
            model_changed=bool(prev and prev[2] != self.config.model),
            flipped_latches=trace["latch_flips"],
            actions=trace["actions"],
        )

    def _close_turn(self) -> None:
        """close_turn's work, for the public calls that do it inside their own _journals bracket (the
        next request, an outcome): two calls through the bracket a turn fewer."""
        t = self._open
        if t is not None:
            if isinstance(t, TurnRecord):
                # (Built now only if a probe client attached meanwhile: see _unwatched.)
                self.journal.append_deferred(TurnEvent(t), self._watched)
            else:
                self.journal.append({"k": "turn", "turn": t["turn"], "trace": t})
            self._open = None
            self._open_alerts = None

    def _settle(self, t: dict[str, Any] | TurnRecord | None, key: str, value: Any) -> None:
        """The open turn's outcome (`usage` or `error`) on its trace, the rules that read it run again,
        and the turn journaled."""
        if isinstance(t, TurnRecord):
            t.outcome(key, value)  # (the record runs the outcome rules when it is built)
        elif t is not None:
            t[key] = value
            self._outcome_alerts()
        else:
            return
        self._close_turn()

    def _recent_traces(self) -> list[dict[str, Any]]:
        """The traces before the one being built, as far back as any alert rule looks (a turn's record
        as what the rules read of it: see TurnRecord.alert_view)."""
        return self.traces.views(len(self.traces), alert_rules.LOOKBACK)

    def _outcome_alerts(self) -> None:
        """The open turn's alerts once its outcome is on its trace. The rules that read only the request
        said their piece when it was built, about the same trace and the same turns before it: only
        those that read the outcome run again."""
        t = self._open
        assert t is not None and not isinstance(t, TurnRecord)
        said = self._open_alerts
        traces = self.traces
        if said is not None and said[0] is t and traces and traces.raw(-1) is t:
            out = alert_rules.reevaluate(t, traces.views(len(traces) - 1, alert_rules.LOOKBACK), said[1])
        else:
            out = alert_rules.evaluate_rules(t, traces.views(len(traces) - 1, len(traces)))
        t["alerts"] = alert_rules.alerts_of(out)
