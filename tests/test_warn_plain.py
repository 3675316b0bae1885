"""The warning line the typer-free paths write (attach on a pid; explain and find reading a live agent)
is `warn`'s own, one helper for all of them (recording_open.warn_plain), and it does not import typer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inspector.recording_open import warn

ROOT = Path(__file__).resolve().parents[1]


def test_the_plain_warning_is_warns_line_without_typer(capsys: pytest.CaptureFixture[str]) -> None:
    code = (
        "import sys\n"
        "from inspector.recording_open import warn_plain\n"
        "warn_plain('the recording is not read: the stream instead')\n"
        "print('typer' in sys.modules)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"  # (the path stays without typer's 60-80 ms)
    warn("the recording is not read: the stream instead")
    assert (
        r.stderr
        == capsys.readouterr().err
        == "cp-inspect: warning: the recording is not read: the stream instead\n"
    )
