"""A turn nothing observes builds its trace, cache break and alerts when they are read (trace_lazy).

The reference is the same pipeline observed (a subscriber on its journal, as a recorder or a probe is):
there every turn builds its trace at the request, as before. Random sessions (appends, compactions,
latch flips, errors, annotations, explains, tiny windows) must give the same request bytes, the same
traces and the same journal, byte for byte and key for key, whether the lazy side's traces are read at
once, later, never until the end, or after the journal moved them to disk; a counting test shows an
unobserved turn builds none of it (on 3e11df2 every turn built its trace and ran the alert rules).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import engine.trace_lazy as trace_lazy
from engine import alerts as alert_rules
from engine import pipeline_build, pipeline_feedback
from engine.pipeline import Pipeline
from engine.trace_lazy import TurnRecord
from tests.support.counting import count_calls
from tests.test_turn_lineage import _feed, _pipe


def _observed(p: Pipeline) -> Pipeline:
    p.journal.subscribe(lambda ev: None)  # what a recorder, probe or exporter does
    return p


def _start(p: Pipeline) -> None:
    p.identity("You are a careful coding agent.")
    p.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    p.user("Fix the bug.")


def _dump(x: Any) -> str:
    return json.dumps(x, default=repr)  # key order counts: a journal is written in it


def _same(a: Any, b: Any) -> None:
    """a and b dump alike (a short message where they part: pytest's diff of two long dumps takes
    minutes)."""
    x, y = _dump(a), _dump(b)
    if x != y:
        at = next((i for i, (c, d) in enumerate(zip(x, y, strict=False)) if c != d), min(len(x), len(y)))
        raise AssertionError(
            f"differ at {at}: {x[max(0, at - 80) : at + 80]!r} vs {y[max(0, at - 80) : at + 80]!r}"
        )


def run_both(ops: list[tuple[str, int]], window: int, policy: str, read: str, keep: int | None = None) -> int:
    """One session through an unobserved (lazy) and an observed (eager) pipeline; every output compared.
    `read`: when the lazy side's traces are read: "now" (right after each request), "later" (a few
    turns on, through Pipeline.traces), "end" (only the journal, at the end). Returns lazy turns."""
    lazy, eager = _pipe(window, policy, False, True), _observed(_pipe(window, policy, False, True))
    if keep is not None:
        for p in (lazy, eager):
            p.journal.events.keep, p.journal.events.chunk = keep, max(1, keep // 2)
    for p in (lazy, eager):
        _start(p)
    reqs: list[tuple[Any, Any]] = []
    deferred = 0
    try:
        for t, (op, r) in enumerate(ops):
            for p in (lazy, eager):
                _feed(p, op, r, t)
            if op in ("window", "margin", "source", "latch", "tool", "untool", "emerge", "content") and r % 3:
                continue
            if op == "explain":
                _same(lazy.explain(), eager.explain())
                continue
            try:
                a = lazy.next_request()
            except Exception as e:  # over a tiny window: both fail alike, with the same message
                with pytest.raises(type(e)) as e2:
                    eager.next_request()
                assert str(e2.value) == str(e)
                break
            b = eager.next_request()
            deferred += type(a._trace) is TurnRecord
            assert a.bytes == b.bytes and a.turn == b.turn
            assert (a.ceiling, a.final_tokens) == (b.trace["ceiling"], b.trace["final_tokens"])
            reqs.append((a, b))
            if read == "now":
                _same(a.trace, b.trace)
            if r % 7 == 0:
                for p in (lazy, eager):
                    p.annotate("tap_errors", r)
            if r % 11 == 0:
                for p in (lazy, eager):
                    p.record_error("prompt_too_long" if r % 2 else "error", f"rejected {r}")
                continue
            factor = 1.05 + (r % 5) * 0.05
            cached = int(b.trace["cacheable_prefix_tokens"] * (0.1 if r % 4 == 0 else 1.0))
            for p in (lazy, eager):
                p.record_usage(
                    {
                        "input_tokens": int(b.final_tokens * factor),
                        "output_tokens": 20 + r % 300,
                        "cache_read_tokens": cached,
                    }
                )
            if read == "later" and t % 5 == 4:
                _same(list(lazy.traces), list(eager.traces))
        if read != "end":
            for a, b in reqs:
                _same(a.trace, b.trace)
        lazy.close_turn()
        eager.close_turn()
        _same(list(lazy.journal.events), list(eager.journal.events))
        _same(list(lazy.traces), list(eager.traces))
        return deferred
    finally:
        lazy.close()
        eager.close()


ops_st = st.lists(
    st.tuples(
        st.sampled_from(
            ("round",) * 14
            + ("user", "big", "window", "margin", "source", "huge", "explain")
            + ("latch", "tool", "untool", "emerge", "content")
        ),
        st.integers(0, 1_000),
    ),
    min_size=15,
    max_size=70,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=ops_st,
    window=st.sampled_from((2_401, 3_000, 4_001, 6_000)),
    policy=st.sampled_from(("cost_aware", "cost_aware:early=off", "wave1", "gates_closed")),
    read=st.sampled_from(("now", "later", "end")),
)
def test_a_trace_built_when_read_is_the_trace_built_at_the_request(
    ops: list[tuple[str, int]], window: int, policy: str, read: str
) -> None:
    deferred = run_both(ops, window, policy, read)
    event(f"lazy turns: {'none' if not deferred else '1-9' if deferred < 10 else '10+'}")


SESSION = [("round", i) for i in range(40)] + [("latch", 3), ("round", 41), ("user", 7), ("round", 77)]


@pytest.mark.parametrize("read", ["now", "later", "end"])
def test_a_compacting_session_with_latches_errors_and_annotations(read: str) -> None:
    assert run_both(SESSION, 4_001, "cost_aware", read) >= 30


def test_records_the_journal_moves_to_disk_are_built_as_they_go() -> None:
    """A journal that keeps 8 events in memory spills the rest: each turn record is built as it is
    written, and what reads back is what the eager pipeline journaled."""
    assert run_both(SESSION, 4_001, "cost_aware", "end", keep=8) >= 30


def _turns(p: Pipeline, n: int, start: int = 0) -> list[Any]:
    out = []
    for t in range(start, start + n):
        _feed(p, "round", t, t)
        req = p.next_request()
        p.record_usage({"input_tokens": req.final_tokens + 5, "output_tokens": 30})
        out.append(req)
    return out


def test_an_unobserved_turn_builds_no_trace_until_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """30 turns nobody observes build no trace, run no alert rule and attribute no cache break (on
    3e11df2: 30 traces, 30 + 30 rule passes, 30 attributions); reading one builds that one, once;
    reading the journal builds the rest; an observed pipeline builds every turn's at its request."""
    built = count_calls(monkeypatch, trace_lazy, "trace_from")
    eager_built = count_calls(monkeypatch, pipeline_build, "build_trace")
    rules = count_calls(monkeypatch, alert_rules, "evaluate_rules")
    breaks = count_calls(monkeypatch, trace_lazy, "attribute_cache_break")
    eager_breaks = count_calls(monkeypatch, pipeline_feedback, "attribute_cache_break")
    p = _pipe(6_001, "cost_aware", False, True)
    _start(p)
    reqs = _turns(p, 30)
    assert (built[0], eager_built[0], rules[0], breaks[0], eager_breaks[0]) == (0, 0, 0, 0, 0)
    t = reqs[12].trace
    assert t is reqs[12].trace and t is p.traces[12]  # one dict, built once
    assert (built[0], rules[0], breaks[0]) == (1, 1, 1)
    events = list(p.journal.events)
    assert built[0] == 30 and sum(ev["k"] == "turn" for ev in events) == 30
    assert [ev["trace"] for ev in events if ev["k"] == "turn"][12] is t
    p.close()
    q = _observed(_pipe(6_001, "cost_aware", False, True))
    _start(q)
    _turns(q, 10)
    assert eager_built[0] == 10 and built[0] == 30
    q.close()


