"""Why a turn has fewer cache markers than its provider allows reaches the trace, `explain` and the
cache layout: a flipped latch (the tail marker is suppressed) or prefixes under the model's minimum
cacheable prefix (engine/providers/policy.py cache_policy). "0 marker(s)" alone reads like a fault."""

from __future__ import annotations

from typing import Any, cast

from engine import Pipeline
from engine.optimize.markers import note_of
from engine.trace_schema import Trace
from inspector.explain import to_text
from panels.cache_layout import CacheLayoutPanel
from panels.line_panel import content_of

from .test_model_cache_minimum import SYSTEM


def _layout(trace: dict[str, Any]) -> str:
    panel = CacheLayoutPanel()
    panel.set_reactive(CacheLayoutPanel.trace, cast(Trace, trace))  # unmounted: no watcher, no app
    return "\n".join(content_of(line).plain for line in panel.lines(100))


def _marker_step(trace: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in trace["steps"] if s["step"] == "place_markers")


def _first_trace(model: str, tools: bool = False) -> dict[str, Any]:
    pipe = Pipeline(model, "anthropic", 200_000)
    if tools:
        pipe.add_tool("bash", "Run a shell command.", {"type": "object"})
    pipe.identity(SYSTEM)
    pipe.user("List the files.")
    trace = dict(pipe.next_request().trace)
    pipe.close()
    return trace


def test_no_prefix_over_the_models_minimum_is_said_everywhere() -> None:
    trace = _first_trace("claude-opus-4-5")  # ~2,300 tokens: under Opus 4.5's 4,096
    assert trace["markers"] == []
    note = note_of(trace["steps"])
    assert note.startswith("no prefix reaches the model's 4096-token minimum cacheable prefix (")
    assert "conversation tail at " in note
    assert f"markers left out: {note}" in to_text(trace)
    layout = _layout(trace)
    assert "0 markers" in layout and note[:40] in layout


def test_some_prefixes_under_the_minimum_are_counted_beside_the_markers_kept() -> None:
    # Sonnet 4 caches from 1,024: the system prompt and the tail are marked, the short tools are not.
    trace = _first_trace("claude-sonnet-4", tools=True)
    assert [m["section"] for m in trace["markers"]] and "tools" not in [m["section"] for m in trace["markers"]]
    step = _marker_step(trace)
    assert step["status"] == "applied"
    assert "1 prefix under the model's 1024-token minimum cacheable prefix (end of tools at " in step["detail"]
    assert "markers left out: 1 prefix under" in to_text(trace)
    assert "left out: 1 prefix under" in _layout(trace)


def test_a_flipped_latch_says_the_tail_marker_was_suppressed() -> None:
    pipe = Pipeline("claude-sonnet-4", "anthropic", 200_000)
    pipe.identity(SYSTEM)
    pipe.latch("cwd", "/repo")
    pipe.user("task")
    steady = dict(pipe.next_request().trace)
    pipe.assistant("ok")
    pipe.user("go on")
    pipe.latch("cwd", "/repo/sub")
    flipped = dict(pipe.next_request().trace)
    pipe.close()
    assert note_of(steady["steps"]) == "" and "left out" not in _layout(steady) + to_text(steady)
    assert note_of(flipped["steps"]) == "conversation-tail marker suppressed: a latch flipped this turn"
    assert "markers left out: conversation-tail marker suppressed" in to_text(flipped)
    assert "left out: conversation-tail marker suppressed" in _layout(flipped)


def test_a_provider_that_caches_by_itself_says_so() -> None:
    pipe = Pipeline("gpt-4o", "openai", 128_000)
    pipe.identity(SYSTEM)
    pipe.user("task")
    trace = dict(pipe.next_request().trace)
    pipe.close()
    assert note_of(trace["steps"]) == "openai caches prefixes automatically: no markers"
