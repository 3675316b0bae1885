"""A turn nobody read goes to disk unbuilt, and is rebuilt where it is read (issue 15).

An agent that never reads its traces builds none during its turns (engine/trace_lazy.py); before this,
its bounded journal built each such turn's trace as it moved the turn to disk, so past ~700 turns the
work came back to the agent's thread in bursts. Now the journal writes the turn's marker and rebuilds
the turn from the journal where it is read (engine/recording/turn_fold.py): iterating, indexing (back
and forth), a range read (the probe's), and the recorder's and replay's readers get the same events,
byte for byte, as a session whose traces were all built at their requests.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest

from engine.pipeline import Pipeline
from engine.recording.event_log import KEEP_DEFAULT, Deferred, EventLog
from engine.recording.replay import Replayer
from engine.tokens import CharTokenizer, TokenCounter
from engine.trace_lazy import TurnRecord


def _pipe(**kw: Any) -> Pipeline:
    p = Pipeline(
        kw.pop("model", "deepseek-chat"),
        kw.pop("provider", "openai"),
        6_000,
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        clock=lambda: 0.0,
        **kw,
    )
    p.identity("You are a careful coding agent.")
    p.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    p.user("Fix the bug.")
    return p


def _turns(p: Pipeline, start: int, n: int, read: bool) -> None:
    for t in range(start, start + n):
        calls = p.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t})}])
        p.tool_result(calls[0].id, f"output of step {t}\n" * (3 + t % 11))
        if t % 97 == 5:
            p.latch("mode", f"v{t % 3}")
        req = p.next_request()
        if read:
            assert isinstance(req.trace, dict)  # built at its request, as an observed agent's is
        if t % 53 == 7:
            p.record_error("overloaded", f"try again ({t})")
        else:
            p.record_usage(
                {"input_tokens": req.final_tokens + 40, "output_tokens": 12, "cache_read_tokens": t % 900}
            )


def _dumps(evs: Any) -> list[str]:
    return [json.dumps(e, default=repr) for e in evs]  # key order counts: a recording is written in it


def test_an_untraced_agent_builds_no_trace_when_its_journal_spills(monkeypatch: pytest.MonkeyPatch) -> None:
    """900 turns (~5,400 events, past KEEP_DEFAULT) nobody reads: the journal moves over a thousand
    events to disk and builds no turn record in doing so (the old code built each one it spilled:
    ~380 here). The census still counts the spilled turns."""
    built = [0]
    real = TurnRecord._build

    def counted(self: TurnRecord) -> dict[str, Any]:
        built[0] += 1
        return real(self)

    monkeypatch.setattr(TurnRecord, "_build", counted)
    p = _pipe()
    try:
        _turns(p, 0, 900, read=False)
        log = p.journal.events
        on_disk, kinds, _ = log.spilled_census()
        assert on_disk > 1_000 and kinds["turn"] > 150
        assert built[0] == 0
    finally:
        p.close()


def test_a_long_sessions_spilled_turns_read_back_as_built_at_their_requests() -> None:
    """1,500 turns, default bound: every reader of the journal gets what a session that built each trace
    at its request journaled, byte for byte: iteration, a range read, indexing forward and back, the
    marker-keeping range read a fold client uses, and a replay's verify."""
    lazy, ref = _pipe(), _pipe()
    try:
        _turns(lazy, 0, 1_500, read=False)
        _turns(ref, 0, 1_500, read=True)
        lazy.close_turn()
        ref.close_turn()
        a, b = lazy.journal.events, ref.journal.events
        assert a.keep == KEEP_DEFAULT and a.spilled_census()[0] > 4_000
        assert len(a._unbuilt) > 600  # the lazy side wrote its spilled turns unbuilt
        assert len(b._unbuilt) == 0
        want = _dumps(b)
        assert _dumps(a) == want
        n = len(a)
        assert _dumps(a.read_run(0, n)) == want
        turns = [i for i in a._unbuilt[::97]]
        for i in reversed(turns):  # back: the fold starts again from the session each time
            assert json.dumps(a[i], default=repr) == want[i]
        assert _dumps(a[turns[3] : turns[5]]) == want[turns[3] : turns[5]]
        raw = list(a.read_run(0, n, markers=True))
        assert [raw[i] for i in turns] == [{"k": "turn_deferred", "turn": b[i]["turn"]} for i in turns]
        assert _dumps(e for i, e in enumerate(raw) if i not in set(a._unbuilt)) == [
            w for i, w in enumerate(want) if i not in set(a._unbuilt)
        ]
        assert Replayer(a, lazy.counter).verify().ok
    finally:
        lazy.close()
        ref.close()


