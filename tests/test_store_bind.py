"""The store as a Pipeline Bind source, and `.cpsession` recordings folded into a store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.errors import ConfigError
from engine.pipeline import Pipeline
from engine.recording.replay import Replayer
from engine.store import ContextStore, Kind
from engine.store.bind_source import attach_store
from engine.store.ingest import ingest_recording
from inspector.ctx_cli import ctx_app


def _pipe(**kw: object) -> Pipeline:
    return Pipeline("test-model", "anthropic", 60_000, serve=False, clock=lambda: 1_700_000_000.0, **kw)  # type: ignore[arg-type]


def _agent_turns(pipe: Pipeline, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        pipe.assistant(
            f"Looking at parse_config_{i}",
            tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": {"cmd": "ls"}}],
        )
        pipe.tool_result(f"c{i}", f"output of step {i}: def parse_config_{i}(path):\n" + "    x = 1\n" * 40)
        pipe.next_request()


def test_store_section_in_trace_fits_budget_and_replays(tmp_path: Path) -> None:
    store = ContextStore(tmp_path / "mem.db")
    for i in range(60):
        store.add(f"memory {i}: the cache key for load_file_{i} is the path plus mtime. " * 8, Kind.MEMORY)
    store.add("Never edit generated files under build/.", Kind.MEMORY, pin=True)
    pipe = _pipe()
    pipe.identity("You are a careful coding agent.")
    src = attach_store(
        pipe, store, section_id="memory", budget=1200, query_fn=lambda p: "load_file_7 cache key"
    )
    pipe.user("Fix the cache invalidation bug in load_file_7.")
    req = pipe.next_request()
    _agent_turns(pipe, 3)

    for trace in pipe.traces:
        sec = next(s for s in trace["sections"] if s["id"] == "memory")
        # The store holds ~6,000 tokens of memories: the window is compacted to the section's budget
        # (the binder's 1,200), and the planner's budget for the section covers it.
        assert sec["kind"] == "memory" and 900 < sec["tokens"] <= 1200 and sec["tokens"] <= sec["budget"]
        assert sec["form"] == "full" and not sec["note"]
    # The window is visible: ids in the text, and its manifest keyed by the pipeline turn.
    text = src.last_text
    assert "[#61 memory" in text  # the pin
    assert "load_file_7" in text  # the query's best match is in the window
    m = store.bound_window("memory", req.turn)
    assert m is not None and m["pipe_turn"] == req.turn
    ids = [it["id"] for it in m["items"]]
    assert 61 in ids and all(f"[#{i} " in pipe.journal.blobs[_bound_blob(pipe, req.turn)] for i in ids)
    assert store.bound_turns("memory") == [t["turn"] for t in pipe.traces]
    # Bind results are journaled: replay rebuilds every request without the store.
    store.close()
    report = Replayer(pipe.journal.events).verify()
    assert report.ok, report.mismatches
    assert report.turns == len(pipe.traces)
    pipe.close()


def _bound_blob(pipe: Pipeline, turn: int) -> str:
    ev = next(e for e in pipe.journal.events if e.get("k") == "request" and e["turn"] == turn)
    return str(ev["bound"]["memory"]["h"])


def test_mirror_history_and_small_budget(tmp_path: Path) -> None:
    store = ContextStore(tmp_path / "h.db")
    pipe = _pipe()
    attach_store(pipe, store, "recall", kind="context", budget=300, mirror_history=True)
    pipe.user("Task: rename parse_config everywhere.")
    pipe.next_request()
    _agent_turns(pipe, 4)
    # The history went into the store (task pinned, tool results linked to their calls).
    # task + 4 x (assistant call, tool result): the result still pending at bind time was folded then,
    # and not again when the request closed it into the history.
    assert len(store) == 9
    assert store.get(9).kind is Kind.TOOL_RESULT and "output of step 3" in store.get(9).body
    task = store.get(1)
    assert task.kind is Kind.USER and task.pinned
    for trace in pipe.traces:
        sec = next(s for s in trace["sections"] if s["id"] == "recall")
        assert 0 < sec["tokens"] <= 300 and sec["tokens"] <= sec["budget"]
    assert Replayer(pipe.journal.events).verify().ok
    store.close()
    pipe.close()


def test_attach_rejects_history_kind(tmp_path: Path) -> None:
    with ContextStore(tmp_path / "x.db") as store:
        with pytest.raises(ConfigError, match="history"):
            attach_store(_pipe(), store, "h", kind="history")


def test_import_cpsession_recording(tmp_path: Path) -> None:
    rec = tmp_path / "run.cpsession"
    pipe = _pipe(record=rec)
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test in tests/test_io.py")
    pipe.next_request()
    _agent_turns(pipe, 3)
    pipe.user("Also update the changelog.")
    pipe.next_request()
    pipe.close()

    with ContextStore(tmp_path / "a.db") as store:
        ids, requests = ingest_recording(store, rec)
        assert requests == 5
        items = [store.get(i) for i in ids]
        kinds = [it.kind for it in items]
        assert kinds[:2] == [Kind.SYSTEM, Kind.USER] and items[0].pinned and items[1].pinned
        assert kinds.count(Kind.ASSISTANT) == 3 and kinds.count(Kind.TOOL_RESULT) == 3
        assert items[-1].body == "Also update the changelog." and not items[-1].pinned
        assert "output of step 2" in items[-2].body and items[-2].source == "c2"
        assert store.turn == 5

    db = tmp_path / "cli.db"
    r = CliRunner().invoke(ctx_app, ["import", "--db", str(db), str(rec)])
    assert r.exit_code == 0, r.output
    assert "imported 9 items" in r.output and "cpsession" in r.output
    r = CliRunner().invoke(ctx_app, ["get", "--db", str(db), "--budget", "2000", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["items"][0]["kind"] == "system"


def test_one_engine_turn_moves_the_store_turn_once_when_the_window_is_re_requested(tmp_path: Path) -> None:
    # Many tiny tool results: each entry's "[#id tool_result]" header costs more than the store counts
    # for it, so the first window does not fit the section once rendered and Bind asks again, smaller.
    store = ContextStore(tmp_path / "shrink.db")
    for i in range(1200):
        store.add(f"m{i}", Kind.TOOL_RESULT)
    pipe = _pipe()
    src = attach_store(pipe, store, budget=300, query_fn=lambda p: None)
    pipe.user("Summarise the results.")
    for k in range(3):
        before = store.turn
        req = pipe.next_request()
        assert store.turn == before + 1, f"engine turn {k} moved the store's turn {store.turn - before} times"
        # The windows of the attempts, the one bound included, are all recorded at that one turn.
        served = store.windows(before)
        assert len(served) >= 2  # the first window was re-requested smaller
        bound = store.bound_window("memory", req.turn)
        assert bound is not None and bound["turn"] == before
        assert bound["items"] and len(bound["items"]) == len(src.last_window.entries)  # type: ignore[union-attr]
        pipe.assistant("ok")
        pipe.user("more")
    store.close()
    pipe.close()
