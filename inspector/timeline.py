"""Timeline: the traces received so far, where the person is, and which turns are interesting.

Pure state with no Textual imports, so stepping rules are unit-testable and the app only mirrors
`current` into a reactive. Turns are addressed by position in `traces` (a recording may not start
at turn 0; panels show `trace["turn"]`). For a long recording `traces` holds `summarize()`d turns
(what the strip, alerts, sparkline and stepping read); the source decodes a whole trace when a turn
is shown.
"""

from __future__ import annotations

import bisect
import sys
from dataclasses import dataclass, field

from engine.wording import counted


def summarize(trace: dict) -> dict:
    """A turn's trace reduced to what the timeline strip, sparkline, alerts and stepping read (~0.5 KB
    instead of ~13 KB decoded): same keys and shapes, so every session-wide view accepts either.
    Repeated words (tiers, rules, steps) are interned: 10,000 turns share one copy of each."""
    # The calibration puts final_tokens on the provider's scale (the strip's bars and hit rate, where the
    # provider gave no prompt count: panels/provider_scale.sent).
    out = {k: trace.get(k) for k in ("turn", "final_tokens", "calibration", "error")}
    if trace.get("retries"):  # failed attempts sent again before its answer (a `n` stop, see interesting_reasons)
        out["retries"] = len(trace["retries"])
    if trace.get("tap_errors"):  # a tapped client's journaling failures so far (the status line shows it)
        out["tap_errors"] = trace["tap_errors"]
    out["tier"] = sys.intern(str(trace.get("tier")))
    # The break's section and cause, in the trace's own shape: the strip tells a compaction's own rewrite
    # of the history (drawn "c") from a break nobody meant ("✖"). Few turns break, so this costs little.
    brk = trace.get("cache_break")
    out["cache_break"] = ({"section": sys.intern(str(brk.get("section", ""))), "cause": sys.intern(str(brk.get("cause", "")))}
                          if isinstance(brk, dict) else bool(brk) or None)
    out["alerts"] = [
        {"rule": sys.intern(str(a.get("rule", ""))), "severity": sys.intern(str(a.get("severity", "info"))),
         "message": a.get("message", "")}
        for a in trace.get("alerts") or ()
    ]
    out["pressure"] = {"predictive": trace["pressure"]["predictive"]}
    usage = trace.get("usage")
    # Both halves of the hit rate: the strip divides by what the provider counted, as every other view does.
    out["usage"] = ({"cache_read_tokens": usage.get("cache_read_tokens", 0), "input_tokens": usage.get("input_tokens", 0)}
                    if usage else None)
    out["actions"] = [{"step": sys.intern(step)} for step in sorted({a["step"] for a in trace.get("actions") or ()})]
    comp = trace.get("compaction")
    if comp and comp.get("decision") == "compacted":  # the cost_aware policy's pay-back, for the strip
        out["compaction"] = {"decision": "compacted", "text": comp.get("text", "")}
    return out


def interesting_reasons(trace: dict, previous: dict | None) -> list[str]:
    """Why a turn deserves a stop when jumping: tier change, cache break, alert, error, a call retried."""
    reasons = []
    if previous is not None and previous.get("tier") != trace.get("tier"):
        reasons.append(f"tier {previous.get('tier')} -> {trace.get('tier')}")
    if trace.get("cache_break"):
        reasons.append("cache break")
    if trace.get("alerts"):
        reasons.append(counted(len(trace['alerts']), 'alert'))
    if trace.get("error"):
        reasons.append("error")
    if trace.get("retries"):  # (a list on a whole trace, its length on a summary)
        reasons.append("retried")
    return reasons


@dataclass
class Timeline:
    """The turns seen so far, the one shown, and whether the view follows the newest."""
    traces: list[dict] = field(default_factory=list)
    current: int = 0
    # Follow the newest turn until the person steps back; End (or stepping onto the last turn) resumes.
    follow: bool = True
    interesting: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        loaded, self.traces = self.traces, []
        self.extend(loaded)

    def __len__(self) -> int:
        return len(self.traces)

    @property
    def last(self) -> int:
        return max(0, len(self.traces) - 1)

    def trace(self, index: int | None = None) -> dict | None:
        i = self.current if index is None else index
        return self.traces[i] if 0 <= i < len(self.traces) else None

    def extend(self, traces: list[dict]) -> None:
        for trace in traces:
            previous = self.traces[-1] if self.traces else None
            self.traces.append(trace)
            if interesting_reasons(trace, previous):
                self.interesting.append(len(self.traces) - 1)
        if self.follow:
            self.current = self.last

    def refresh(self) -> None:
        """Work out the interesting turns again: turns held as stand-ins were filled in place (a live
        agent's history, see sources.HistoryFilled)."""
        self.interesting = [
            i for i, trace in enumerate(self.traces) if interesting_reasons(trace, self.traces[i - 1] if i else None)
        ]

    def go(self, index: int) -> int:
        self.current = min(max(0, index), self.last)
        self.follow = self.current == self.last
        return self.current

    def step(self, delta: int) -> int:
        return self.go(self.current + delta)

    def next_interesting(self) -> int | None:
        i = bisect.bisect_right(self.interesting, self.current)
        return self.go(self.interesting[i]) if i < len(self.interesting) else None

    def prev_interesting(self) -> int | None:
        i = bisect.bisect_left(self.interesting, self.current)
        return self.go(self.interesting[i - 1]) if i > 0 else None

    def index_of_turn(self, turn: int) -> int | None:
        """Position of the trace whose `turn` field is `turn` (turn numbers are sorted)."""
        lo = bisect.bisect_left(self.traces, turn, key=lambda t: t["turn"])
        return lo if lo < len(self.traces) and self.traces[lo]["turn"] == turn else None

    def index_at_or_after(self, turn: int) -> int:
        """Position of the first trace whose turn is `turn` or later (the last one if none is)."""
        return min(bisect.bisect_left(self.traces, turn, key=lambda t: t["turn"]), self.last)
