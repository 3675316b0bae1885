"""Replay: the engine's state is a fold over its journal.

`Replayer(events)` folds a recorded journal with no I/O (binder outputs, summaries and spill failures
come from the journal itself). `verify()` rebuilds every request and compares hashes; `replan(turn,
overrides)` folds up to turn t's request and re-plans it under other settings: no execute, no feedback.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from engine.alerts import LOOKBACK
from engine.assembly import Measure
from engine.errors import ContextPipeError
from engine.pipeline import Built, Pipeline
from engine.recording.history_log import HistoryLog
from engine.recording.journal import Event, trace_of
from engine.recording.provider_ids import ProviderIds
from engine.spill import MemorySpill
from engine.tokens import TokenCounter

if TYPE_CHECKING:
    # For replan's annotation only: engine/whatif.py is loaded by the callers that build overrides (the
    # CLI's explain), not by every process that replays (simulate).
    from engine.whatif import Overrides


class ReplayError(ContextPipeError):
    """The journal cannot be replayed. `event_index` names the event that could not be folded, if one."""

    def __init__(self, message: str, event_index: int | None = None) -> None:
        self.event_index = event_index
        super().__init__(message)


class EmptyJournal(ReplayError):
    """The journal holds no event at all (a header and nothing else): `report` lists such a session as
    idle, as it lists one with no request, instead of skipping it as damaged."""


# What folding or building raises on an event of the wrong shape (a damaged or hand-made recording).
# ContextPipeError subclasses some of these; callers catch it first, as it names its own problem.
MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def not_the_engines(exc: BaseException, what: str = "the recording") -> str:
    """What every reader says of an event of the wrong shape (one of MALFORMED raised), after naming the
    event or the file: the file's fault, not a crash, and which exception said so."""
    return (
        f"not what the engine writes ({type(exc).__name__}: {exc}); {what} is damaged or was not "
        "written by the ContextPipe engine"
    )


def _malformed(i: int, ev: Any, exc: Exception) -> ReplayError:
    kind = ev.get("k") if isinstance(ev, dict) else None
    return ReplayError(f"event {i} ({kind!r}) is {not_the_engines(exc)}", i)


# Folding a long journal from the start for every re-plan is O(turns). The Replayer keeps one private
# "cursor" pipeline folded up to the last turn asked for (stepping forward folds only the new events)
# and a snapshot every CHECKPOINT_EVERY turns (stepping back starts from the nearest one).
CHECKPOINT_EVERY = 128
# The states before the last few turns asked for are kept too (shallow snapshots): the inspector
# prepares the next turn's content while a person looks at one, which moves the cursor past the turn
# on screen; a what-if of that turn then starts from its own state instead of the last checkpoint.
RECENT_STATES = 4
# Pipeline attributes that are not folded state: shared by a snapshot and its original. The journal's
# blob dict only ever gains content-addressed entries, so sharing it is safe.
_SHARED = frozenset(
    {
        "journal",
        "counter",
        "measure",
        "spill",
        "_serializers",
        "summarizer",
        "clock",
        "binders",
        "recorder",
        "probe",
        "config",
    }
)
_IMMUTABLE = (int, float, str, bool, bytes, tuple, frozenset, type(None))


def _snapshot(pipe: Pipeline) -> Pipeline:
    """A copy of a pipeline's folded state that folding or building on either side cannot disturb.
    Lists and dicts hold frozen artifacts, so a shallow copy is enough; anything else is deep-copied."""
    c = copy.copy(pipe)
    for k, v in vars(pipe).items():
        if k in _SHARED or isinstance(v, _IMMUTABLE):
            continue
        if type(v) is list:
            setattr(c, k, list(v))
        elif isinstance(v, deque):  # recent traces: decoded dicts nobody mutates, shared like list items
            # Entries as kept (engine.trace_lazy.Traces yields built traces when iterated, and a deep
            # copy of it would build and copy every one: ~2 ms of a what-if on pydicom-1413).
            setattr(c, k, type(v)(deque.__iter__(v), maxlen=v.maxlen))
        elif type(v) is dict:
            setattr(c, k, dict(v))
        else:
            setattr(c, k, copy.deepcopy(v))
    return c



@dataclass(frozen=True)
class Mismatch:
    """A replayed turn whose request hash differs from the recorded one."""
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
    """The outcome of replaying a recording: how many turns were checked and which did not match."""
    turns: int
    mismatches: list[Mismatch]

    @property
    def ok(self) -> bool:
        return not self.mismatches


