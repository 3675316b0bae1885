"""An append-only turn extends the build before it instead of redoing its stages (the turn9 fast path).

Two things a turn no longer recomputes when the history only grew by appended messages since the last
build:

- the sections before the history (Pipeline._assemble_from): carried while no folded event changed what
  they are made of (sources, their text, tools, latches, emergent items; a bound value);
- cost_aware's stable stage (cost_aware._extend, _extended_stable): the state-applied history is the
  previous one plus the appended messages, and the stable rules' outcome holds while none of them holds
  a tool result over the spill threshold.

The reference is the general path (`pipe.fast_path = False`): random sessions mixing appends with every
other kind of change must give byte-identical requests, traces, compaction states and journals; the
counting tests fail on e475f4a (every turn re-sorted the sources and re-applied the state); and the
broken-guard tests show the comparison catches a guard that leaves out one input. The fast side also
answers every prefix question through Measure.starts_with's verified links, the slow side by value
(tests/test_turn_prefix_links.py).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import engine.pipeline_fold as fold_mod
from engine import sections
from engine.pipeline import Pipeline
from engine.policy import cost_aware, cut_choice
from tests.support.counting import count_calls
from tests.test_turn_carry import _feed as _carry_feed
from tests.test_turn_carry import _pipe, reuses_counted


def _feed(pipe: Pipeline, op: str, r: int, t: int) -> None:
    """test_turn_carry's operations, and changes to what the sections before the history are made of."""
    if op == "latch":
        pipe.latch(f"mode{r % 2}", f"value {r % 3}")
    elif op == "tool":
        pipe.add_tool(f"t{r % 3}", f"tool {r}", {"type": "object", "properties": {}})
    elif op == "untool":
        pipe.remove_tool(f"t{r % 3}")
    elif op == "emerge":
        pipe.emerge("todo", f"look at {r}")
    elif op == "content":
        pipe.memory(f"remember {r % 4}", working=bool(r % 2))
    else:
        _carry_feed(pipe, op, r, t)


def _out(req: Any) -> tuple[bytes, str]:
    return req.bytes, json.dumps(req.trace, sort_keys=True, default=repr)


def run_side_by_side(ops: list[tuple[str, int]], window: int, policy: str, summarize: bool) -> int:
    """One session through a fast and a slow pipeline, every output compared; returns compactions."""
    fast, slow = _pipe(window, policy, summarize, True), _pipe(window, policy, summarize, False)
    # Prefixes (Measure.starts_with): the fast side follows verified links for every prefix, however
    # short; the reference compares every one by value.
    fast.measure.prefix_min, slow.measure.prefix_min = 1, sys.maxsize
    for p in (fast, slow):
        p.identity("You are a careful coding agent.")
        p.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
        p.user("Fix the bug.")
    try:
        for t, (op, r) in enumerate(ops):
            for p in (fast, slow):
                _feed(p, op, r, t)
            if op in ("window", "margin", "source", "latch", "tool", "untool", "emerge", "content"):
                if r % 3:  # most changes are followed by more appends before the next request
                    continue
            if op == "explain":
                assert _out(fast.next_request(explain_only=True)) == _out(slow.next_request(explain_only=True))
                continue
            try:
                a = fast.next_request()
            except Exception as e:  # protected content over a tiny window: both must fail alike
                with pytest.raises(type(e)) as e2:
                    slow.next_request()
                assert str(e2.value) == str(e)
                break
            b = slow.next_request()
            assert _out(a) == _out(b)
            assert fast.compaction == slow.compaction
            factor = 1.05 + (r % 5) * 0.05
            for p, req in ((fast, a), (slow, b)):
                p.record_usage({"input_tokens": int(req.trace["final_tokens"] * factor), "output_tokens": 20 + r % 300})
        assert list(fast.journal.events) == list(slow.journal.events)
        return fast.compaction.compactions
    finally:
        fast.close()
        slow.close()


ops_st = st.lists(
    st.tuples(
        st.sampled_from(
            ("round",) * 14
            + ("user", "big", "window", "margin", "source", "huge", "explain")
            + ("latch", "tool", "untool", "emerge", "content")
        ),
        st.integers(0, 1_000),
    ),
    min_size=20,
    max_size=90,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=ops_st,
    window=st.sampled_from((2_401, 3_000, 4_001, 6_000)),
    policy=st.sampled_from(("cost_aware", "cost_aware:early=off", "cost_aware:revision=1", "gates_closed")),
    summarize=st.booleans(),
)
def test_the_append_only_fast_path_changes_no_byte(
    ops: list[tuple[str, int]], window: int, policy: str, summarize: bool
) -> None:
    with reuses_counted(cost_aware, "_extended_stable") as hits:
        compactions = run_side_by_side(ops, window, policy, summarize)
    event(f"compactions: {min(compactions, 3)}+")
    event(f"extended builds: {'none' if not hits[0] else '1-9' if hits[0] < 10 else '10+'}")


