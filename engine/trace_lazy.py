"""A turn's trace built when something reads it, not on every turn (issue 12: the turn pays only for
what is observed).

Every request gets a trace (engine/trace.py), its cache-break attribution and the alert rules' verdict,
and the journal keeps it in a `turn` event. When nothing is subscribed to the journal (no recording, no
live probe, no OpenTelemetry export) nothing reads any of that during the turn: an agent that never
looks at `Request.trace`, `Pipeline.traces` or `journal.events` would pay ~20 us a turn (a tenth of a
steady turn at 32k) for dicts nobody reads. A `TurnRecord` holds what the trace is made from instead,
and builds the very dict the eager path builds the first time anything reads it: `Request.trace`, the
`Traces` deque, the journal's `turn` event (engine/recording/event_log.py's `Deferred`), or the journal
spilling it to disk.

What it holds is values taken at the request, never a mutable object the session changes later: the
Measure's figures (`Figures`: its memos move on with later builds), the latch flips and spill failures
as copies, the previous request's blocks and prefix (immutable once sent), the previous trace's section
hashes (for `changed`) and, for the alert rules, the three things they read from earlier traces
(ALERT_KEYS) as one small dict per turn. Nothing refers to an earlier record, so no chain of records
stays alive. A held turn's decision texts (the pay-back's fields and the reason, which only the trace
reads) are left to cost_aware's `Outcome.finish` and written when the record is built. Outcome and
annotations (usage, an error, `Pipeline.annotate`) are remembered in order
and applied after the request-time alerts, as the eager path applies them, so the dict, its key order
and its alerts are the same whenever it is built (tests/test_trace_lazy.py compares the two sides).

What is not read is never built, in memory or on disk: a session longer than the journal's bound
(event_log.KEEP_DEFAULT, ~700 turns) writes a turn nobody read as its `turn_deferred` marker (its
record is dropped then) and a reader of the journal gets the turn event rebuilt from the journal's own
events by the fold a fold client runs (engine/recording/turn_fold.py), the same dict, in the reader's
thread. (Before, the spill built each record as it wrote it, in the agent's thread: ~40 traces in one
turn every ~40 turns.) A record something read, or one holding an annotation no other event says
(TurnEvent.private), is written built. Records are only made for a bounded journal (an unbounded one
would keep every record's inputs for the session).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol, cast

from engine import alerts as alert_rules
from engine.feedback import attribute_cache_break
from engine.plan import history_pressure
from engine.recording.event_log import Deferred
from engine.trace import Figures, trace_from

if TYPE_CHECKING:
    from engine.config import PipelineConfig
    from engine.optimize import OptimizeResult
    from engine.plan import Plan, Reserves
    from engine.providers.base import Block

# What the alert rules read from the traces before the one they judge (alerts.py: compaction_cascade's
# actions, low_cache_hit's cacheable prefix and latch flips). A record keeps these for later turns.
ALERT_KEYS = ("actions", "cacheable_prefix_tokens", "latch_flips")

# Building a record's dict happens once, on whichever thread reads it first.
_BUILD = threading.Lock()
# And a TurnEvent's dict: the live probe's I/O thread may read it from the log (a client's snapshot)
# while the agent's thread hands it to the probe, which knows an event in both by its identity.
# (Taken before _BUILD, never inside it.)
_RESOLVE = threading.Lock()


class InputsMaker(Protocol):
    """What TurnRecord.later takes: called once, it makes the record's inputs. (A Protocol, not
    Callable[[], ...]: mypy counts no NamedTuple as a Callable, whatever its __call__, and the express
    lane's maker is one: pipeline_express._LaneInputs.)"""

    def __call__(self) -> tuple[Any, ...]: ...