class _UnkeptSpill(MemorySpill):
    """A replay's spill backend that keeps no text: the spilled text is the recording's, and nothing in
    a replay reads a spill back (MemorySpill kept every large tool output a long replay passed)."""

    def put(self, key: str, data: str) -> str:
        uri = super().put(key, data)  # a write the recorded run failed fails here too
        del self._data[key]
        return uri


def _parked(pipe: Pipeline) -> Pipeline:
    """A checkpoint's snapshot with its conversation past the task on disk (see HistoryLog.park): a
    checkpoint is only started from again, and holding each one's live window in memory made a long
    replay hold every text it had passed (128 turns of them per checkpoint before the first release).
    It keeps the traces a build reads of those before it (the previous one, and the alert rules' look-back),
    not all the recent ones: stepping turn by turn, each checkpoint held ~30 decoded traces (~13 KB each) of
    the turns just passed, ~3 MB per 1,000 turns that grew with the session."""
    snap = _snapshot(pipe)
    snap.history.park()
    traces = snap.traces  # the snapshot's own deque (the fold's is not touched)
    while len(traces) > LOOKBACK:
        traces.popleft()
    return snap


def _restored(snap: Pipeline) -> Pipeline:
    """A copy of a checkpoint or recent state to fold on, its live window back in memory: the messages
    from the shallowest cut a build reads (the policy's, and a shadow candidate's), as _release_history
    keeps them."""
    pipe = _snapshot(snap)
    cut = pipe.compaction.cut
    shadow = getattr(pipe, "_shadow", None)
    if shadow is not None:
        cut = min(cut, shadow.state.cut)
    pipe.history.unpark(cut)
    return pipe


