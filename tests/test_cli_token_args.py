"""Numbers of tokens and turn numbers as a new user types them: a window as the inspector prints it
(32k, 1.5M, 32,000) is read by every option that takes one, and a value that is not a number is one
`cp-inspect:` line (exit 2), not typer's three-line usage block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app
from inspector.ctx_cli import ctx_app
from inspector.token_arg import parse_tokens
from tests.support.console_script import run_cp_inspect

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
runner = CliRunner()


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("32000", 32_000),
        ("32,000", 32_000),
        ("32k", 32_000),
        ("32K", 32_000),
        ("1.5M", 1_500_000),
        ("1.5m", 1_500_000),
        ("0.5k", 500),
        (" 8000 ", 8_000),
        ("1,000,000", 1_000_000),
        ("128k", 128_000),
    ],
)
def test_a_token_count_reads_as_the_inspector_prints_it(text: str, tokens: int) -> None:
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("text", ["3x2", "", "k", "32kk", "3,2000", "1.0005k", "-5", "1e3", "32 k", "32_000"])
def test_anything_else_is_not_a_token_count(text: str) -> None:
    with pytest.raises(ValueError):
        parse_tokens(text)


def _timeless(out: str) -> dict[str, object]:
    doc = json.loads(out)
    doc.pop("elapsed_s")  # the run's own time
    return doc


def test_simulate_reads_32k_as_32000_and_says_a_bad_window_in_one_line() -> None:
    plain = run_cp_inspect("simulate", str(DEMO), "--window", "8000", "--json")
    typed = run_cp_inspect("simulate", str(DEMO), "--window", "8k", "--json")
    assert plain.returncode == 0, plain.stderr
    assert typed.returncode == 0, typed.stderr
    assert _timeless(typed.stdout) == _timeless(plain.stdout)
    assert json.loads(typed.stdout)["window"] == 8000
    bad = run_cp_inspect("simulate", str(DEMO), "--window", "3x2")
    assert bad.returncode == 2
    assert bad.stderr == "cp-inspect: --window: cannot read '3x2': give tokens as 32000 or 32k\n"


def test_explain_budget_takes_32k_and_a_turn_that_is_not_a_number_is_one_line() -> None:
    plain = runner.invoke(app, ["explain", str(DEMO), "--budget", "8000", "--json"])
    typed = runner.invoke(app, ["explain", str(DEMO), "--budget", "8k", "--json"])
    assert plain.exit_code == 0, plain.output
    assert typed.output == plain.output
    bad = runner.invoke(app, ["explain", str(DEMO), "--turn", "abc"])
    assert bad.exit_code == 2
    lines = bad.output.strip().splitlines()
    assert len(lines) == 1, bad.output
    assert lines[0].startswith("cp-inspect: --turn: turn numbers are integers, got 'abc'")
    assert f"{DEMO} has turns " in lines[0] and "-1 is the last" in lines[0]
    bad = runner.invoke(app, ["explain", str(DEMO), "--budget", "2x"])
    assert bad.exit_code == 2
    assert bad.output.strip() == "cp-inspect: --budget: cannot read '2x': give tokens as 32000 or 32k"


def test_report_and_import_windows_read_the_same_way(tmp_path: Path) -> None:
    bad = runner.invoke(app, ["report", str(DEMO), "--window", "1.5x"])
    assert bad.exit_code == 2
    assert bad.output.strip() == "cp-inspect: --window: cannot read '1.5x': give tokens as 32000 or 32k"
    good = runner.invoke(app, ["report", str(DEMO), "--window", "8k", "--json"])
    assert good.exit_code == 0, good.output
    assert good.output == runner.invoke(app, ["report", str(DEMO), "--window", "8,000", "--json"]).output
    bad = runner.invoke(
        app,
        ["import", "auto", str(tmp_path / "t.json"), "-o", str(tmp_path / "o.cpsession"), "--window", "lots"],
    )
    assert bad.exit_code == 2
    assert bad.output.strip() == "cp-inspect: --window: cannot read 'lots': give tokens as 32000 or 32k"


def test_ctx_get_budget_takes_12k(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    for i in range(5):
        assert runner.invoke(ctx_app, ["add", "--db", db, f"message number {i}"]).exit_code == 0
    plain = runner.invoke(ctx_app, ["get", "--db", db, "--budget", "12000", "--json", "--fresh"])
    typed = runner.invoke(ctx_app, ["get", "--db", db, "--budget", "12k", "--json", "--fresh"])
    assert plain.exit_code == 0, plain.output
    assert typed.output == plain.output
    bad = runner.invoke(ctx_app, ["get", "--db", db, "--budget", "12q"])
    assert bad.exit_code == 2
    assert bad.output.strip() == "cp-inspect: --budget: cannot read '12q': give tokens as 32000 or 32k"


def test_replay_turn_that_is_not_a_number_is_one_line_naming_the_files_turns() -> None:
    bad = run_cp_inspect("replay", str(DEMO), "--turn", "abc")
    assert bad.returncode == 2
    assert bad.stderr.startswith("cp-inspect: --turn: turn numbers are integers, got 'abc' (")
    assert bad.stderr.endswith("; -1 is the last)\n") and len(bad.stderr.splitlines()) == 1, bad.stderr
    # A negative turn (read through typer, not the plain path) still counts from the end: it gets as far
    # as the terminal check.
    last = run_cp_inspect("replay", str(DEMO), "--turn", "-1")
    assert last.returncode == 2 and "stdin is not a terminal" in last.stderr, last.stderr
