"""`cp-inspect ps` when the probe's runtime directory is not safely ours: one line that says what is
wrong and how to fix it, exit 1 (it was a PermissionDenied traceback; `attach` and `top` already said it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app


@pytest.mark.parametrize("args", [["ps"], ["ps", "--json"]])
def test_ps_with_a_runtime_directory_open_to_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    args: list[str]) -> None:
    rtdir = tmp_path / "contextpipe"
    rtdir.mkdir()
    os.chmod(rtdir, 0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert f"{rtdir} has mode 0755" in res.output and f"chmod 700 {rtdir}" in res.output
    assert "Traceback" not in res.output