@pytest.mark.parametrize(
    "kw",
    [
        {"summarizer": lambda texts: f"summary of {len(texts)} messages"},
        {"policy": "wave1", "provider": "anthropic", "model": "claude-sonnet-4"},
        {"policy": "cost_aware:early=off", "provider": "bedrock", "model": "claude-sonnet-4"},
    ],
    ids=["summarizer", "wave1-anthropic", "early-off-bedrock"],
)
def test_other_policies_providers_and_a_summarizer_read_back_alike(kw: dict[str, Any]) -> None:
    """The rebuild folds what each policy, provider and a summarizer did (the summaries come from the
    journal): 400 turns, 240 events in memory, read back as the reference journaled them."""
    lazy, ref = _pipe(**dict(kw)), _pipe(**dict(kw))
    lazy.journal.events.keep = ref.journal.events.keep = 240
    lazy.journal.events.chunk = ref.journal.events.chunk = 48
    try:
        _turns(lazy, 0, 400, read=False)
        _turns(ref, 0, 400, read=True)
        assert len(lazy.journal.events._unbuilt) > 300
        assert _dumps(lazy.journal.events) == _dumps(ref.journal.events)
    finally:
        lazy.close()
        ref.close()


def test_another_thread_reads_the_rebuilt_turns_while_the_agent_spills() -> None:
    """A reader on another thread (the probe's I/O thread, say) goes through the journal while the
    agent goes on and spills: every turn it reads is built (never a marker), and equals the reference."""
    lazy, ref = _pipe(), _pipe()
    lazy.journal.events.keep = ref.journal.events.keep = 300
    lazy.journal.events.chunk = ref.journal.events.chunk = 60
    try:
        _turns(lazy, 0, 200, read=False)
        seen: list[Any] = []
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                seen.extend(lazy.journal.events.read_run(0, lazy.journal.events.spilled_census()[0]))

        th = threading.Thread(target=read)
        th.start()
        _turns(lazy, 200, 200, read=False)
        stop.set()
        th.join()
        _turns(ref, 0, 400, read=True)
        assert lazy.journal.events.spilled_census()[0] > 2_000
        turns = [e for e in seen if e.get("k") in ("turn", "turn_deferred")]
        assert turns and all(e["k"] == "turn" for e in turns)
        want = {e["turn"]: json.dumps(e, default=repr) for e in ref.journal.events if e.get("k") == "turn"}
        assert all(json.dumps(e, default=repr) == want[e["turn"]] for e in turns)
    finally:
        lazy.close()
        ref.close()


class _Recipe(Deferred):
    kind = "turn"

    def __init__(self, turn: int) -> None:
        self.turn, self.resolved = turn, 0

    def resolve(self) -> dict[str, Any]:
        self.resolved += 1
        return {"k": "turn", "turn": self.turn, "trace": {"turn": self.turn}}

    def marker(self) -> dict[str, Any]:
        return {"k": "turn_deferred", "turn": self.turn}


class _NoRebuild:
    def feed(self, ev: dict[str, Any]) -> tuple[int, None] | None:
        return (ev["turn"], None) if ev.get("k") == "turn_deferred" else None


def test_a_log_that_does_not_start_with_its_session_builds_what_it_spills() -> None:
    """Rebuilding folds from the session event on: a log without one at its start keeps the old way
    (each recipe built as it is written)."""
    log = EventLog(2, 1)
    log.refold = _NoRebuild
    recipes = [_Recipe(t) for t in range(6)]
    log.append({"k": "source"})
    for r in recipes:
        log.append(r)
    assert log.spilled_census()[0] >= 4 and len(log._unbuilt) == 0
    assert all(r.resolved for r in recipes[:3])
    assert [e["k"] for e in log] == ["source"] + ["turn"] * 6