# A compacting session (rounds until the cut moves several times), then a change to every input of the
# sources' carry, each followed by appends.
FIXED = (
    [("round", i) for i in range(30)]
    + [("latch", 3), ("round", 31), ("tool", 3), ("round", 32), ("untool", 3), ("round", 33)]
    + [("emerge", 3), ("round", 34), ("round", 35), ("content", 3), ("round", 36), ("source", 3)]
    + [("round", 37 + i) for i in range(10)]
)


def test_the_fixed_session_matches_and_compacts() -> None:
    assert run_side_by_side(FIXED, 4_001, "cost_aware", False) >= 1


def _appending(pipe: Pipeline, turns: int, start: int = 0) -> None:
    for t in range(start, start + turns):
        _feed(pipe, "round", t, t)
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 30})


def test_append_only_turns_do_not_rebuild_the_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sources are sorted into catalog order once, then only when something they are made of changes
    (on e475f4a every build sorted them: 20 calls of sort_key for 20 appending turns with one source)."""
    pipe = _pipe(6_000, "cost_aware", False, True)
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug.")
    n = count_calls(monkeypatch, sections, "sort_key")
    _appending(pipe, 20)
    assert n[0] == 1  # the first build's one source
    pipe.latch("mode", "fast")  # a change: sorted again once, then carried again
    _appending(pipe, 10, 20)
    assert n[0] == 2
    pipe.close()


def test_append_only_turns_extend_the_applied_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once compacted, an append-only turn extends the state-applied history of the build before it
    rather than applying the state again and keying the stable rules afresh (on e475f4a both ran every
    build)."""
    pipe = _pipe(4_001, "cost_aware", False, True)
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug.")
    t = 0
    while pipe.compaction.compactions == 0:
        _appending(pipe, 1, t)
        t += 1
        assert t < 200
    applied = count_calls(monkeypatch, cost_aware, "apply_state")
    keyed = count_calls(monkeypatch, cost_aware, "_stable_key")
    before, builds = pipe.compaction, 0
    while pipe.compaction == before and builds < 12:
        _appending(pipe, 1, t)
        t, builds = t + 1, builds + 1
    held = builds - (pipe.compaction != before)  # the turn that compacted again applies the new state
    assert held >= 3
    assert applied[0] <= 2 * (builds - held)
    assert keyed[0] <= 2 * (builds - held)
    pipe.close()


