"""benchmarks/bench_turn_steps.py counts an engine turn's bytecodes and Python calls instead of timing it:
its figures are worth reading only if the counter counts what runs (every call and every bytecode of
it, charged to the function running it and to each one below it on the stack) and if the same turns
give the same counts run after run (what lets an A/B resolve changes a loaded machine's timings do
not)."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from tests.turn_session import char_pipe, coding_task, tool_round

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_turn_steps as bts  # noqa: E402


def _leaf(a: int, b: int) -> int:
    c = a + b
    return c * 2


def _outer(n: int) -> int:
    t = 0
    for i in range(n):
        t += _leaf(i, 1)
    return t


def _traced(counter: bts.Counter | bts.Touch, n: int) -> None:
    sys.setprofile(counter.profile)
    sys.settrace(counter.trace)
    try:
        _outer(n)
    finally:
        sys.settrace(None)
        sys.setprofile(None)


def test_the_counter_charges_each_bytecode_to_its_function_and_its_callers() -> None:
    one, three = bts.Counter(True), bts.Counter(True)
    _traced(one, 1)
    _traced(three, 3)
    leaf = next(k for k in three.own if k[1] == "_leaf")
    outer = next(k for k in three.own if k[1] == "_outer")
    assert three.n["calls"] == 4 and three.called[leaf] == 3 and three.called[outer] == 1
    # Each call of the leaf runs the same bytecodes; the outer's inclusive count is everything traced
    # in it, its own and the leaf's.
    assert three.own[leaf] == 3 * one.own[leaf] > 0
    assert three.incl[outer] == three.own[outer] + three.own[leaf] == three.n["steps"]
    assert three.incl[leaf] == three.own[leaf]
    assert three.n["steps"] > one.n["steps"] and three.n["lines"] > one.n["lines"]
    assert three.n["c_calls"] >= 1  # range()


def _turn_counts() -> list[dict[str, int]]:
    """Each turn's counts over thirty tool rounds of a fresh pipeline (steady lane turns and a
    compaction at this window)."""
    # Earlier tests leave garbage whose finalizers (a recording writer's __del__, say) would run inside
    # a counted turn whenever the collector happens to fire there: collect it first and keep the
    # collector off while counting, as the benchmark does.
    gc.collect()
    gc.disable()
    try:
        return _counted_turns()
    finally:
        gc.enable()


def _counted_turns() -> list[dict[str, int]]:
    pipe = coding_task(char_pipe(6000, "claude-sonnet-4-5", "anthropic"))
    counter = bts.Counter(False)
    out = []
    for t in range(30):
        counter.reset()
        sys.settrace(counter.trace)
        try:
            pipe.next_request()
            pipe.record_usage({"input_tokens": 900 + t, "output_tokens": 40})
            tool_round(pipe, t, f"output of step {t}\n" * (5 + t % 9))
        finally:
            sys.settrace(None)
        out.append(dict(counter.n))
    pipe.close()
    return out


def test_the_same_turns_count_the_same() -> None:
    # (The first run in a process also counts one-time work, imports and module memos: the benchmark
    # counts after an untraced replay.)
    _turn_counts()
    first, again = _turn_counts(), _turn_counts()
    assert first == again
    assert all(t["steps"] > t["calls"] > 0 for t in first)


def _touched(n: int) -> bts.Touch:
    t = bts.Touch()
    _traced(t, n)
    return t


def test_touch_counts_each_line_and_function_once_however_often_it_runs() -> None:
    # --touch's premise: a cold turn pays for each distinct piece of code once. Three calls of the leaf
    # touch what one call does (two functions, their lines, range) while running three times the
    # bytecodes; no call of it touches one function fewer.
    one, three, none = _touched(1), _touched(3), _touched(0)
    assert one.counts() == three.counts()
    got = three.counts()
    assert got["codes"] == 2 and got["modules"] == 1 and got["c_funcs"] >= 1
    leaf = next(c for c in three.codes if c.co_name == "_leaf")
    assert three.codes[leaf] == {leaf.co_firstlineno + 1, leaf.co_firstlineno + 2}
    assert none.counts()["codes"] == 1 and none.counts()["dlines"] < got["dlines"] - 1
    assert got["code_bytes"] == sum(len(c.co_code) for c in three.codes)


def test_the_peer_is_counted_turn_by_turn_as_the_engine_is() -> None:
    """--peer: trim+memo's turns under the same counter, one figure a call, the same on a second count
    (what lets the engine / trim+memo work ratio be read on a loaded machine), and the touch replay's
    figures beside them."""
    from engine.importers import load

    root = Path(__file__).resolve().parents[1]
    imp = load(root / "tests" / "fixtures" / "synthetic" / "proxy_anthropic.jsonl")
    turns = bts.peer_turns(imp, 32_000, True)
    assert len(turns) == len(imp.calls) >= 3
    steps = [t["steps"] for t in turns]
    assert all(s > 0 for s in steps)
    assert all(t["lane"] and t["calls"] > 0 and 0 < t["codes"] <= t["dlines"] for t in turns)
    # Deterministic, as the engine's counts: a second count gives the same figures.
    assert [t["steps"] for t in bts.peer_turns(imp, 32_000, False)] == steps
