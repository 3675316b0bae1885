"""`report` on a run whose calls the SDK retried (an upstream 429, then the reply): the failed attempts are
counted (a key per session and in the total, one line under the table), as `simulate`'s note and
`explain` say them. Seen on `cp-inspect run` sessions of an agent with the real anthropic and openai SDKs
against a stand-in answering 429 first: the report's rows read as clean runs. The attempts are unbilled,
so no figure changes. The real SDK, the real proxy, the real recording (tests/support/retried_calls.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app
from tests.support.retried_calls import record_retried


def test_report_counts_the_retried_attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    path = record_retried(tmp_path)
    clean = Path(__file__).parents[2] / "demo_sessions" / "scout-openai.cpsession"
    res = CliRunner().invoke(app, ["report", str(path), str(clean), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [s["retried_attempts"] for s in data["sessions"]] == [1, 0]
    assert data["total"]["retried_attempts"] == 1
    assert data["sessions"][0]["calls"] == 3  # three calls, not four: the attempt is not a call
    res = CliRunner().invoke(app, ["report", str(path), str(clean)])
    assert res.exit_code == 0, res.output
    said = "retried: 1 failed attempt sent again (rate limits, overloads) in 1 session, not billed and in no figure above"
    assert said in res.stdout, res.stdout
    res = CliRunner().invoke(app, ["report", str(clean)])
    assert "retried" not in res.stdout, res.stdout  # a run that met none says nothing of it
