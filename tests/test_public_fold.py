"""The fold is public: no module outside engine/pipeline* reaches into a Pipeline's private state.

Replay, simulate, the importers, the tap and the benchmarks all need to apply journal events to a
pipeline; they do it through `Pipeline.fold`, `begin_request`, `close_turn` and `go_live`. This test
reads the source tree (AST, not grep, so comments and strings do not count) and fails on any
`<something other than self>._name` where `_name` is a private attribute or method of Pipeline.
"""

from __future__ import annotations

import ast
from pathlib import Path

from engine.pipeline import Pipeline
from engine.recording.journal import pack_event
from engine.recording.replay import Replayer

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("engine", "panels", "inspector", "themes", "benchmarks", "tests", "tools")


# Pipeline and the stages it is made of (its bases, one module each: engine/pipeline_state.py).
_STAGES = {k.__name__ for k in Pipeline.__mro__ if k is not object}


def _pipeline_private_names() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "engine").glob("pipeline*.py"):
        tree = ast.parse(path.read_text())
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in _STAGES):
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(node.name)
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                ):
                    names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.endswith("__")}


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _offences(path: Path, private: set[str]) -> list[str]:
    out = []
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _callee(node) == "Pipeline":
            out += [f"{path.relative_to(ROOT)}:{node.lineno}: Pipeline({k.arg}=...)"
                    for k in node.keywords if k.arg and k.arg.startswith("_")]
        if not isinstance(node, ast.Attribute) or node.attr not in private:
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue  # a class's own private state, not a Pipeline's
        out.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    return out


def test_private_names_are_found() -> None:
    # Guards the guard: if the scan stops finding Pipeline's private names it would pass vacuously.
    private = _pipeline_private_names()
    assert {"_close_pending", "_prev", "_replay", "_emit"} <= private
    assert {"Pipeline", "Folding", "Building"} <= _STAGES
    assert "fold" not in private


def test_no_module_outside_pipeline_touches_pipeline_private_state() -> None:
    private = _pipeline_private_names()
    offences: list[str] = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else ():
            if path.parent == ROOT / "engine" and path.name.startswith("pipeline"):
                continue
            offences += _offences(path, private)
    assert not offences, "Pipeline private state used outside engine/pipeline*:\n" + "\n".join(offences)


def _session(pipe: Pipeline) -> None:
    pipe.identity("You are terse.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user("list the files")
    for t in range(4):
        pipe.next_request()
        pipe.record_usage({"input_tokens": 100 + t, "output_tokens": 5})
        calls = pipe.assistant(f"step {t}", tool_calls=[{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, f"out {t}\n" * (t + 1))
    pipe.next_request()  # left open: close_turn() journals it


def test_public_fold_rebuilds_every_request_byte_for_byte() -> None:
    live = Pipeline("claude-sonnet-4", "anthropic", 50_000)
    _session(live)
    live.close_turn()
    events = list(live.journal.events)
    assert events[-1]["k"] == "turn"  # close_turn journaled the open turn
    sent = [e["sha"] for e in events if e["k"] == "request"]
    pipe = Replayer([pack_event(e) for e in events]).new_pipeline()
    rebuilt = []
    for ev in events:
        if ev["k"] == "request":
            pipe.begin_request(ev["turn"])
            rebuilt.append(pipe.build(ev.get("bound", {})).serialized.request_sha256)
        pipe.fold(ev)
    assert rebuilt == sent
    assert [m.role for m in pipe.history] == [m.role for m in live.history]
    assert pipe.turn == live.turn and len(pipe.traces) == 5


def test_go_live_continues_a_folded_session() -> None:
    live = Pipeline("claude-sonnet-4", "anthropic", 50_000)
    _session(live)
    events = list(live.journal.events)
    last = max(i for i, e in enumerate(events) if e["k"] == "request")
    pipe = Replayer(events).new_pipeline()
    for ev in events[:last]:
        pipe.fold(ev)
    pipe.begin_request(events[last]["turn"])
    built = pipe.build(events[last].get("bound", {}))
    for ev in events[last:]:
        pipe.fold(ev)
    pipe.go_live(built)
    pipe.record_usage({"input_tokens": 120, "output_tokens": 5})
    pipe.assistant("done")
    pipe.user("thanks")
    a = pipe.next_request()
    live.record_usage({"input_tokens": 120, "output_tokens": 5})
    live.assistant("done")
    live.user("thanks")
    b = live.next_request()
    assert a.bytes == b.bytes
    assert a.trace["cache_break"] == b.trace["cache_break"]
