"""The express lane (engine/pipeline_express.py) changes no byte: random sessions through a pipeline with
the lane and one without it (`Pipeline.express = False`, the general path) give the same requests, the same
traces (read at once, or late: after later turns moved the calibration, the caches and the history)
and the same journals.

Sessions mix appends (tool calls and results, user text, big results over the spill threshold) with
compactions (small windows), changes to the sections before the history (sources, tools, latches,
emergent items), window and margin changes, provider switches, usage feedback whose calibration moves
every turn, EXPLAIN, and an observer that subscribes to the journal mid-session (the trace is then
built eagerly and the lane stands aside). The counting tests show the lane is taken on steady turns
(on 5cf97c3 there is no lane).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine import pipeline_express as express
from engine.pipeline import Pipeline, Request
from tests.support.counting import LaneTurns
from tests.test_turn_carry import _pipe
from tests.test_turn_lineage import _feed as _lineage_feed

NEXT_PROVIDER = {"openai": "anthropic", "anthropic": "bedrock", "bedrock": "openai"}


def _feed(pipe: Pipeline, op: str, r: int, t: int, sinks: list[list[Any]]) -> None:
    if (
        op == "provider"
    ):  # the provider switched (OpenAI -> Anthropic -> Bedrock): another serializer, markers
        provider = NEXT_PROVIDER[pipe.config.provider]
        ev = {"k": "config", "config": replace(pipe.config, provider=provider).to_event()}
        pipe.fold(ev)
        pipe.journal.append(ev)
    elif op == "observe":  # something subscribes to the journal: traces are built as they come
        sink: list[Any] = []
        sinks.append(sink)
        pipe.journal.subscribe(sink.append)
    else:
        _lineage_feed(pipe, op, r, t)


# The ops that change a section before the history (or the window, or the provider): two in three of them
# are followed by the next op before a request is asked for, so a request often meets several changes.
SECTION_OPS = frozenset(
    ("window", "margin", "source", "latch", "tool", "untool", "emerge", "content", "provider")
)


def paired_requests(
    first: Pipeline, second: Pipeline, ops: list[tuple[str, int]], feed: Callable[[Pipeline, str, int, int], None]
) -> Iterator[tuple[str, int, Request | None, Request | None]]:
    """One session through two pipelines built alike: the same start (identity, a tool, the task), then
    each op fed to both (`feed(pipe, op, r, t)`) and, where the session asks, each asked for its request:
    yields (op, r, first's request, second's), or (op, r, None, None) at an EXPLAIN (the caller compares
    what it compares there). A request that fails (protected content over a tiny window) must fail in
    both alike, and ends the session. tests/test_express.py (the lane against the general path) and
    tests/test_express_lane_request.py (the lane's pass against the general steps) both walk it."""
    for p in (first, second):
        p.identity("You are a careful coding agent.")
        p.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
        p.user("Fix the bug.")
    for t, (op, r) in enumerate(ops):
        for p in (first, second):
            feed(p, op, r, t)
        if op in SECTION_OPS and r % 3:
            continue
        if op == "explain":
            yield op, r, None, None
            continue
        try:
            a = first.next_request()
        except Exception as e:  # protected content over a tiny window: both must fail alike
            with pytest.raises(type(e)) as e2:
                second.next_request()
            assert str(e2.value) == str(e)
            return
        yield op, r, a, second.next_request()


def _event(e: Any) -> str:
    return json.dumps(e.resolve() if hasattr(e, "resolve") else e, sort_keys=True, default=repr)


def _trace(t: Any) -> str:
    return json.dumps(t, sort_keys=True, default=repr)


def side_by_side(
    ops: list[tuple[str, int]], window: int, policy: str, late: bool, provider: str = "openai"
) -> tuple[int, int]:
    """One session through a pipeline with the lane and one without, every output compared (traces at
    once, or with `late` only at the end); returns (lane turns, compactions)."""
    lane, ref = _pipe(window, policy, False, True), _pipe(window, policy, False, True)
    for p in (lane, ref):
        if p.config.provider != provider:
            ev = {"k": "config", "config": replace(p.config, provider=provider).to_event()}
            p.fold(ev)
            p.journal.append(ev)
    ref.express = False
    taken = [0]
    real = express.turn

    def counted(pipe: Pipeline, c: express.Carried) -> Any:
        got = real(pipe, c)
        taken[0] += got is not None and pipe is lane
        return got

    express.turn = counted  # type: ignore[assignment]
    sinks: dict[int, list[list[Any]]] = {id(lane): [], id(ref): []}
    reqs: list[tuple[Any, Any]] = []
    try:
        for _op, r, a, b in paired_requests(lane, ref, ops, lambda p, op, r, t: _feed(p, op, r, t, sinks[id(p)])):
            if a is None or b is None:  # EXPLAIN
                assert _trace(lane.explain()) == _trace(ref.explain())
                continue
            assert a.bytes == b.bytes
            assert (a.final_tokens, a.ceiling) == (b.final_tokens, b.ceiling)
            assert lane.compaction == ref.compaction
            if not late:
                assert _trace(a.trace) == _trace(b.trace)
            reqs.append((a, b))
            # The calibration moves every turn (a ratio of 1.05-1.25 of what was planned).
            factor = 1.05 + (r % 5) * 0.05
            for p, req in ((lane, a), (ref, b)):
                if r % 11 == 0:
                    p.record_error("overloaded", "try again")
                else:
                    p.record_usage(
                        {"input_tokens": int(req.final_tokens * factor), "output_tokens": 20 + r % 300}
                    )
        for a, b in reqs:  # read late: the records built now, after everything that came after them
            assert _trace(a.trace) == _trace(b.trace)
        assert [_trace(t) for t in lane.traces] == [_trace(t) for t in ref.traces]
        assert [_event(e) for e in lane.journal.events] == [_event(e) for e in ref.journal.events]
        got, want = sinks[id(lane)], sinks[id(ref)]
        assert [[_event(e) for e in s] for s in got] == [[_event(e) for e in s] for s in want]
        return taken[0], lane.compaction.compactions
    finally:
        express.turn = real  # type: ignore[assignment]
        lane.close()
        ref.close()


ops_st = st.lists(
    st.tuples(
        st.sampled_from(
            ("round",) * 16
            + ("user", "big", "window", "margin", "source", "huge", "explain", "provider")
            + ("latch", "tool", "untool", "emerge", "content", "observe")
        ),
        st.integers(0, 1_000),
    ),
    min_size=20,
    max_size=90,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=ops_st,
    window=st.sampled_from((2_401, 3_001, 4_001, 6_001, 40_001)),
    policy=st.sampled_from(("cost_aware", "cost_aware:early=off", "cost_aware:revision=1", "wave1")),
    late=st.booleans(),
    provider=st.sampled_from(("openai", "anthropic", "bedrock")),
    task_only=st.booleans(),
)
def test_the_express_lane_changes_no_byte(
    ops: list[tuple[str, int]], window: int, policy: str, late: bool, provider: str, task_only: bool
) -> None:
    if task_only:  # the first request before any assistant message (the task alone), as an agent's is
        ops = [("user", 0), *ops]
    real = express.turn
    after = [0]

    def turn(pipe: Pipeline, c: express.Carried) -> Any:
        got = real(pipe, c)
        st = pipe.compaction
        after[0] += got is not None and st.compactions > 0 and got.turn == st.turn + 1
        return got

    express.turn = turn  # type: ignore[assignment]
    try:
        taken, compactions = side_by_side(ops, window, policy, late, provider)
    finally:
        express.turn = real  # type: ignore[assignment]
    event(f"lane turns right after a compaction: {'none' if not after[0] else 'some'}")
    event(f"provider: {provider}")
    event(f"compactions: {min(compactions, 3)}+")
    event(f"lane turns: {'none' if not taken else '1-9' if taken < 10 else '10+'}")


STEADY = [("round", i) for i in range(40)]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock"])
def test_steady_turns_take_the_lane_and_compaction_turns_do_not(provider: str) -> None:
    """At a window where the session compacts, most turns are steady appends: they take the lane (a cut
    weighed and not taken included); the turns that compact take the general path. At Anthropic and
    Bedrock too, whose tail cache marker moves every turn (before 2026-12-05 the lane stood aside there)."""
    taken, compactions = side_by_side(STEADY, 4_001, "cost_aware", True, provider)
    assert compactions >= 1
    assert taken >= 20


def test_an_agent_that_reads_each_trace_pauses_the_lane() -> None:
    """A lane turn's trace read before the next request (an agent that reads every trace) makes the lane
    stand aside for READ_PAUSE turns: such an agent would pay for the lane's turn and then for the
    general policy run that makes its trace."""
    taken, _ = side_by_side(STEADY, 4_001, "cost_aware", False)
    assert 1 <= taken <= 1 + len(STEADY) // express.READ_PAUSE


def test_an_observed_journal_keeps_the_general_path() -> None:
    """With a subscriber every trace is built as the turn is made: the lane (whose trace waits) stands
    aside from then on."""
    ops = [("round", i) for i in range(8)] + [("observe", 0)] + [("round", 10 + i) for i in range(12)]
    taken, _ = side_by_side(ops, 40_001, "cost_aware", True)
    assert 4 <= taken <= 8


@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_steady_lane_turns_move_the_tail_marker_without_the_markers_rule(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane turn after a lane turn moves the tail cache marker as the markers rule would (its outcome
    the last placement's with the tail on the newest message, _tail_moved's proof) without running the
    rule: the rule runs on the first lane turn after a general-path turn only. Before, every lane turn
    ran it (markers.apply: ~6-17 us a turn). Same bytes: test_the_express_lane_changes_no_byte."""
    from engine.optimize import markers

    rule_runs = [0]
    real_apply = markers.apply
    lane = LaneTurns(monkeypatch)

    def apply(asm: Any, ctx: Any) -> Any:
        rule_runs[0] += lane.inside
        return real_apply(asm, ctx)

    monkeypatch.setattr(markers, "apply", apply)
    pipe = _pipe(40_001, "cost_aware", False, True)
    ev = {"k": "config", "config": replace(pipe.config, provider=provider).to_event()}
    pipe.fold(ev)
    pipe.journal.append(ev)
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    # A task over the minimum cacheable prefix: the conversation tail carries a marker from the start.
    pipe.user("Fix the bug. " + " ".join(f"step {i}: read the log and check the value." for i in range(150)))
    for t, (op, r) in enumerate(STEADY):
        _feed(pipe, op, r, t, [])
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": int(req.final_tokens * 1.1), "output_tokens": 20 + r % 300})
    pipe.close()
    assert lane.taken >= len(STEADY) - 2
    # On the first lane turn only (the turn before it took the general path).
    assert rule_runs[0] == 1, (rule_runs[0], lane.taken)


def test_a_marker_providers_lane_turn_carries_the_history_runs_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """At Anthropic the tail marker moves every turn, so the history's run is written beside the one it
    extends (the old tail written again unmarked): its segment set and token sum come from that run's,
    less the items written again, with the new ones, as they do where no marker moves. Before, each
    lane turn's request walked every block of the history for them (Serializer.request_of)."""
    from engine.providers.base import Serializer

    seen: list[tuple[Any, Any, Any, Any]] = []
    real = Serializer.request_of

    def request_of(self: Serializer, layout: Any, *a: Any, **k: Any) -> Any:
        for s, run in layout:
            if s.id == "history":
                seen.append(
                    (run.segset, run.tokens, frozenset(run.segments), sum(b.tokens for b in run.blocks))
                )
        return real(self, layout, *a, **k)

    monkeypatch.setattr(Serializer, "request_of", request_of)
    taken, _ = side_by_side(STEADY, 40_001, "cost_aware", True, "anthropic")
    assert taken >= len(STEADY) - 2
    # Every lane turn's history run came with its sums, and they are the walked ones.
    carried = [x for x in seen if x[0] is not None]
    assert len(carried) >= taken, (len(carried), taken, len(seen))
    assert all(segset == segs and tokens == total for segset, tokens, segs, total in carried)


@settings(max_examples=400, deadline=None)
@given(
    rules=st.sampled_from(("anthropic", "bedrock", "deepseek", "openai", "none")),
    ratios=st.tuples(st.floats(0.0, 2.0), st.floats(0.0, 3.0)) | st.none(),
    saves=st.integers(-50, 60_000),
    kept=st.integers(0, 200_000),
    stable=st.integers(-10, 60_000),
    horizon=st.floats(0.0, 1e6) | st.just(math.inf),
    served=st.booleans(),
    credit=st.floats(0.0, 1.0),
    growth=st.floats(-1.0, 1e5),
    economic=st.booleans(),
)
def test_the_lanes_early_rule_weighs_as_payback_does(
    rules: str,
    ratios: tuple[float, float] | None,
    saves: int,
    kept: int,
    stable: int,
    horizon: float,
    served: bool,
    credit: float,
    growth: float,
    economic: bool,
) -> None:
    """compacts_early (the lane's weighing of a cut, without the Payback) answers what cost_aware's early
    rule reads of payback() and economic_saving(), on any figures."""
    from engine.policy.cachecost import DEFAULTS, CacheRules, compacts_early, economic_saving, payback

    cache = CacheRules(rules, *(ratios if ratios is not None else DEFAULTS[rules]))
    pb = payback(cache, saves, kept, stable, horizon, False, served, credit)
    want = pb.worth and pb.saves_per_turn >= (economic_saving(pb, growth) if economic else 0.0)
    assert compacts_early(cache, saves, kept, stable, horizon, served, credit, growth, economic) == want


@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_a_lane_turn_weighs_a_cut_and_writes_a_tool_call_without_the_general_paths_objects(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane turn over the policy's target weighs the early cut as payback() and economic_saving() do
    without making the Payback (cachecost.compacts_early), and a new tool call's input is scanned by
    json.loads' own scanner at once (anthropic._object_of). Before, each weighed lane turn made a Payback
    and each new call went through json.loads. Same bytes: test_the_express_lane_changes_no_byte."""
    import json as json_mod

    from engine.policy import cachecost

    made: dict[str, int] = {"payback": 0, "loads": 0}
    real_loads, real_init = json_mod.loads, cachecost.Payback.__init__
    lane = LaneTurns(monkeypatch)

    def loads(*a: Any, **k: Any) -> Any:
        # (input_json's own parse; ToolCall.arguments_obj, which a call with other than string values
        # goes through as before, passes its hooks.)
        made["loads"] += lane.inside and not k
        return real_loads(*a, **k)

    def init(self: Any, *a: Any, **k: Any) -> None:
        made["payback"] += lane.inside
        real_init(self, *a, **k)

    monkeypatch.setattr(json_mod, "loads", loads)
    monkeypatch.setattr(cachecost.Payback, "__init__", init)
    taken, compactions = side_by_side(STEADY, 4_001, "cost_aware", True, provider)
    assert compactions >= 1 and lane.taken >= 20
    assert made == {"payback": 0, "loads": 0}


def _steady_pipe(provider: str) -> Pipeline:
    """A pipeline at `provider` with a task over the minimum cacheable prefix (the tail marker moves from
    the start at Anthropic and Bedrock) and a window where 40 rounds never compact."""
    pipe = _pipe(40_001, "cost_aware", False, True)
    ev = {"k": "config", "config": replace(pipe.config, provider=provider).to_event()}
    pipe.fold(ev)
    pipe.journal.append(ev)
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug. " + " ".join(f"step {i}: read the log and check the value." for i in range(150)))
    return pipe


def _round(pipe: Pipeline, t: int) -> None:
    _feed(pipe, "round", t, t, [])
    req = pipe.next_request()
    pipe.record_usage({"input_tokens": int(req.final_tokens * 1.1), "output_tokens": 20 + t % 300})


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_lane_turn_carries_the_look_back_and_short_hashes_of_the_one_before(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane turn after a lane turn takes the alert rules' look-back (what Traces.views gives of the
    traces before it) and its request event's short section hashes from that turn, moved on by one
    record and with the history's hash new: the very entries views gives (identity), in its order, and
    each section's hash of the request cut to 16 digits, in wire order. More turns than the look-back
    holds, so it slides. (Each lane turn is handed the Carried the turn before left: what it carried.)"""
    from engine.alerts import LOOKBACK

    handed: list[express.Carried] = []
    real = express.turn

    def turn(p: Pipeline, c: express.Carried) -> Any:
        handed.append(c)
        return real(p, c)

    monkeypatch.setattr(express, "turn", turn)
    pipe = _steady_pipe(provider)
    try:
        seen: dict[int, tuple[Any, list[Any], Any]] = {}  # id(record) -> (record, views before, event)
        for t in range(LOOKBACK + 8):
            want = pipe.traces.views(len(pipe.traces), LOOKBACK)
            _round(pipe, t)
            # (The log's in-memory tail as kept: reading it through the log would build the turn's trace,
            # and a read trace makes the lane stand aside.)
            tail = pipe.journal.events._state[1]
            ev = next(e for e in reversed(tail) if isinstance(e, dict) and e.get("k") == "request")
            rec = pipe.traces.raw(-1)
            seen[id(rec)] = (rec, want, ev)
        checked = 0
        for c in handed:
            if c.record is None or c.earlier is None:
                continue  # left by the general path
            rec, want, ev = seen[id(c.record)]
            assert rec is c.record
            assert len(c.earlier) == len(want) and all(map(lambda a, b: a is b, c.earlier, want))
            assert ev["sections"] is c.short
            assert c.short == {sid: sha[:16] for sid, sha in rec.section_shas.items()}
            assert list(c.short) == [s.id for s, _run in c.layout]
            checked += 1
        assert checked >= LOOKBACK + 2
    finally:
        pipe.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_lane_turns_record_keeps_few_objects_for_the_collector(provider: str) -> None:
    """A lane turn's record (kept until its trace is read or the journal lets it go) holds what its
    trace is made from in one slotted object (_LaneInputs), not a closure over ~20 cells, and holds no
    Carried: each turn's Carried (its layout list and assembly) is let go when the next turn replaces it.
    Every object a turn leaves tracked by the garbage collector brings its next young collection nearer
    (they ran inside lane turns: ~75-96 us each). Before: ~70-76 tracked objects left per steady turn,
    20 of them cells, and every record's Carried alive; now ~42-44."""
    import gc

    pipe = _steady_pipe(provider)
    try:
        for t in range(10):
            _round(pipe, t)
        gc.collect()
        at_start = gc.get_objects()
        before = {id(o) for o in at_start}
        # Other tests' pipelines may still hold Carried objects: count this pipeline's by difference.
        carried_before = sum(1 for o in at_start if type(o) is express.Carried)
        del at_start
        turns = 10
        real = express.turn
        lane_turns = [0]

        def counted(p: Pipeline, c: express.Carried) -> Any:
            got = real(p, c)
            lane_turns[0] += got is not None
            return got

        express.turn = counted  # type: ignore[assignment]
        try:
            for t in range(10, 10 + turns):
                _round(pipe, t)
        finally:
            express.turn = real  # type: ignore[assignment]
        assert lane_turns[0] == turns
        gc.collect()
        now = gc.get_objects()
        new = [o for o in now if id(o) not in before]
        # One alive before (the one turn 10 extended), one alive now (the one the next turn extends).
        assert sum(1 for o in now if type(o) is express.Carried) - carried_before == 0
        assert not [o for o in new if type(o).__name__ == "cell"]
        assert len(new) / turns <= 50, len(new) / turns
        # The records still build the very traces (test_the_express_lane_changes_no_byte compares them).
        assert [t["turn"] for t in list(pipe.traces)[-turns:]] == list(range(10, 10 + turns))
    finally:
        pipe.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock"])
def test_the_turn_after_a_compaction_takes_the_lane(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compacting turn (the general path's) leaves the lane its assembly, state and layout: the next
    turn only appends, so it takes the lane, extending the assembly that turn was decided from (the
    history from the cut before it) to which the new state applies. The same bytes, traces and journals
    as the general path's (side_by_side compares them all). Before, the turn after each compaction took
    the general path: no lane turn right after a compaction."""
    after: list[int] = []
    lane_turns = [0]
    real = express.turn

    def turn(pipe: Pipeline, c: express.Carried) -> Any:
        got = real(pipe, c)
        if got is not None:
            lane_turns[0] += 1
            st = pipe.compaction
            after.append(st.compactions > 0 and got.turn == st.turn + 1)
        return got

    monkeypatch.setattr(express, "turn", turn)
    ops = [("round", i) for i in range(60)]
    taken, compactions = side_by_side(ops, 4_001, "cost_aware", True, provider)
    assert compactions >= 1  # (4 at OpenAI, 1 at Anthropic and Bedrock)
    assert sum(after) == compactions, (sum(after), compactions, lane_turns[0])


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock"])
def test_the_turn_after_a_task_only_first_request_takes_the_lane(provider: str) -> None:
    """An agent's first request holds the task alone (no assistant message yet). The next turn only
    appends the reply and its results, with no cut: it takes the lane like any steady turn (the task's
    end, now known, changes nothing the lane reuses). Same bytes, traces and journals (side_by_side).
    Before, the lane started a turn later: 39 of 41 turns here, now 40."""
    ops = [("user", 1), *STEADY]
    taken, compactions = side_by_side(ops, 40_001, "cost_aware", True, provider)
    assert compactions == 0
    assert taken == len(ops) - 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_lane_turns_remember_the_stable_steps_without_copying_them(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane turn proves the stable rules' outcome holds (cost_aware._stable_holds) and remembers the
    lineage it extends with the very steps that lineage held: nothing reads them in a lane turn (its
    trace runs the policy afresh), so they are not copied into an OptimizeResult to be remembered again.
    Before, each lane turn copied both step lists (a dict per step) and made an OptimizeResult. A trace
    still gets steps of its own: changing a read trace's steps leaves what the next turns remember (the
    general path remembers a copy of the steps it ran, not its trace's lists)."""
    from engine import pipeline_express
    from engine.policy import lineage_carry

    lane = LaneTurns(monkeypatch)
    real_lineage = lineage_carry._Lineage
    real_new = pipeline_express._new
    remembered: list[tuple[bool, Any]] = []

    def lineage(*a: Any) -> Any:
        got = real_lineage(*a)
        remembered.append((lane.inside, got.stable))
        return got

    def new(cls: Any, fields: Any) -> Any:  # (the lane makes its lineage by tuple.__new__, in C)
        got = real_new(cls, fields)
        if cls is real_lineage:
            remembered.append((lane.inside, got.stable))
        return got

    monkeypatch.setattr(lineage_carry, "_Lineage", lineage)
    monkeypatch.setattr(pipeline_express, "_new", new)
    pipe = _steady_pipe(provider)
    try:
        for t in range(24):
            _round(pipe, t)
        assert lane.taken >= 20
        steady = [s for inside, s in remembered if inside]
        assert len(steady) == lane.taken and steady[0] is not None
        assert all(s is steady[0] for s in steady), len({id(s) for s in steady})
        want = json.dumps(steady[0], sort_keys=True)
        # The first turn's trace (the general path ran the rules) and a lane turn's (its record runs the
        # policy now), both changed by their reader.
        for trace in (pipe.traces[0], pipe.traces[-1]):
            steps = [s for s in trace["steps"] if s.get("step") in ("reorder", "spill")]
            assert steps, trace["steps"]
            for s in steps:
                s["status"] = "changed by the reader"
        _round(pipe, 24)
        assert json.dumps(remembered[-1][1], sort_keys=True) == want
    finally:
        pipe.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_lane_turns_read_the_config_once_per_run_of_lane_turns(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a lane turn reads of its config and compaction state (the cache rules, the budget, the
    gate, whether a rewrite is served from the cache) is worked out on the first lane turn after a
    general-path turn and carried on (express.LaneFixed): the next lane turns have the very config and
    state. Before, every lane turn asked for the cache rules twice (the early rule's weighing and the
    record's inputs). Same bytes: test_the_express_lane_changes_no_byte."""
    lane = LaneTurns(monkeypatch)
    asked = [0]
    real = Pipeline.cache_rules

    def cache_rules(self: Pipeline, cfg: Any) -> Any:
        asked[0] += lane.inside
        return real(self, cfg)

    monkeypatch.setattr(Pipeline, "cache_rules", cache_rules)
    taken, compactions = side_by_side(STEADY, 4_001, "cost_aware", True, provider)
    assert compactions >= 1 and lane.taken >= 20
    # Once per run of lane turns: each compaction (a general-path turn) starts a new run.
    assert 1 <= asked[0] <= 1 + compactions, (asked[0], lane.taken, compactions)
