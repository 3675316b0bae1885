"""Counts read as English, and notes in words a user understands: "pays back within the 1 turns it is
expected to last" (the engine's compaction reason, shown by explain and the inspector), "ok: 1 turns
replayed" (verify), "1 of 1 turns" (simulate); and simulate's note "no `actual` events" printed under a
table with a column named "actual", which read as if that column were empty."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine import Pipeline
from engine.policy.cachecost import Payback
from engine.wording import counted, nouned
from inspector.cli import app

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
runner = CliRunner()


@pytest.mark.parametrize(
    ("n", "noun", "text"),
    [(0, "turn", "0 turns"), (1, "turn", "1 turn"), (2, "turn", "2 turns"), (1, "round", "1 round")],
)
def test_counted(n: int, noun: str, text: str) -> None:
    assert counted(n, noun) == text
    assert nouned(n, noun) == text.split(" ", 1)[1]


def test_a_cut_that_pays_back_in_one_turn_says_one_turn() -> None:
    pb = Payback(saves_per_turn=7000, resend_uncached=1100, payback_turns=0.6, horizon=1.0)
    assert pb.text().endswith("pays back after 1 turn")


def test_explain_re_planning_the_demos_compaction_says_one_turn() -> None:
    """Turn 17 of scout-anthropic compacts with a horizon of one turn; re-planned by this engine (a what-if
    at the recorded window), its reason is in the engine's current words."""
    res = runner.invoke(app, ["explain", str(DEMO), "--turn", "17", "--budget", "10200"])
    assert res.exit_code == 0, res.output
    assert "compact_history: pays back within the 1 turn it is expected to last" in res.stdout
    assert " 1 turns" not in res.stdout


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


def test_verify_of_a_one_turn_recording_says_one_turn(one_turn: Path) -> None:
    res = runner.invoke(app, ["verify", str(one_turn)])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("ok: 1 turn replayed, every request hash matches")


def test_simulate_says_one_turn_and_what_the_recording_lacks_in_words(one_turn: Path) -> None:
    res = runner.invoke(app, ["simulate", str(one_turn)])
    assert res.exit_code == 0, res.output
    assert "  1 of 1 turn; model claude-sonnet-4" in res.stdout
    assert " 1 turns" not in res.stdout
    # Not an event name beside the column named "actual": what is missing, and which recordings have it.
    assert "`actual`" not in res.stdout
    assert (
        "note: as_sent is the engine's requests under the recorded settings: this recording holds no copy of "
        "the requests as the agent sent them (an import or a `cp-inspect run` recording does)"
    ) in res.stdout


def test_the_fork_tree_counts_one_turn_as_one_turn(tmp_path: Path) -> None:
    parent = tmp_path / "parent.cpsession"
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000, record=parent)
    pipe.identity("You are a careful coding agent.")
    pipe.user("The test fails, please fix it.")
    req = pipe.next_request()
    pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
    child = pipe.fork("Find every caller of parse_header.", record=tmp_path / "child.cpsession")
    creq = child.next_request()
    child.record_usage({"input_tokens": creq.trace["final_tokens"], "output_tokens": 4})
    child.close()
    pipe.close()
    res = runner.invoke(app, ["forks", str(parent)])
    assert res.exit_code == 0, res.output
    assert "parent.cpsession  (session " in res.stdout and ", 1 turn, $" in res.stdout
    assert "scope, 1 turn)" in res.stdout and " 1 turns" not in res.stdout


def test_the_what_if_panels_session_view_counts_one_turn_as_one_turn(one_turn: Path) -> None:
    import json

    from panels.whatif_session import session_view

    res = runner.invoke(app, ["simulate", str(one_turn), "--json", "--per-turn"])
    assert res.exit_code == 0, res.output
    shown = session_view(json.loads(res.stdout), width=80, received=3).plain
    assert "run on 1 turn; 2 more arrived since" in shown and ", 1 turn" in shown
    assert " 1 turns" not in shown


def test_diff_counts_one_turn_as_one_turn(one_turn: Path) -> None:
    text = runner.invoke(app, ["diff", "recorded", "recorded", str(one_turn)])
    assert text.exit_code == 0, text.output
    assert "1 session, 1 turn" in text.stdout and "0 of 1 turn send different requests" in text.stdout
    md = runner.invoke(app, ["diff", "recorded", "recorded", str(one_turn), "--markdown"])
    assert md.exit_code == 0, md.output
    assert "1 session, 1 turn, 0 send different requests." in md.stdout
    assert " 1 turns" not in text.stdout + md.stdout
