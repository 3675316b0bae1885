"""`cp-inspect ctx import` of a file the store already holds: refused (exit 2), unless --again.

It added every message a second time with nothing said: the demo recording imported twice held 168
items, its system prompt and task pinned twice, and the store's turn went 40 -> 81.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from inspector.ctx_cli import ctx_app

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
runner = CliRunner()


def _items(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM items").fetchone()[0])


def test_recording_imported_twice_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    first = runner.invoke(ctx_app, ["import", str(DEMO), "--db", str(db)])
    assert first.exit_code == 0, first.output
    n = _items(db)
    again = runner.invoke(ctx_app, ["import", str(DEMO), "--db", str(db)])
    assert again.exit_code == 2, again.output
    assert "already holds" in again.output and "--again" in again.output and f"#1..#{n}" in again.output
    assert _items(db) == n  # nothing added
    forced = runner.invoke(ctx_app, ["import", str(DEMO), "--db", str(db), "--again"])
    assert forced.exit_code == 0, forced.output
    assert _items(db) == 2 * n


def test_same_bytes_under_another_name_is_the_same_file(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    copy = tmp_path / "copy.cpsession"
    copy.write_bytes(DEMO.read_bytes())
    assert runner.invoke(ctx_app, ["import", str(DEMO), "--db", str(db)]).exit_code == 0
    r = runner.invoke(ctx_app, ["import", str(copy), "--db", str(db)])
    assert r.exit_code == 2 and "already holds" in r.output, r.output


def test_trajectory_imported_twice_is_refused_in_that_store_only(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    traj = tmp_path / "t.json"
    msgs = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "fix the bug"},
        {"role": "assistant", "content": "ok", "extra": {"response": {"usage": {"prompt_tokens": 10}}}},
    ]
    traj.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": msgs, "info": {}}))
    r = runner.invoke(ctx_app, ["import", str(traj), "--db", str(db)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(ctx_app, ["import", str(traj), "--db", str(db)])
    assert r.exit_code == 2 and "already holds" in r.output, r.output
    other = tmp_path / "other.sqlite"  # a different store has not seen it
    assert runner.invoke(ctx_app, ["import", str(traj), "--db", str(other)]).exit_code == 0
