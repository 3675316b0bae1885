"""`replay`, `explain` and `verify` given several files (a shell glob): one line from the program that names
the extra files and says what to do, exit 2, instead of click's three-line "Got unexpected extra argument"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMOS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "demo_sessions").glob("*.cpsession"))


def _cp_inspect(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script's entry point, as `cp-inspect ARGS` runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("command", ["replay", "explain", "verify"])
def test_several_files_get_one_clear_line(command: str) -> None:
    assert len(DEMOS) >= 3
    done = _cp_inspect(command, *DEMOS)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith(f"cp-inspect: {command} takes one ")
    assert "unexpected" not in line.lower()
    for extra in DEMOS[1:]:
        assert extra in line  # the files it will not read, by name
    assert f"cp-inspect {command} {DEMOS[0]}" in line  # what to run instead
    assert done.stdout == ""


def test_options_after_an_extra_file_are_still_read() -> None:
    # An unknown option is still click's usage error (not swallowed as an extra file) ...
    done = _cp_inspect("verify", DEMOS[0], DEMOS[1], "--bogus")
    assert done.returncode == 2 and "No such option: --bogus" in done.stderr
    # ... and one file still works as before.
    one = _cp_inspect("verify", DEMOS[0])
    assert one.returncode == 0 and one.stdout.startswith("ok: "), one.stderr
