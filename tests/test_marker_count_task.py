"""The trace's place_markers count is what the request carries with the task's breakpoint.

After a compaction revision 2 puts one more breakpoint on the task message. It was added after the
markers rule ran, whose step then said one fewer than the request's markers (later patched by editing
the step's text); the rule now places it itself (OptimizeContext.task_marker, markers.task_marker)."""

from __future__ import annotations

import json
from dataclasses import replace

from engine.pipeline import Pipeline
from engine.policy.settings import PolicySettings
from tests.test_simulate import COUNTER


def _traces() -> list[dict]:
    now = [1000.0]
    pipe = Pipeline("claude-sonnet-4", "anthropic", 9000, serve=False, counter=COUNTER, clock=lambda: now[0])
    pipe.config = replace(pipe.config, policy=PolicySettings(revision=2))
    pipe.identity("You are a careful coding agent. Work in small, verified steps.")
    pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user("Fix the failing test. " + "Context about the repository. " * 300)
    for k in range(12):
        pipe.next_request()
        pipe.record_usage({"input_tokens": 900 + 650 * k, "output_tokens": 30 + k})
        calls = pipe.assistant(f"Step {k}.", [{"id": f"c{k}", "name": "bash", "arguments": {"cmd": f"cat f{k}"}}])
        n = (60, 150)[k % 2]
        pipe.tool_result(calls[0].id, "".join(f"line {k}.{i}: value = f({i}, {k})\n" for i in range(n)))
        now[0] += 7.0
    pipe.next_request()
    pipe.close_turn()
    out = []
    for ev in pipe.journal.events:
        if ev.get("k") == "turn":
            t = ev["trace"]
            out.append(json.loads(t) if isinstance(t, str) else t)
    return out


def test_place_markers_step_counts_the_task_marker() -> None:
    traces = _traces()
    with_task = 0
    for t in traces:
        step = next(s for s in t["steps"] if s.get("step") == "place_markers")
        text = step.get("detail") or step.get("reason") or ""
        carried = len(t.get("markers") or [])
        if carried:
            assert int(text.split(" ")[0]) == carried, (text, t.get("markers"))
        actions = [a for a in t.get("actions") or [] if a.get("step") == "place_markers"]
        for a in actions:
            assert int(a["detail"].split(" ")[0]) == carried
        with_task += carried == 2
    assert with_task >= 5  # the compacted turns carry the task's breakpoint (the case under test)


def test_the_markers_rule_itself_places_and_counts_the_task_marker() -> None:
    """The rule knows about the task's breakpoint (OptimizeContext.task_marker): its own outcome carries
    it and its detail counts it, with no caller editing the text afterwards."""
    from engine.optimize import markers

    pipe = Pipeline("claude-sonnet-4", "anthropic", 200_000, serve=False, counter=COUNTER)
    pipe.identity("You are a careful coding agent. Work in small, verified steps.")
    pipe.user("Fix the failing test. " + "Context about the repository. " * 300)
    for k in range(3):
        pipe.next_request()
        calls = pipe.assistant(f"Step {k}.", [{"id": f"c{k}", "name": "bash", "arguments": {"cmd": f"cat f{k}"}}])
        pipe.tool_result(calls[0].id, f"output {k}\n" * 40)
    asm = pipe.assembled({})
    ctx = pipe.optimize_context(pipe.config, pipe.planned(pipe.config, asm))
    plain = markers.apply(asm, ctx)
    ctx.task_marker = True
    out = markers.apply(asm, ctx)
    pipe.close()
    assert [k.reason for k in out.markers] == [k.reason for k in plain.markers][:-1] + [
        "end of task",
        "conversation tail",
    ]
    task = next(k for k in out.markers if k.reason == "end of task")
    assert task.item == 0  # the task is the history's first message
    assert out.detail.split("; ")[0] == f"{len(out.markers)} markers"
    assert plain.detail.split("; ")[1:] == out.detail.split("; ")[1:]  # the reasons stay
    # A compaction note after the task is not part of it: with a one-message task, no breakpoint.
    ctx.task_noted = True
    assert markers.apply(asm, ctx).markers == plain.markers