@pytest.mark.parametrize("broken", ["state", "latch folds", "spill threshold"])
def test_a_guard_missing_an_input_is_caught(monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    """The side-by-side comparison can fail: drop one input from a guard and some session differs."""
    if broken == "latch folds":  # a latch flip that does not invalidate the carried sources
        monkeypatch.setattr(fold_mod, "_SOURCE_KINDS", fold_mod._SOURCE_KINDS - {"latch"})
        ops = FIXED
    elif broken == "spill threshold":  # an appended result over the threshold, and the outcome carried anyway
        real_ext = cost_aware._extended_stable

        def lax(lin: Any, new: Any, applied: Any, ctx: Any) -> Any:
            return real_ext(lin, (), applied, ctx)

        monkeypatch.setattr(cost_aware, "_extended_stable", lax)
        ops = [("round", i) for i in range(8)] + [("big", 3)] + [("round", 20 + i) for i in range(4)]
    else:
        real = cost_aware._extend

        def loose(lin: Any, asm_full: Any, hidx: Any, s: Any, elided: Any, note: Any, m: Any, *rest: Any) -> Any:
            if lin is not None:  # extends the history applied under the state (and note) it remembers
                s, note = lin.state, lin.note
            return real(lin, asm_full, hidx, s, elided, note, m, *rest)  # (rest: the lane's `appended`)

        monkeypatch.setattr(cost_aware, "_extend", loose)
        ops = FIXED
    with pytest.raises(AssertionError):
        run_side_by_side(ops, 4_001, "cost_aware", False)


def test_a_cut_that_outgrew_its_rounds_is_counted_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the request sits above the target, each appended round makes the cut to weigh one round
    deeper: it is counted on from the last one (cut_choice._counted_on) instead of chosen from scratch.
    On e475f4a every such turn chose from scratch; here only the first after each change of state."""
    from tests.test_cost_aware_cut_carry import STEADY, _choices

    compare_args = (STEADY, 6_000, "cost_aware", False)
    assert run_side_by_side(*compare_args) >= 0  # every output equal with the fast path on and off
    fresh_on, builds = _choices(True, STEADY, 6_000, "cost_aware")
    monkeypatch.setattr(cut_choice, "_counted_on", lambda *a: None)
    fresh_off, _ = _choices(True, STEADY, 6_000, "cost_aware")
    assert fresh_on * 3 <= fresh_off, (fresh_on, fresh_off, builds)


def test_counting_on_one_round_short_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_cost_aware_cut_carry import STEADY

    real = cut_choice._counted_on

    def short(*a: Any) -> Any:
        got = real(*a)
        if got is None or got[2] < 3:
            return got
        te, _end, c, _acc, below = got
        m, items = a[3], a[1]  # (memo, items, state, measure, need)
        droppable = m.rounds(items)[1:-1]
        cum = m.cumulative(items)
        # One round fewer than reaches the tokens to drop: where those rounds end, what they hold and
        # what one round fewer again holds.
        return te, droppable[c - 2][1], c - 1, below, cum[droppable[c - 2][0]] - cum[droppable[0][0]]

    monkeypatch.setattr(cut_choice, "_counted_on", short)
    with pytest.raises(AssertionError):
        run_side_by_side(STEADY, 6_000, "cost_aware", False)


def test_a_provider_without_markers_does_not_run_the_marker_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """At a provider that caches prefixes by itself the marker rule says the same whatever the sections
    (markers.automatic): a request within its budget records that without running it (on e475f4a the
    rule ran every build). At a provider with breakpoints it runs every build, as before."""
    from dataclasses import replace

    from engine.optimize import markers

    n = [0]

    def counted(*a: Any) -> Any:
        n[0] += 1
        return markers.apply(*a)

    rules = tuple(replace(r, fn=counted) if r.name == markers.NAME else r for r in cost_aware.GUARANTEE_RULES)
    monkeypatch.setattr(cost_aware, "GUARANTEE_RULES", rules)
    for provider_window, expected in ((6_001, 0), (6_000, 12)):  # odd: openai, even: anthropic (_pipe)
        pipe = _pipe(provider_window, "cost_aware", False, True)
        pipe.identity("You are a careful coding agent.")
        pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
        pipe.user("Fix the bug.")
        _appending(pipe, 2)
        n[0] = 0
        _appending(pipe, 12, 2)
        assert n[0] == expected, (pipe.config.provider, n[0])
        pipe.close()


def _fresh_cuts_with_moving_calibration(ops: list[tuple[str, int]], window: int) -> tuple[int, int]:
    """(cuts chosen from scratch, builds) of one fast-path session whose reported input tokens move the
    learned calibration up and down turn by turn (as a real provider's counts do): each turn's target
    and so the tokens to drop move both ways."""
    pipe = _pipe(window, "cost_aware", False, True)
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug.")
    try:
        with reuses_counted(cut_choice, "oldest_to_drop", every_call=True) as n:
            for t, (op, r) in enumerate(ops):
                _feed(pipe, op, r, t)
                req = pipe.next_request()
                factor = (1.05, 1.25, 0.95, 1.15, 1.0)[t % 5]
                pipe.record_usage({"input_tokens": int(req.trace["final_tokens"] * factor), "output_tokens": 30})
    finally:
        pipe.close()
    return n[0], len(ops)


def test_a_cut_is_counted_on_while_the_calibration_moves_the_target() -> None:
    """The calibration learned from each turn's usage moves the target (and the tokens to drop) every
    turn, both ways. The cut remembered for carrying or counting on (cut_choice._carried_cut, _counted_on)
    is kept per policy settings and limits, not per exact target tokens (the tokens to drop, which every
    check reads, already hold the target), so few cuts are chosen from scratch: 4 of 71 builds here,
    against 56 on e475f4a and on 60947e3, which looked the cut up by that turn's target and so rarely
    found one.
    Every output equal with the fast path on and off."""
    from tests.test_cost_aware_cut_carry import STEADY

    assert run_side_by_side(STEADY, 6_000, "cost_aware", False) >= 0
    fresh, builds = _fresh_cuts_with_moving_calibration(STEADY, 6_000)
    assert fresh * 4 <= builds, (fresh, builds)

