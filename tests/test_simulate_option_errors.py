"""`simulate`'s --provider, --policies and --policy are refused as the options they are, once, before any
recording is read: each was found simulating the first file and said as that file's error ("FILE: unknown
policy 'all'; known policies: cost_aware, wave1"), and `--policy all` (the engine's own column) did not
point to `--policies all` (every policy side by side), the command a user who typed it wanted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"

CASES = [
    (["--policy", "all"], "--policy: unknown policy 'all'", "--policies all"),
    (
        ["--policy", "sliding_window"],
        "--policy: unknown policy 'sliding_window'",
        "--policies sliding_window",
    ),
    (["--policy", "nope"], "--policy: unknown policy 'nope'; known policies: cost_aware, wave1", None),
    (["--policy", "cost_aware:target=x"], "--policy: policy option 'target=x'", None),
    (["--policies", "paper,nope"], "--policies: unknown policy 'nope'; known policies: all, paper", None),
    (["--provider", "nope"], "--provider: unknown provider 'nope'", None),
]


def _plain(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script (its own command-line reader for simulate, simulate_argv.py)."""
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.parametrize(("opts", "says", "hint"), CASES, ids=[" ".join(o) for o, _, _ in CASES])
def test_a_bad_simulate_option_is_the_options_error(opts: list[str], says: str, hint: str | None) -> None:
    typer_run = CliRunner().invoke(app, ["simulate", str(DEMO), *opts])
    plain = _plain("simulate", str(DEMO), *opts)
    for status, err in ((typer_run.exit_code, typer_run.output), (plain.returncode, plain.stderr)):
        assert status == 2, err
        line = err.strip()
        assert "\n" not in line and line.startswith(f"cp-inspect: {says}"), line
        assert str(DEMO) not in line  # not the recording's error
        if hint is None:
            assert "--policies all" not in line and "side by side" not in line, line
        else:
            assert line.endswith(f"(to compare policies side by side: {hint})"), line
    assert plain.stdout == ""


def test_the_option_is_refused_before_a_missing_file_is_looked_for(tmp_path: Path) -> None:
    res = _plain("simulate", str(DEMO), str(tmp_path / "absent.cpsession"), "--policy", "all")
    assert res.returncode == 2 and res.stderr.startswith("cp-inspect: --policy: "), res.stderr


def test_an_unpriced_recording_among_several_says_model_prices_them_all(tmp_path: Path) -> None:
    """`simulate a b --policies all` where b names no model: its advice ("Choose the model to price it as
    with --model M") would have priced a as M too; among several recordings it says so, and what keeps
    the others' own prices. Alone, or with --model given, the advice is as it was."""
    traj = tmp_path / "unnamed.json"
    traj.write_text(
        '{"info": {}, "trajectory_format": "mini-swe-agent-1", "instance_id": "t", "messages": ['
        '{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Fix it."}, '
        '{"role": "assistant", "content": "ls"}]}'
    )
    unnamed = tmp_path / "unnamed.cpsession"
    made = _plain("import", "auto", str(traj), "-o", str(unnamed))
    assert made.returncode == 0 and "recorded as 'unknown'" in made.stdout + made.stderr, made.stderr
    several = _plain("simulate", str(DEMO), str(unnamed), "--policies", "all")
    assert several.returncode == 2 and several.stdout == "", several.stderr
    line = several.stderr.strip()
    assert line.startswith(f"cp-inspect: {unnamed}: cannot price model 'unknown'"), line
    assert line.endswith(
        "With 2 recordings, --model prices every one as M: to keep the others' own prices, leave this one "
        "out (or give it a run of its own)."
    ), line
    alone = _plain("simulate", str(unnamed))
    assert alone.returncode == 2 and "--model prices every one" not in alone.stderr, alone.stderr
