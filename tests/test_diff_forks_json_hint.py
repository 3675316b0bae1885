"""`diff` and `forks` given a trajectory (JSON) where a recording goes say to import it first, as
explain, verify, simulate and replay do; they said 'not a cpsession recording, or its header frame is cut
off or corrupt (frame length 2065850658 exceeds the limit ...)'. Exit 2 as before."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from inspector.cli import app

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
runner = CliRunner()


def _traj(tmp_path: Path) -> Path:
    p = tmp_path / "run.traj"  # a side named .json is a config (its own message: unknown settings)
    p.write_text('{"messages": [], "info": {}}\n')
    return p


def test_forks_on_a_trajectory_says_import_it(tmp_path: Path) -> None:
    t = _traj(tmp_path)
    r = runner.invoke(app, ["forks", str(t)])
    assert r.exit_code == 2
    assert "is JSON, not a .cpsession recording" in r.output and "import auto" in r.output, r.output
    assert "frame length" not in r.output


def test_diff_on_a_trajectory_says_import_it(tmp_path: Path) -> None:
    t = _traj(tmp_path)
    for argv in (["diff", str(t), str(DEMO)], ["diff", "recorded", "window=20000", str(t)]):
        r = runner.invoke(app, argv)
        assert r.exit_code == 2
        assert "is JSON, not a .cpsession recording" in r.output and "import auto" in r.output, r.output


def test_diff_config_json_keeps_its_meaning(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"window": 5000}')
    r = runner.invoke(app, ["diff", "recorded", str(cfg), str(DEMO)])
    assert r.exit_code in (0, 1), r.output  # a config side, run: not taken for a trajectory
    assert "import auto" not in r.output
