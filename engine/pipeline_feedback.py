"""Feedback, a turn's last stage: the cache break a request is attributed (`_attribute`: against the
request before it), the open turn's outcome (usage or error) settled on its trace with the alert rules
that read it run again, and the turn journaled (`_close_turn`); and the public calls that bring the
outcome: record_usage, record_error, close_turn and annotate (what a capture layer adds to the trace).

A base class of Pipeline (see engine/pipeline_state.py for the chain).
"""

from __future__ import annotations

from typing import Any

from engine import alerts as alert_rules
from engine.errors import ConfigError
from engine.feedback import Usage, attribute_cache_break, normalize_usage
from engine.pipeline_build import Building
from engine.pipeline_guard import _journals
from engine.plan import Plan
from engine.providers import SerializedRequest
from engine.recording.journal import Event
from engine.trace_lazy import TurnEvent, TurnRecord


class Feedback(Building):
    """A Pipeline's Feedback stage (the open turn's outcome, alerts and journaling)."""

    # ---- the public calls: the outcome, an annotation, the turn closed
    @_journals
    def close_turn(self) -> None:
        """Journal the open turn (its trace) now. record_usage(), record_error(), the next request and
        close() all do this; call it when a session stops without them and the journal is read as is."""
        self._close_turn()

    @_journals
    def annotate(self, key: str, value: Any) -> None:
        """Attach a value to the open turn's trace (journaled with it). Capture layers use it for what
        only they know, such as a tapped client's running count of journaling failures (`tap_errors`).
        A turn whose trace waits to be read (see engine/trace_lazy.py) while a live probe has clients
        journals it on its own too (`{"k": "annotate", "turn", "key", "value"}`): a client of the fold
        stream builds that trace itself (engine.probe.elide.fold_out) and has no other way to see it.
        Folding ignores the kind; a recording never has one (its turns are built as they come)."""
        t = self._open
        if isinstance(t, TurnRecord):
            probe = self.probe
            apart = probe is not None and probe.client_count > 0
            t.set(key, value, apart)  # (the record knows whether a fold of the journal can set it too)
            if apart:
                self.journal.append({"k": "annotate", "turn": t.turn, "key": key, "value": value})
        elif t is not None:
            t[key] = value

    @_journals
    def record_usage(self, usage: Any, *, finish_reason: str | None = None) -> Usage:
        """Feedback after a successful call: statistics learn, the turn's trace gets real usage.
        `finish_reason`: why the model stopped, as the response says it (Anthropic's `stop_reason`,
        OpenAI's `choices[0].finish_reason`); kept with the usage for the OpenTelemetry export."""
        u = normalize_usage(usage)
        if finish_reason:
            u = u.with_extra(finish_reason=str(finish_reason))
        t = self._open
        est = (t.final_tokens if isinstance(t, TurnRecord) else t["final_tokens"]) if t else 0
        d = u.to_dict()
        # `time`: when the call's outcome came, so a recording's spans last as long as their calls.
        ev: Event = {"k": "usage", "turn": self.turn - 1, "usage": d, "estimated": est, "time": self.clock()}
        # (fold(ev)'s work: the usage branch with the Usage normalized above, not normalized again.)
        self._learn_usage(u, est)
        self.journal.append(ev)
        # What u.to_dict() gives, as its own dict. (_settle's work, a deferred record's in line: every turn.)
        if isinstance(t, TurnRecord):
            t.outcome("usage", dict(d))  # (the record runs the outcome rules when it is built)
            self._close_turn()
        else:
            self._settle(t, "usage", dict(d))
        return u

    @_journals
    def record_error(self, kind: str, message: str = "") -> None:
        """A failed call: one diagnostic record, no usage sample. kind 'prompt_too_long' starts recovery."""
        if type(kind) is not str or not kind or type(message) is not str:
            raise ConfigError(
                f"record_error(kind={kind!r:.60}, message={message!r:.60}): kind is a non-empty str (e.g. "
                "'prompt_too_long', 'overloaded', 'error') and message a str; pass str(exc) for an exception"
            )
        self._emit({"k": "error", "turn": self.turn - 1, "kind": kind, "message": message[:2000],
                    "time": self.clock()})
        self._settle(self._open, "error", f"{kind}: {message}"[:500])

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