class TurnRecord:
    """One turn's trace, built on first read. `final_tokens`, `ceiling` and `turn` are known at once
    (the turn's budget check and the usage's calibration read them); `section_shas` is what the next
    turn's trace compares with; `alert_view` what the next turns' alert rules read."""

    __slots__ = (
        "turn",
        "final_tokens",
        "ceiling",
        "section_shas",
        "alert_view",
        "_inputs",
        "_later",
        "_outcome",
        "_trace",
        "_earlier",
        "_said",
        "_unsaid",
    )

    def __init__(
        self,
        turn: int,
        cfg: PipelineConfig,
        p: Plan,
        reserves: Reserves,
        res: OptimizeResult,
        fig: Figures,
        prev_sections: dict[str, str],
        latch_flips: list[str],
        spill_failures: list[str],
        ratio: float,
        decision: dict[str, Any] | None,
        finish: Callable[[], None] | None,
        prev_request: tuple[list[Block], int] | None,
        model_changed: bool,
        earlier: list[dict[str, Any]],
    ) -> None:
        """`latch_flips`, `spill_failures` and `earlier` (the alert views of up to alerts.LOOKBACK turns
        before, oldest first) must be the caller's own copies: the record keeps them as they are."""
        self.turn = turn
        self.final_tokens = fig.final_tokens
        self.ceiling = p.ceiling
        self.section_shas = fig.shas
        self.alert_view: dict[str, Any] = {
            "actions": res.actions,
            "cacheable_prefix_tokens": fig.cacheable_prefix_tokens,
            "latch_flips": latch_flips,
        }
        self._inputs: tuple[Any, ...] | None = (
            cfg,
            p,
            reserves,
            res,
            fig,
            prev_sections,
            latch_flips,
            spill_failures,
            ratio,
            decision,
            finish,
            prev_request,
            model_changed,
            earlier,
        )
        self._later: dict[str, Any] = {}  # keys set on the open trace after the request, in order
        self._outcome = False  # usage or an error arrived: the outcome rules ran again then
        self._trace: dict[str, Any] | None = None
        # Once built: what the rules read from earlier turns and said at the request (an outcome that
        # comes after the trace was built runs only the outcome rules again).
        self._earlier: list[dict[str, Any]] = earlier
        self._said: alert_rules.Outcomes = ()
        # An annotation set on it that no other journal event says (see `set`): a reader that rebuilds
        # the turn from the journal cannot, and is given it built (TurnEvent.private).
        self._unsaid = False

    @classmethod
    def later(
        cls,
        turn: int,
        final_tokens: int,
        ceiling: int,
        section_shas: dict[str, str],
        alert_view: dict[str, Any],
        earlier: list[dict[str, Any]],
        make: InputsMaker,
    ) -> TurnRecord:
        """A record whose inputs (what __init__ takes, as a tuple in its order) are made by `make` when
        the trace is first built: the express lane's turn (engine/pipeline_express.py), which knows at
        once only what the turn and the next read."""
        rec = cls.__new__(cls)
        rec.turn, rec.final_tokens, rec.ceiling = turn, final_tokens, ceiling
        rec.section_shas, rec.alert_view = section_shas, alert_view
        rec._inputs = make  # type: ignore[assignment]
        rec._later, rec._outcome, rec._trace, rec._earlier, rec._said = {}, False, None, earlier, ()
        rec._unsaid = False
        return rec

    def made_by(self, make: object) -> bool:
        """Whether this record's inputs are still to be made by `make` (the `later` argument), or are
        being made by it now: the express lane's maker asks it of the record its pipeline carries, to
        know that no turn came since its own (holding that turn's Carried would keep it alive)."""
        return self._inputs is make

    def read(self) -> bool:
        """Whether the trace was built (something read it)."""
        return self._trace is not None

    def set(self, key: str, value: Any, apart: bool = False) -> None:
        """What `trace[key] = value` on the open turn's trace does (an annotation). Under the build's
        lock: another thread may be building the trace (it reads what was set after the request).

        `apart`: the caller journals it on its own too (Pipeline.annotate, while a probe has clients),
        so a fold of the journal sets it as this does, in the same order among the turn's other later
        keys (the outcome's events are journaled too). One set not so journaled, or of `alerts` (a
        rebuild sets it before an outcome that comes after, where the build re-evaluates it last),
        makes the record one only its own build can give (`_unsaid`)."""
        if not apart or key == "alerts":
            self._unsaid = True
        with _BUILD:
            t = self._trace
            if t is None:
                self._later[key] = value
                return
        t[key] = value

    def outcome(self, key: str, value: Any) -> None:
        """The call's outcome (`usage` or `error`) on the trace, and the alert rules that read it run
        again (alerts.reevaluate, as Pipeline._outcome_alerts does for an eager trace)."""
        with _BUILD:
            t = self._trace
            if t is None:
                self._later[key] = value
                self._outcome = True
                return
        t[key] = value
        t["alerts"] = alert_rules.alerts_of(alert_rules.reevaluate(t, self._earlier, self._said))

    def trace(self) -> dict[str, Any]:
        """The trace, built the first time it is asked for: the same dict every time after."""
        t = self._trace
        if t is not None:
            return t
        with _BUILD:
            if self._trace is None:
                self._trace = self._build()
                self._inputs = None  # nothing the record held for it stays alive
                self._later = {}
            return self._trace

    def _build(self) -> dict[str, Any]:
        assert self._inputs is not None
        if callable(self._inputs):  # a record made by `later`
            self._inputs = self._inputs()
        (cfg, p, reserves, res, fig, prev_sections, flips, failures, ratio, decision, finish, prev, model_changed,
         earlier) = self._inputs  # fmt: skip
        if finish is not None:  # the decision's texts, left for the trace (cost_aware.Outcome.finish)
            finish()
        # What Pipeline.build adds to build_trace's dict, then what _finish adds: the cache break and
        # the alerts said at the request.
        trace = cast(
            dict[str, Any], trace_from(self.turn, cfg, p, reserves, res, fig, prev_sections, flips, failures)
        )
        trace["calibration"] = round(ratio, 4)
        if decision is not None:
            trace["pressure"]["raw_history"] = history_pressure(decision["raw_tokens"], cfg.window, ratio)
            trace["compaction"] = decision
        trace["cache_break"] = attribute_cache_break(
            prev[0] if prev else None,
            fig.blocks,
            prev[1] if prev else 0,
            model_changed=model_changed,
            flipped_latches=trace["latch_flips"],
            actions=trace["actions"],
        )
        said = self._said = alert_rules.evaluate_rules(trace, earlier)
        trace["alerts"] = alert_rules.alerts_of(said)
        # Then what happened to the open trace after the request, in the order it happened.
        for key, value in self._later.items():
            trace[key] = value
        if self._outcome:
            trace["alerts"] = alert_rules.alerts_of(alert_rules.reevaluate(trace, earlier, said))
        return trace