def test_a_recording_pipeline_builds_every_trace_at_its_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    eager_built = count_calls(monkeypatch, pipeline_build, "build_trace")
    p = _pipe(6_001, "cost_aware", False, True)
    p.close()
    rec = Pipeline("deepseek-chat", "openai", 6_001, serve=False, record=tmp_path / "r.cpsession")
    _start(rec)
    _turns(rec, 6)
    assert eager_built[0] == 6
    rec.close()


def test_a_record_keeps_values_not_the_session_state() -> None:
    """What a record is built from is taken at the request: latch flips, the compaction state, the
    window and the Measure's memos all move on before the trace is read, and it says what the eager
    trace said."""
    lazy, eager = _pipe(4_001, "cost_aware", False, True), _observed(_pipe(4_001, "cost_aware", False, True))
    for p in (lazy, eager):
        _start(p)
        p.latch("mode", "fast")
        _turns(p, 1)
        p.latch("mode", "slow")  # a flip: this turn's trace names it
    first = [_turns(p, 1, 1)[0] for p in (lazy, eager)]
    for p in (lazy, eager):
        p.latch("mode", "fast")
        p.set_window(3_000)
        _turns(p, 30, 2)
        p.drop_caches()
        _turns(p, 3, 32)
    assert first[0].trace["latch_flips"] == ["mode"]
    _same(first[0].trace, first[1].trace)
    assert lazy.compaction.compactions >= 1
    _same(list(lazy.journal.events), list(eager.journal.events))
    lazy.close()
    eager.close()