class Replayer:
    def __init__(
        self, events: Iterable[Event], counter: TokenCounter | None = None, history_chunk: int | None = None
    ) -> None:
        """`history_chunk`: fold with the conversation behind the compaction cut moved to disk in chunks
        of at least this many messages, as a live session's is (engine/recording/history_log.py), and
        checkpoints parked there whole: what a long replay holds is then its live window, not every
        message it passed. None (the default): everything in memory, no scratch file."""
        # A paged journal (engine/recording/paged_events.py: a recording's events kept in its file) is
        # held as it is, and grows by itself; anything else is copied into a list.
        self.events: Sequence[Event] = (
            cast(Sequence[Event], events) if getattr(events, "paged", False) else list(events)
        )
        self._indexed = 0  # events indexed so far
        if not self.events:
            # A header and nothing else: its agent stopped before the first chunk was written, which is
            # not the foreign file the message below describes.
            raise EmptyJournal(
                "the recording holds no events: its agent stopped (or is still starting) before its first "
                "turn was written; there is nothing to replay"
            )
        if self.events[0].get("k") != "session":
            first = next((e for e in self.events if e.get("k") == "session"), None)
            if first is None:
                raise ReplayError(
                    "the journal has no session event: it was not written by the ContextPipe engine"
                )
        self.counter = counter if counter is not None else TokenCounter()  # an empty counter is falsy
        self.history_chunk = history_chunk
        self.measure = Measure(self.counter)
        self.fail_keys: frozenset[str] = frozenset()
        self.request_index: dict[int, int] = {}
        self._lock = threading.Lock()
        self._cursor: tuple[int, Pipeline] | None = None  # (events folded, pipeline), private
        self._checkpoints: dict[int, Pipeline] = {}  # events folded -> snapshot (at a request)
        self._recent: dict[int, Pipeline] = {}  # the same for the last RECENT_STATES stops asked for
        # for_turns: the request events of the turns it keeps, by event index (None: self.events is whole).
        self._kept: dict[int, Event] | None = None
        # What-ifs at other providers: their folds of the conversation's call ids, kept across re-plans.
        self._provider_ids = ProviderIds()
        self._index_from(0)

    def _index_from(self, start: int) -> None:
        events = self.events
        marks = getattr(events, "request_marks", None)
        if marks is not None:
            # A paged journal noted its requests as it read them: its pages are not read again here.
            for i, turn, failures in marks(start):
                self._index_one(i, {"k": "request", "turn": turn, "spill_failures": failures})
        else:
            for i in range(start, len(events)):
                self._index_one(i, events[i])
        self._indexed = len(events)

    def _index_one(self, i: int, e: Event) -> None:
        if not isinstance(e, dict):
            raise ReplayError(f"event {i} is a {type(e).__name__}, not a map", i)
        if e.get("k") == "request":
            turn, failures = e.get("turn"), e.get("spill_failures", ())
            if type(turn) is not int or not isinstance(failures, list | tuple):
                raise ReplayError(f"event {i} (request) has no int turn or a malformed spill list", i)
            self.request_index[turn] = i
            fails = frozenset(str(f).split(":", 1)[0] for f in failures)
            if fails - self.fail_keys:
                self.fail_keys |= fails
                # Replay fails these spill writes from the first turn on: folded state is stale.
                self._cursor = None
                self._checkpoints.clear()
                self._recent.clear()

    def extend(self, events: Iterable[Event]) -> None:
        """Append the journal's next events (a recording read lazily, a live session). The fold cache
        stays valid: only the new events are folded when a later turn is asked for. A paged journal has
        grown by itself: `events` is not read, the events it gained are indexed."""
        with self._lock:
            start = self._indexed
            if not getattr(self.events, "paged", False):
                cast(list[Event], self.events).extend(events)
            self._index_from(start)
            self.__dict__.pop("recorded_traces", None)

    @cached_property
    def recorded_traces(self) -> dict[int, dict[str, Any]]:
        # Lazy: decoding every trace of a long recording is only worth it when someone asks.
        return {e["turn"]: trace_of(e) for e in self.events if e.get("k") == "turn"}

    @property
    def turns(self) -> int:
        return len(self.request_index)

    def new_pipeline(self) -> Pipeline:
        """A pipeline in replay mode for this journal's session, folded up to nothing: fold events into
        it with `Pipeline.fold` (binder outputs, summaries and spill failures come from the journal)."""
        i, session = next((i, e) for i, e in enumerate(self.events) if e.get("k") == "session")
        try:
            cfg = session["config"]
            pipe = Pipeline(
                cfg["model"],
                cfg["provider"],
                cfg["window"],
                counter=self.counter,
                spill=(MemorySpill if self.history_chunk is None else _UnkeptSpill)(self.fail_keys),
                replay=True,
            )
        except ContextPipeError as exc:
            raise ReplayError(f"event {i} ('session'): {exc}", i) from None
        except Exception as exc:  # a config map of the wrong shape: the file's fault, said as such
            raise _malformed(i, session, exc) from None
        pipe.measure = self.measure
        if self.history_chunk is not None:
            # Keeping the calls of what it writes: a what-if at another provider folds every call id.
            pipe.history = HistoryLog(self.history_chunk, keep_calls=True)  # nothing folded into it yet
        return pipe

    @staticmethod
    def _take_trace(pipe: Pipeline, ev: Event | None) -> None:
        if ev is not None:
            pipe.fold(ev)

    def state_before(self, turn: int) -> tuple[Pipeline, Event]:
        """The pipeline folded up to (not including) turn `turn`'s request, and that request event."""
        if turn < 0:
            turn += self.turns
        if turn not in self.request_index:
            raise ReplayError(f"turn {turn} is not in this journal (it has turns 0..{self.turns - 1})")
        stop = self.request_index[turn]
        if self._kept is not None and stop not in self._kept:
            raise ReplayError(f"turn {turn} was not kept by this replayer (it re-plans turns {sorted(self._req_turns())})")
        with self._lock:
            pipe = self._fold_to(stop)
            # Closing pending parts and setting the turn is what folding the request event does first,
            # so the cursor stays a plain fold; the caller gets its own copy to build on.
            pipe.begin_request(turn)
            # Least recently asked for first: a snapshot is taken once per stop and moved on re-use.
            kept = self._recent.pop(stop, None)
            self._recent[stop] = kept if kept is not None else _snapshot(pipe)
            while len(self._recent) > RECENT_STATES:
                del self._recent[next(iter(self._recent))]
            return _snapshot(pipe), self.events[stop] if self._kept is None else self._kept[stop]

    def advance(self, turn: int) -> None:
        """Fold the cursor on up to turn `turn`'s request (a checkpoint turn: the turn events folded are
        the ones a fold straight past it folds), nothing built or kept beyond the fold's own checkpoints.
        A reader of a long recording folds a far jump this way a step at a time, so the texts it has
        just read are still in its window when they are folded (engine/recording/text_window.py)."""
        stop = self.request_index.get(turn)
        if stop is None or (self._kept is not None and stop not in self._kept):
            return
        with self._lock:
            if self._cursor is None or self._cursor[0] < stop:  # never back: a later turn was asked for
                self._fold_to(stop)

    def _fold_to(self, stop: int) -> Pipeline:
        """The cursor folded up to (not including) event `stop` (held by the caller's lock)."""
        at, pipe = self._start_near(stop)
        # Building a turn reads only the previous turn's trace, so a turn event is decoded only when
        # it is the last one before a snapshot or the stop: a long fold decodes a few, not thousands.
        last_turn: Event | None = None
        i = at
        try:
            for i in range(at, stop):
                ev = self.events[i]
                k = ev.get("k")
                if k == "request" and ev["turn"] % CHECKPOINT_EVERY == 0 and i not in self._checkpoints:
                    self._take_trace(pipe, last_turn)
                    last_turn = None
                    self._checkpoints[i] = _parked(pipe)
                if k == "turn":
                    last_turn = ev
                else:
                    pipe.fold(ev)
            self._take_trace(pipe, last_turn)
        except Exception as exc:  # a damaged or hostile event: the folded state is unusable
            self._cursor = None
            self._checkpoints.clear()
            self._recent.clear()
            if isinstance(exc, ReplayError):
                raise
            raise _malformed(i, self.events[i], exc) from None
        if self.history_chunk is not None:
            # The running token count of the conversation is kept by whoever builds, and only the
            # copies handed out build: the cursor's stayed at 0, so every build counted the whole
            # history again, read back from disk once it was released (a step grew with the file).
            pipe.history_tokens()
        self._cursor = (stop, pipe)
        return pipe

    def _req_turns(self) -> list[int]:
        return [t for t, i in self.request_index.items() if self._kept is not None and i in self._kept]

    def _start_near(self, stop: int) -> tuple[int, Pipeline]:
        """The furthest folded state at or before event `stop`: the cursor, else a copy of a checkpoint
        or of a recent state."""
        cursor = self._cursor[0] if self._cursor is not None and self._cursor[0] <= stop else -1
        saved = max((i for i in (*self._checkpoints, *self._recent) if i <= stop), default=-1)
        if self._cursor is not None and cursor >= 0 and cursor >= saved:
            return self._cursor
        if saved < 0:
            return 0, self.new_pipeline()
        return saved, _restored(self._checkpoints.get(saved) or self._recent[saved])

    def replan(self, turn: int, overrides: Overrides | None = None) -> Built:
        """Plan + Optimize + serialize turn `turn` again, optionally under other settings."""
        if turn < 0:
            turn += self.turns  # (as state_before counts it: the index named if the build fails)
        pipe, req = self.state_before(turn)
        cfg = pipe.config
        if overrides is not None and not overrides.is_empty():
            cfg = cfg.with_overrides(
                overrides.window, overrides.thresholds, overrides.gates, overrides.provider
            )
            if overrides.provider:
                pipe.seed_ids_at(self._provider_ids.at, overrides.provider)
        try:
            built = pipe.build(req.get("bound", {}), cfg)
        except ContextPipeError:
            raise  # the engine's own refusals (a budget the overrides cannot meet): the caller's to say
        except Exception as exc:
            # A hostile or damaged event folded without complaint (a tool whose description is a number)
            # and broke the build: a bare TypeError reached the inspector's re-plans (the what-if, a
            # section's content), which said nothing of the file (benchmarks/fuzz_recording.py found it).
            i = self.request_index[turn]
            raise ReplayError(
                f"turn {turn} (event {i}) cannot be re-planned: the events before it are not what the engine "
                f"writes ({type(exc).__name__}: {exc}); the recording is damaged or was not written by the "
                "ContextPipe engine",
                i,
            ) from None
        if pipe.traces:
            prev = pipe.traces[-1]
            built.trace["usage_prev"] = prev.get("usage")
        return built

    @classmethod
    def for_turns(cls, events: Iterable[Event], turns: Collection[int], counter: TokenCounter | None = None) -> Replayer:
        """A replayer that re-plans only `turns` (replan and state_before of any other turn raise
        ReplayError), folding `events` once as they are read and keeping none of them: what it keeps is
        the folded state before each of those turns' requests (shallow snapshots, as checkpoints are)
        and those request events. Replayer(events) keeps the whole journal for random access, which
        explaining the last turn of a long recording does not need: the 10,000-turn bench file's events
        were 53 of the 86 MB explain traced.

        The fold is the one state_before does from the first event (a turn event is folded only when it
        is the last one before a checkpoint or a kept turn), so a kept turn re-plans to the same bytes.
        A journal whose requests name spill failures is refused (ReplayError): replay fails those writes
        from the first turn on, which a single pass learns too late; fold it with Replayer(events)."""
        wanted = frozenset(turns)
        self: Replayer | None = None
        pipe: Pipeline | None = None
        kept: dict[int, Event] = {}
        pending: Event | None = None  # the last turn event not yet folded
        i = -1
        for i, ev in enumerate(events):
            if self is None:
                if not isinstance(ev, dict) or ev.get("k") != "session":
                    raise ReplayError("the journal does not start with its session event", 0)
                self = cls([ev], counter)
                pipe = self.new_pipeline()
            else:
                self._index_one(i, ev)
            if self.fail_keys:
                raise ReplayError("the journal names spill failures: fold it whole (Replayer(events))", i)
            assert pipe is not None
            try:
                k = ev.get("k")
                if k == "request":
                    t = ev["turn"]
                    if t % CHECKPOINT_EVERY == 0 or t in wanted:
                        self._take_trace(pipe, pending)
                        pending = None
                    if t in wanted:
                        self._checkpoints[i] = _snapshot(pipe)
                        kept[i] = ev
                if k == "turn":
                    pending = ev
                else:
                    pipe.fold(ev)
            except Exception as exc:  # a damaged or hostile event, as in state_before
                if isinstance(exc, ReplayError):
                    raise
                raise _malformed(i, ev, exc) from None
        if self is None:
            return cls([])  # raises what the constructor says of an empty journal
        self._kept = kept
        return self

    @classmethod
    def index_stream(
        cls,
        read: Callable[[], Iterable[Event]],
        counter: TokenCounter | None = None,
        visit: Callable[[Event], object] | None = None,
    ) -> Replayer:
        """A replayer for a journal that `read()` hands out afresh each call (a recording read from disk),
        holding none of its events: one pass here checks each event's shape (as the constructor does) and
        finds the session, the turns and the spill failures (replay fails those writes from the first turn
        on, so they must be known before a fold). `new_pipeline()` and `turns` work, and `verify(read())`
        or a caller's own fold over `read()`; the random access of state_before/replan does not (its
        `events` is the session event alone). `visit`, when given, sees each event after its shape is
        checked: a caller gathers its own index in the same pass (simulate: usages, times, fingerprints)."""
        probe = cls.__new__(cls)
        probe.events, probe.request_index, probe.fail_keys = [], {}, frozenset()
        probe._cursor, probe._checkpoints, probe._recent, probe._kept = None, {}, {}, None
        session: Event | None = None
        n = 0
        for ev in read():
            probe._index_one(n, ev)  # checks each event's shape and gathers fail_keys and the turns
            if visit is not None:
                visit(ev)
            if session is None and isinstance(ev, dict) and ev.get("k") == "session":
                session = ev
            n += 1
        if session is None:
            if n == 0:
                cls([])  # raises what the constructor says of an empty journal
            raise ReplayError("the journal has no session event: it was not written by the ContextPipe engine")
        replayer = cls([session], counter)
        replayer.fail_keys, replayer.request_index = probe.fail_keys, probe.request_index
        return replayer

    @classmethod
    def verify_stream(cls, read: Callable[[], Iterable[Event]], counter: TokenCounter | None = None) -> VerifyReport:
        """verify() of a journal that `read()` hands out afresh each call (a recording read from disk),
        holding none of its events: the first pass finds the session and the spill failures
        (index_stream), the second folds and rebuilds. Holding them all, verify took memory that grew
        with the file (a 26 MB version-1 file of tiny events: 550 MB)."""
        return cls.index_stream(read, counter).verify(read())

    def verify(self, events: Iterable[Event] | None = None) -> VerifyReport:
        """Rebuild every request in one pass and compare with the recorded hashes (of `events`, the
        whole journal again, when given: see verify_stream)."""
        pipe = self.new_pipeline()
        mismatches: list[Mismatch] = []
        for i, ev in enumerate(self.events if events is None else events):
            try:
                self._verify_one(pipe, ev, mismatches)
            except ContextPipeError as exc:
                if isinstance(exc, ReplayError):
                    raise
                raise ReplayError(f"event {i} ({ev.get('k')!r}): {exc}", i) from None
            except Exception as exc:  # a hostile or damaged event: any type error is the file's fault
                raise _malformed(i, ev, exc) from None
        return VerifyReport(self.turns, mismatches)

    def _verify_one(self, pipe: Pipeline, ev: Event, mismatches: list[Mismatch]) -> None:
        if ev.get("k") == "request":
            if not isinstance(ev.get("sha"), str):  # printed by a Mismatch, after this loop's checks
                raise ValueError(f"request event has no str hash 'sha' (got {ev.get('sha')!r:.40})")
            pipe.begin_request(ev["turn"])
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
        pipe.fold(ev)