class TurnEvent(Deferred):
    """The journal's `turn` event of a record: {"k": "turn", "turn": n, "trace": the trace}."""

    __slots__ = ("_record", "_event")
    kind = "turn"

    def __init__(self, record: TurnRecord) -> None:
        self._record: TurnRecord | None = record
        self._event: dict[str, Any] | None = None

    def resolve(self) -> dict[str, Any]:
        ev = self._event
        if ev is None:
            with _RESOLVE:  # one dict, whichever thread reads it first (see _RESOLVE)
                ev = self._event
                if ev is None:
                    rec = self._record
                    assert rec is not None
                    ev = self._event = {"k": "turn", "turn": rec.turn, "trace": rec.trace()}
                    self._record = None
        return ev

    def marker(self) -> dict[str, Any] | None:
        # A live probe's fold clients rebuild the trace themselves (engine.probe.elide.fold_out): they
        # are told where the turn event is, and which turn, so journal positions hold.
        rec = self._record
        return {"k": "turn_deferred", "turn": rec.turn} if rec is not None else None

    def built(self) -> bool:
        rec = self._record
        return rec is None or rec.read()

    def private(self) -> bool:
        # Annotations (Pipeline.annotate) are journaled on their own only while a probe has clients
        # (the record knows which were: TurnRecord.set); the outcome (usage, error) always is.
        rec = self._record
        return rec is not None and rec._unsaid


class Traces(deque[Any]):
    """Pipeline.traces: the recent traces, oldest first. An entry may be a TurnRecord; reading it
    (indexing, iterating) hands back its built trace, so readers see plain trace dicts. `raw` reads an
    entry as it is kept (the pipeline's own look-backs, which a record answers without building)."""

    if TYPE_CHECKING:

        def raw(self, i: int) -> dict[str, Any] | TurnRecord: ...

    else:
        # deque's own item access (a C method: no Python frame for the pipeline's look-back every turn).
        raw = deque.__getitem__

    def views(self, stop: int, back: int) -> list[dict[str, Any]]:
        """What the alert rules read of the `back` entries before index `stop` (alert_view of each)."""
        return [
            e.alert_view if type(e) is TurnRecord else e
            for e in islice(deque.__iter__(self), max(0, stop - back), stop)
        ]

    def __getitem__(self, i: int) -> dict[str, Any]:  # type: ignore[override]
        e = deque.__getitem__(self, i)
        return e.trace() if type(e) is TurnRecord else cast(dict[str, Any], e)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for e in deque.__iter__(self):
            yield e.trace() if type(e) is TurnRecord else e

    def __reversed__(self) -> Iterator[dict[str, Any]]:
        for e in deque.__reversed__(self):
            yield e.trace() if type(e) is TurnRecord else e