def test_threads_reading_one_record_get_one_trace() -> None:
    """Two threads reading an unbuilt trace at once (the agent's and another reader's) get the same
    dict: it is built once."""
    p = _pipe(6_001, "cost_aware", False, True)
    _start(p)
    reqs = _turns(p, 40)
    got: list[list[int]] = [[], []]
    barrier = threading.Barrier(2)

    def read(k: int) -> None:
        barrier.wait()
        got[k] = [id(r.trace) for r in reqs]

    threads = [threading.Thread(target=read, args=(k,)) for k in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert got[0] == got[1] and len(set(got[0])) == 40
    p.close()


def test_a_budget_failure_still_names_what_could_not_be_evicted() -> None:
    """The budget check reads the record's figures; a request over its ceiling builds the trace to say
    why, as the eager path does."""
    from engine.errors import BudgetExceededError

    for p in (_pipe(2_401, "cost_aware", False, True), _observed(_pipe(2_401, "cost_aware", False, True))):
        p.identity("You are a careful coding agent. " * 400)
        p.user("Fix the bug.")
        with pytest.raises(BudgetExceededError, match="content that is never evicted: .*identity"):
            p.next_request()
        p.close()


@pytest.mark.parametrize("broken", ["earlier turns", "outcome"])
def test_a_record_missing_an_input_is_caught(monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    """The comparison can fail: a record whose alerts forget the turns before it, or that drops what
    came after the request (usage, errors, annotations), makes some session differ."""
    real = TurnRecord.__init__

    def lossy(self: TurnRecord, *a: Any) -> None:
        real(self, *a)
        if broken == "earlier turns":
            self._earlier = []
            inputs = self._inputs
            assert inputs is not None
            self._inputs = (*inputs[:-1], [])

    monkeypatch.setattr(TurnRecord, "__init__", lossy)
    if broken == "outcome":
        monkeypatch.setattr(TurnRecord, "outcome", lambda self, key, value: None)
    with pytest.raises(AssertionError):
        run_both(SESSION, 4_001, "cost_aware", "end")


def test_an_unobserved_held_turn_leaves_its_decision_texts_to_the_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A held turn that weighed a cut writes the pay-back's fields and its reason only into the trace:
    unobserved, nothing of them is made until the trace is read (on be99e1d every such turn made them),
    and then once a turn, in the eager path's key order (the side-by-side tests above compare them)."""
    from engine.policy.cachecost import Payback

    made = count_calls(monkeypatch, Payback, "to_dict")
    p = _pipe(4_001, "cost_aware", False, True)
    _start(p)
    for t, (op, r) in enumerate(SESSION):
        _feed(p, op, r, t)
        req = p.next_request()
        p.record_usage({"input_tokens": req.final_tokens + 5, "output_tokens": 30})
    compacted = p.compaction.compactions
    assert compacted >= 1 and made[0] == compacted  # a compaction's decision is written at once
    held = [
        ev["trace"]["compaction"]
        for ev in p.journal.events
        if ev["k"] == "turn"
        and ev["trace"].get("compaction", {}).get("decision") == "held"
        and "payback_turns" in ev["trace"]["compaction"]
    ]
    assert len(held) >= 20 and made[0] == compacted + len(held)
    assert list(held[-1])[-4:] == ["economic_saving", "decision", "reason", "sent_tokens"]
    p.close()


def test_a_replay_snapshot_shares_the_kept_traces_and_builds_none() -> None:
    # engine.recording.replay._snapshot copies a pipeline for every what-if; Pipeline.traces is a deque
    # subclass whose iteration builds each record, so copying it as anything but a deque of its kept
    # entries built every recent trace and deep-copied it (the first what-if 1.6x slower in bench_tui g).
    from engine.recording.replay import _snapshot

    p = _pipe(8_000, "cost_aware", False, True)
    _start(p)
    for t in range(6):
        p.user(f"step {t}")
        req = p.next_request()
        p.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10, "cache_read_tokens": 0})
    kept = [p.traces.raw(i) for i in range(len(p.traces))]
    assert kept and all(type(e) is TurnRecord and e._trace is None for e in kept)
    c = _snapshot(p)
    assert type(c.traces) is type(p.traces) and c.traces.maxlen == p.traces.maxlen
    assert [c.traces.raw(i) for i in range(len(c.traces))] == kept
    assert all(c.traces.raw(i) is e for i, e in enumerate(kept))
    assert all(e._trace is None for e in kept)  # nothing was built by the copy
    c.traces.append({"turn": -1})
    assert len(p.traces) == len(kept)  # the copy is its own deque


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=ops_st,
    window=st.sampled_from((2_401, 3_000, 4_001, 6_000)),
    policy=st.sampled_from(("cost_aware", "cost_aware:early=off", "wave1", "gates_closed")),
    read=st.sampled_from(("later", "end")),
    keep=st.sampled_from((4, 9, 40)),
)
def test_turns_moved_to_disk_unbuilt_read_back_as_the_request_built_them(
    ops: list[tuple[str, int]], window: int, policy: str, read: str, keep: int
) -> None:
    """A journal that spills writes a turn nobody read as its marker and rebuilds it from the journal
    where it is read (engine/recording/turn_fold.py): random sessions (compactions, latch flips,
    errors, annotations, tiny windows) read back the eager pipeline's journal, key for key."""
    run_both(ops, window, policy, read, keep=keep)
