"""Counts of one read as English on the paths a user meets them (engine.wording.counted): salvage's
"wrote ...: 1 complete turn", ctx import's "(cpsession, 1 request)", ctx reindex's "(1 item)", the
status line's "1 event dropped", a one-turn recording's turn index error, the place_markers step's
"1 marker", eval's "1 trajectory, 1 model call". Each read "1 turns", "1 requests", "1 items", "1 events",
"1 markers", "1 trajectories, 1 model calls" before."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from engine import Pipeline
from engine.recording.cpsession import RecordingReader
from engine.store.evaluate import (
    BUDGET_FRACTIONS,
    POLICIES,
    Cell,
    EvalReport,
    TrajectoryResult,
    format_report,
)
from inspector.cli import app
from inspector.status import status_markup
from inspector.timeline import Timeline

runner = CliRunner()
# A count of one followed by a plural noun, the fault these tests look for.
ONE_PLURAL = re.compile(
    r"(?<![\d.,])1 (turns|requests|items|events|calls|markers|sessions|errors|trajectories)\b"
)


@pytest.fixture(scope="module")
def one_turn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("one") / "one.cpsession"
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000, record=path)
    pipe.identity("You are a careful coding agent.")
    pipe.user("The test fails, please fix it.")
    req = pipe.next_request()
    pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
    pipe.close()
    return path


def test_salvage_of_one_turn_says_one_complete_turn(one_turn: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy.cpsession"
    res = runner.invoke(app, ["salvage", str(one_turn), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert f"wrote {out}: 1 complete turn, " in res.stdout
    assert not ONE_PLURAL.search(res.stdout), res.stdout


def test_ctx_import_of_one_request_and_reindex_of_one_item(one_turn: Path, tmp_path: Path) -> None:
    db = tmp_path / "ctx.sqlite"
    imported = runner.invoke(app, ["ctx", "import", str(one_turn), "--db", str(db)])
    assert imported.exit_code == 0, imported.output
    assert imported.stdout.rstrip().endswith("(cpsession, 1 request)"), imported.stdout
    assert not ONE_PLURAL.search(imported.stdout), imported.stdout

    one = tmp_path / "one.sqlite"
    added = runner.invoke(app, ["ctx", "add", "--db", str(one), "--kind", "memory", "the only item"])
    assert added.exit_code == 0, added.output
    res = runner.invoke(app, ["ctx", "reindex", "--db", str(one)])
    assert res.exit_code == 0, res.output
    assert "(1 item); nothing to do" in res.stdout, res.stdout
    vacuumed = runner.invoke(app, ["ctx", "reindex", "--db", str(one), "--vacuum"])
    assert vacuumed.exit_code == 0, vacuumed.output
    assert vacuumed.stdout.startswith("reindexed 1 item;"), vacuumed.stdout
    # a small store's sizes in kB: "index 0.0 MB -> 0.0 MB" said the index it had just built was nothing
    sizes = re.search(r"; index (\d+) bytes -> (\d+) bytes; file (\d+) kB -> (\d+) kB$", vacuumed.stdout.rstrip())
    assert sizes is not None and all(int(n) > 0 for n in sizes.groups()), vacuumed.stdout


def test_a_turn_past_a_one_turn_recording_says_one_turn(one_turn: Path) -> None:
    with RecordingReader.open(one_turn) as r, pytest.raises(IndexError) as exc:
        r.turn(-2)
    assert str(exc.value) == "turn -2: the recording has 1 turn"


def test_the_status_line_counts_one_dropped_event() -> None:
    timeline = Timeline()
    timeline.traces = [{"turn": 0}]
    header = {"path": "/x/a.cpsession", "model": "m", "provider": "anthropic", "pid": 7}
    view = SimpleNamespace(source=SimpleNamespace(header=header, kind="live"), timeline=timeline, dropped=1)
    line = status_markup(view, 0, False, 1, None)  # type: ignore[arg-type]
    assert "1 event dropped" in line and "1 events" not in line


def test_one_cache_marker_is_one_marker() -> None:
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000)
    # A short system prompt (no prefix of 1,024 tokens ends there) and a long first message: one marker,
    # at the end of the history.
    pipe.identity("You are a careful coding agent.")
    pipe.user("The test fails, please fix it. " + "Here is its log line. " * 400)
    trace = pipe.next_request().trace
    assert len(trace["markers"]) == 1, trace["markers"]
    step = next(s for s in trace["steps"] if s["step"] == "place_markers")
    detail = step.get("detail") or step.get("reason") or ""
    assert detail.startswith("1 marker"), step
    assert not detail.startswith("1 markers"), step


def test_eval_of_one_trajectory_of_one_call() -> None:
    cells = {(label, policy): Cell() for label, _ in BUDGET_FRACTIONS for policy in POLICIES}
    report = EvalReport([TrajectoryResult("t", calls=1, peak=10, cells=cells)])
    text = format_report(report)
    assert text.splitlines()[0] == "1 trajectory, 1 model call", text
