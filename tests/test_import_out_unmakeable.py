"""`cp-inspect import ... -o PATH` where no file can be made (a directory that exists but takes no new
files, e.g. /proc): the error named the import's temporary file ('/proc/.x.cps.30891.partial') and
exited 1, where a missing directory exits 2. It now names -o's own path, says what to do, exits 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app

SRC = Path(__file__).resolve().parent / "fixtures" / "synthetic" / "proxy_anthropic.jsonl"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc takes no new files on Linux")
def test_an_output_directory_that_takes_no_files_is_named_as_given() -> None:
    r = CliRunner().invoke(app, ["import", "auto", str(SRC), "-o", "/proc/x.cpsession"])
    assert r.exit_code == 2, r.output
    assert "-o /proc/x.cpsession: cannot create a file in /proc" in r.output, r.output
    assert "a directory you can write to" in r.output
    assert ".partial" not in r.output
