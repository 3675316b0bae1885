"""benchmarks/bench_turn_lines.py times an engine function statement by statement by compiling its source
again with a checkpoint before each statement of its body. The figures are only worth reading if the
rewritten function is the same function: these tests run sessions with the rewrite in place and hold
every request's bytes (and the journal's events) equal to an unpatched run's, and check that every
statement is marked, in order, once per pass."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.turn_session import char_pipe, coding_task, tool_round

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_turn_lines as btl  # noqa: E402


def _session(provider: str) -> tuple[list[bytes], int]:
    """Thirty tool rounds at a small window (the lane's steady turns and a compaction): each request's
    bytes, and how many events the journal holds."""
    pipe = coding_task(
        char_pipe(6000, "claude-sonnet-4-5" if provider == "anthropic" else "deepseek-chat", provider)
    )
    bodies = []
    for t in range(30):
        req = pipe.next_request()
        bodies.append(bytes(req.bytes))
        pipe.record_usage({"input_tokens": 900 + t, "output_tokens": 40})
        tool_round(pipe, t, f"output of step {t}\n" * (5 + t % 9))
    n = len(pipe.journal.snapshot())
    pipe.close()
    return bodies, n


@pytest.mark.parametrize(
    ("provider", "target"),
    [
        *(
            (p, t)
            for p in ("anthropic", "openai")
            for t in ("express.turn", "Pipeline.assistant", "Serializer._appended")
        ),
        ("anthropic", "anthropic.message_json"),
    ],
)
def test_the_rewritten_function_gives_the_same_requests(provider: str, target: str) -> None:
    want = _session(provider)
    owner, name, fn, ns = btl.resolve(target)
    original = getattr(owner, name)
    clock = btl.Clock()
    timed, labels = btl.instrumented(fn, ns, clock)
    passes: list[list[int]] = []

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        clock.marks.clear()
        try:
            return timed(*args, **kwargs)
        finally:
            passes.append([i for i, _t, _k in clock.marks])

    patched: Any = wrapper
    if original is not fn:  # a public call: its journaling wrapper kept, as the benchmark keeps it
        from engine.pipeline import _journals

        patched = _journals(wrapper)  # type: ignore[arg-type]
    setattr(owner, name, patched)
    try:
        got = _session(provider)
    finally:
        setattr(owner, name, original)
    assert got == want
    assert labels and passes, (labels, len(passes))
    # Each pass marks statements in source order, the first statement first (a statement inside a
    # loop is not marked: only the body's top level is).
    for marks in passes:
        assert marks and marks[0] == 0 and marks == sorted(marks), marks


def test_a_target_that_is_not_known_is_refused() -> None:
    with pytest.raises(SystemExit):
        btl.resolve("nowhere.turn")


def test_evict_runs_before_every_engine_turn_and_is_taken_out_after(trajectories_dir: Path) -> None:
    """--evict: the evictor runs once before each engine turn of every repeat (the two warm-up repeats
    too), never inside the timed function, and bench_engine's engine_turn is its own again after."""
    from engine.importers import load

    be = btl.be
    imp = load(
        trajectories_dir / "mini-swe-agent-pr816/deepseek_chat_test_1-100__django__django-14752.traj.json"
    )
    original = be.engine_turn
    events: list[str] = []
    turn = be.engine_turn

    def watched(*args: Any) -> Any:
        events.append("turn")
        return turn(*args)

    be.engine_turn = watched  # sees the order of evictions and turns (run_target wraps this one)
    try:
        labels, runs, _toks = btl.run_target(
            "Pipeline.record_usage", imp, 32000, 1, evict=lambda: events.append("evict")
        )
        assert be.engine_turn is watched  # run_target put back what it found
    finally:
        be.engine_turn = original
    calls = len(imp.calls)
    # Each turn right after its eviction, in the repeat and the two warm-up repeats.
    assert events == ["evict", "turn"] * (3 * calls)
    assert labels and len(runs) == 1 and len(runs[0]) == calls  # record_usage timed once a turn
