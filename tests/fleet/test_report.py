"""`cp-inspect report` over many recordings: per-session rows equal `simulate` for the same session, the
total adds them up, and bad paths are one clear line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.sim.simulate import SimSettings, simulate_events

ROOT = Path(__file__).resolve().parents[2]
DEMOS = sorted((ROOT / "demo_sessions").glob("*.cpsession"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, text=True, timeout=300)


def test_report_rows_match_simulate_and_totals_add_up(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for p in DEMOS:
        shutil.copy(p, fleet / p.name)
    svg = tmp_path / "chart.svg"
    out = _cli("report", str(fleet), "--json", "--svg", str(svg))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data["sessions"]) == len(DEMOS)
    for row in data["sessions"]:
        reader = RecordingReader.open(row["session"])
        rep = simulate_events([unpack_event(e) for e in reader.events()], SimSettings())
        paid = rep.policies["actual"] or rep.policies["as_sent"]
        assert row["cost_usd"] == round(paid.cost_usd, 6)
        assert row["engine_cost_usd"] == round(rep.policies["pipeline"].cost_usd, 6)
        assert row["prompt_tokens"] == paid.totals.input_tokens
    total = data["total"]
    assert total["calls"] == sum(r["calls"] for r in data["sessions"])
    assert abs(total["cost_usd"] - sum(r["cost_usd"] for r in data["sessions"])) < 1e-5
    assert svg.read_text().startswith("<svg") and svg.read_text().count("<rect") == 2 * len(DEMOS)


def test_report_table_and_globs() -> None:
    out = _cli("report", str(ROOT / "demo_sessions" / "scout-*.cpsession"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("SESSION")
    assert f"TOTAL ({len(DEMOS)} sessions)" in out.stdout


def test_report_bad_paths_are_one_line(tmp_path: Path) -> None:
    for args in (["report", str(tmp_path / "missing.cpsession")], ["report", str(tmp_path)],
                 ["report", str(tmp_path / "*.nothing")], ["export", str(DEMOS[0])]):
        out = _cli(*args)
        assert out.returncode != 0, args
        assert "Traceback" not in out.stderr, out.stderr
        assert out.stderr.strip(), args