def test_a_turn_that_cannot_be_rebuilt_reads_as_its_marker(caplog: pytest.LogCaptureFixture) -> None:
    """A rebuild that does not give the journaled request (a state the journal does not hold) hands
    the reader the turn's marker, and says so once."""
    log = EventLog(2, 1)
    log.refold = _NoRebuild
    recipes = [_Recipe(t) for t in range(6)]
    log.append({"k": "session"})
    for r in recipes:
        log.append(r)
    assert not any(r.resolved for r in recipes[:3])  # written unbuilt
    with caplog.at_level(logging.WARNING, logger="contextpipe.journal"):
        evs = list(log)
    assert evs[1] == {"k": "turn_deferred", "turn": 0} and evs[-1]["k"] == "turn"
    assert len([r for r in caplog.records if "could not be rebuilt" in r.getMessage()]) == 1


def test_the_probes_lookup_of_a_spilled_turn_rebuilds_that_turn_only() -> None:
    """A client's `trace N` for a turn on disk (engine.probe.lean.find_turn) bisects the journal by
    turn number: it reads the markers it passes as they are (EventLog.peek) and rebuilds only the turn
    it finds, one fold (forward from the last, or from the session), not one per marker it passed."""
    from engine.probe.lean import find_turn

    lazy, ref = _pipe(), _pipe()
    log, want = lazy.journal.events, ref.journal.events
    log.keep = want.keep = 600
    log.chunk = want.chunk = 120
    try:
        _turns(lazy, 0, 500, read=False)
        _turns(ref, 0, 500, read=True)
        folds, fed = [0], [0]
        real: Any = log.refold
        assert real is not None

        class Counted:
            def __init__(self) -> None:
                folds[0] += 1
                self.fold = real()

            def feed(self, ev: dict[str, Any]) -> Any:
                fed[0] += 1
                return self.fold.feed(ev)

        log.refold = Counted
        at = {e["turn"]: i for i, e in enumerate(want) if e.get("k") == "turn"}
        for turn in (300, 40, 41, 250, 5):
            before = folds[0]
            got = find_turn(log, turn)
            assert got is not None and json.dumps(got, default=repr) == json.dumps(
                find_turn(want, turn), default=repr
            )
            assert folds[0] - before <= 1
        assert folds[0] == 3  # 41 after 40, and 250 after 41: the same fold goes on
        # Events folded: to turn 300's event, to 40's, on to 250's, to 5's (each once).
        assert fed[0] == at[300] + at[250] + at[5] + 3, (fed[0], at)
    finally:
        lazy.close()
        ref.close()


def test_a_turn_rebuilt_once_is_read_back_not_rebuilt_again() -> None:
    """The first reader's rebuild is written back to the journal's file: a second reader from the start
    (another client's fill, a recorder after a probe) reads the same events and folds nothing."""
    lazy, ref = _pipe(), _pipe()
    log = lazy.journal.events
    log.keep = ref.journal.events.keep = 300
    log.chunk = ref.journal.events.chunk = 60
    try:
        _turns(lazy, 0, 300, read=False)
        _turns(ref, 0, 300, read=True)
        fed = [0]
        real: Any = log.refold

        class Counted:
            def __init__(self) -> None:
                self.fold = real()

            def feed(self, ev: dict[str, Any]) -> Any:
                fed[0] += 1
                return self.fold.feed(ev)

        log.refold = Counted
        want = _dumps(ref.journal.events)
        assert _dumps(log) == want
        first = fed[0]
        assert first > 1_000
        assert _dumps(log.read_run(0, len(log))) == want and _dumps(log) == want
        assert fed[0] == first  # nothing folded again
        _turns(lazy, 300, 100, read=False)  # more spilled: only those are rebuilt, on from the last fold
        _turns(ref, 300, 100, read=True)
        assert _dumps(log) == _dumps(ref.journal.events)
        assert fed[0] - first < 1_000
    finally:
        lazy.close()
        ref.close()
