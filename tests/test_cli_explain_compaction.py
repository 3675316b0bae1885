"""`cp-inspect explain` on the cost_aware policy's compaction, as a person asks it: why a turn did not
compact (the held decision's reason was in the trace but in neither output: `--format json` left the
`compaction` key out), and why a wider `--budget` on a turn after a compaction sends the same tokens
("tokens 3113 -> 3113 (saves 0)" with no word why: the cut is the session's state, kept by a re-plan of
one turn). The demo recording, a real engine recording that compacts at turn 17."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from inspector.cli import app

DEMO = Path(__file__).resolve().parent.parent / "demo_sessions" / "scout-anthropic.cpsession"
runner = CliRunner()


def _explain(*args: str) -> str:
    res = runner.invoke(app, ["explain", str(DEMO), *args])
    assert res.exit_code == 0, res.output
    return res.output


def test_a_wider_budget_after_a_compaction_says_the_history_stays_compacted_and_what_re_runs_it() -> None:
    out = " ".join(_explain("--turn", "20", "--budget", "20000").split())
    assert "tokens 3113 -> 3113 (saves 0)" in out, out
    assert (
        "history stays compacted: a cut made before this turn (7340 tokens left out) is the session's state, "
        "which a re-plan of one turn keeps; `cp-inspect simulate FILE --window 20000` re-runs the session "
        "from its start under this window"
    ) in out, out
    # the decision this turn, held, and why
    assert "-- compaction held: request within the trigger" in out, out


def test_no_such_line_where_the_re_plan_changes_the_history() -> None:
    out = _explain(
        "--turn", "17", "--budget", "20000"
    )  # the compaction's own turn: the wider window undoes it
    assert "tokens 1075 -> 8399" in out, out
    assert "stays compacted" not in out, out


def test_explain_json_carries_the_compaction_decision() -> None:
    doc = json.loads(_explain("--turn", "20", "--format", "json"))
    comp = doc["compaction"]
    assert comp["policy"] == "cost_aware" and comp["decision"] == "held" and comp["cut"] == 33, comp
    assert comp["reason"].startswith("not worth it: saves 843/turn"), comp
    assert json.loads(_explain("--turn", "17", "--format", "json"))["compaction"]["decision"] == "compacted"
