"""`cp-inspect import` on every real trajectory: the recording verifies, explains and opens for replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app
from inspector.sources.file import FileSource

from .conftest import TRAJECTORIES, trajectory_files

files = pytest.mark.parametrize(
    "real",
    trajectory_files()
    or [pytest.param(None, marks=pytest.mark.skip(reason=f"no trajectories at {TRAJECTORIES}"))],
    ids=lambda p: p.name[:48] if p else "absent",
)


@files
def test_import_verify_explain_replay(real: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.cpsession"
    r = CliRunner()
    res = r.invoke(app, ["import", "auto", str(real), "-o", str(out)])
    assert res.exit_code == 0, res.output
    res = r.invoke(app, ["verify", str(out)])
    assert res.exit_code == 0 and res.output.startswith("ok:"), res.output
    res = r.invoke(app, ["explain", str(out), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    for key in ("turn", "pressure", "tier", "sections", "markers", "skipped", "alerts", "request_sha256"):
        assert key in data
    src = FileSource(out)
    traces = src.load_initial()
    assert traces and traces[-1]["turn"] == data["turn"]
    # an imported session: what the agent sent first, then the engine's plan (a what-if) as JSON
    sent, _, engine = src.request_body(data["turn"]).partition("ENGINE WOULD SEND")
    assert sent.startswith(f"SENT: the request the agent actually sent at turn {data['turn']}")
    assert json.loads(engine[engine.index("{") :])["messages"]


def test_import_rejects_wrong_format(tmp_path: Path) -> None:
    bad = Path(__file__).parent / "fixtures" / "synthetic" / "mini_bad_role.traj.json"
    out = tmp_path / "o.cpsession"
    res = CliRunner().invoke(app, ["import", "mini-swe-agent", str(bad), "-o", str(out)])
    assert res.exit_code == 1
    assert "robot" in res.output and not out.exists()
