"""Real agent trajectories through the engine: every invariant, on real content.

Each file in ../shared/trajectories (or $CONTEXTPIPE_TRAJECTORIES) is imported (engine.importers.load)
and ingested (engine.importers.ingest) once at its real window and once at a tight 16,000-token window, with
cl100k_base token counts. Every request the engine built is checked: within the ceiling, identity
first and verbatim, the task never evicted, tool calls and results paired, cache markers within the
provider's policy, every optimizer rule in the trace; the tight run is deterministic (a second
ingest with a fresh token counter gives the same bytes) and replay reproduces every request hash.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import engine.importers.ingest as ingest_mod
from engine.importers import ImportedSession, load
from engine.optimize import OptimizeLimits
from engine.pipeline import Pipeline, Request
from engine.recording.replay import Replayer
from engine.tokens import TokenCounter

from .conftest import TRAJECTORIES, trajectory_files
from .test_engine_properties import check_audit, check_markers, check_pairing, system_texts

TIGHT = 16_000
FILES = trajectory_files()
COUNTER = TokenCounter()  # cl100k_base, shared: counts depend only on the text

pytestmark = pytest.mark.slow


class RecordingPipeline(Pipeline):
    """A Pipeline that keeps every request it built (ingest constructs its own pipeline)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[Request] = []

    def next_request(self, explain_only: bool = False) -> Request:
        req = super().next_request(explain_only)
        if not explain_only:
            self.requests.append(req)
        return req


@cache
def imported(path: Path) -> ImportedSession:
    return load(path)


def run(path: Path, window: int | None, counter: TokenCounter = COUNTER) -> RecordingPipeline:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ingest_mod, "Pipeline", RecordingPipeline)
        pipe, _report = ingest_mod.ingest(imported(path), window=window, counter=counter)
    assert isinstance(pipe, RecordingPipeline)
    return pipe


@cache
def ingested(path: Path, window: int | None) -> RecordingPipeline:
    return run(path, window)


def ids(paths: list[Path]) -> list[str]:
    return [f"{p.parent.name}/{p.name[:48]}" for p in paths]


files = pytest.mark.parametrize("path", FILES or [None], ids=ids(FILES) if FILES else ["absent"])


@pytest.fixture
def real(path: Path | None, trajectories_dir: Path) -> Path:
    assert path is not None
    return path


def first_text(imp: ImportedSession, role: str) -> str | None:
    msgs = imp.calls[0].messages
    return next((m.content for m in msgs if m.role == role and m.content), None)


def check_turns(pipe: RecordingPipeline, imp: ImportedSession) -> None:
    provider = pipe.config.provider
    identity = first_text(imp, "system")
    task = first_text(imp, "user")
    limits = OptimizeLimits()
    assert len(pipe.requests) == len(imp.calls)
    for req in pipe.requests:
        tr = req.trace
        where = f"turn {req.turn}"
        assert tr["final_tokens"] <= tr["ceiling"], where
        body = json.loads(req.bytes)
        if identity is not None:
            assert system_texts(body, provider)[0] == identity, f"{where}: identity not first and verbatim"
        if task is not None:
            first_user = next(m for m in body["messages"] if m["role"] == "user")
            content = first_user["content"]
            text = content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)
            assert task in text, f"{where}: the task was evicted or altered"
        check_pairing(body, provider)
        check_markers(body, req.bytes, provider)
        check_audit(tr, limits)


def verify(pipe: Pipeline) -> None:
    report = Replayer(pipe.journal.events, counter=COUNTER).verify()
    assert report.ok, [str(m) for m in report.mismatches[:3]]
    assert report.turns == sum(1 for e in pipe.journal.events if e["k"] == "request")


@files
def test_real_window_keeps_every_invariant(real: Path) -> None:
    pipe = ingested(real, None)
    check_turns(pipe, imported(real))
    verify(pipe)


@files
def test_tight_window_keeps_every_invariant(real: Path) -> None:
    pipe = ingested(real, TIGHT)
    assert pipe.config.window == TIGHT
    check_turns(pipe, imported(real))
    verify(pipe)
    peak = max(r.trace["estimated_tokens"] for r in pipe.requests)
    if peak > TIGHT:
        # The agent's own prompt outgrew the window: the engine compacted instead of overflowing.
        steps = {a["step"] for r in pipe.requests for a in r.trace["actions"]}
        assert steps & {"clear_tool_results", "drop_rounds", "trim_sections", "spill"}, steps
        assert max(r.trace["final_tokens"] for r in pipe.requests) <= TIGHT


@files
def test_tight_window_is_deterministic(real: Path) -> None:
    a = ingested(real, TIGHT)
    b = run(real, TIGHT, counter=TokenCounter())
    assert [r.bytes for r in a.requests] == [r.bytes for r in b.requests]
    assert [r.trace["request_sha256"] for r in a.requests] == [
        e["trace"]["request_sha256"] for e in b.journal.events if e["k"] == "turn"
    ]


def test_trajectories_are_present_or_skipped_clearly(trajectories_dir: Path) -> None:
    assert trajectories_dir == TRAJECTORIES
    assert len(FILES) >= 4
    longest = max(FILES, key=lambda p: len(imported(p).calls))
    assert len(imported(longest).calls) >= 90
