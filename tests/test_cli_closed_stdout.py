"""A command whose output cannot be written says so: `cp-inspect ... 1<&-` (stdout closed at start) printed
nothing and exited 0, as if it had worked; a reader that goes away (`| head`) ends it quietly with 1, as
click does for typer's commands. Real child processes, as a shell starts them (the console script's entry
point and the typer app's, tests/support/console_script.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.console_script import ENTRIES

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "demo_sessions" / "scout-anthropic.cpsession")

# The plain (typer-free) paths and typer's, each a command that prints on success.
COMMANDS = [
    ["ps"],
    ["report", DEMO],
    ["simulate", DEMO, "--window", "32000"],
    ["find", DEMO, "latch"],
    ["explain", DEMO, "--turn", "17"],
    ["explain", DEMO, "--turn", "17", "--format", "json"],
    ["verify", DEMO],
    ["--help"],
    ["top", "--help"],
]


def _run(
    entry: str, argv: list[str], stdout: int | None, close_stdout: bool
) -> subprocess.CompletedProcess[str]:
    module, _, name = entry.partition(":")
    code = f"import sys; sys.argv[0] = 'cp-inspect'; from {module} import {name}; {name}()"
    shell = 'exec "$@" 1<&-' if close_stdout else 'exec "$@"'
    return subprocess.run(
        ["bash", "-c", shell, "bash", sys.executable, "-c", code, *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:1] + a[2:]))
def test_a_closed_stdout_is_an_error_said_on_stderr(entry: str, argv: list[str]) -> None:
    res = _run(entry, argv, None, close_stdout=True)
    assert res.returncode == 1, (res.returncode, res.stderr)
    assert res.stderr.strip().splitlines() == [
        "cp-inspect: cannot write the output: standard output is closed (`1<&-`); "
        "redirect it instead (> FILE, or > /dev/null to discard it)"
    ], res.stderr


def test_a_command_that_writes_nothing_to_stdout_still_succeeds_with_it_closed(tmp_path: Path) -> None:
    """As `true 1<&-` does: only a write fails. (And no file the command opens takes fd 1: the summary
    `report --svg` would print is not written into the chart.)"""
    code = (
        "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import hold_closed_stdout;"
        "hold_closed_stdout(); import os; f = open(sys.argv[1], 'w'); print(f.fileno(), file=sys.stderr); "
        "f.write('x'); f.close()"
    )
    res = subprocess.run(
        ["bash", "-c", 'exec "$@" 1<&-', "bash", sys.executable, "-c", code, str(tmp_path / "out")],
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, res.stderr
    assert int(res.stderr) > 2, res.stderr  # fd 1 is held: the file got another descriptor
    assert (tmp_path / "out").read_text() == "x"


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:1] + a[2:]))
def test_a_reader_that_went_away_ends_the_command_quietly(argv: list[str]) -> None:
    """`cp-inspect ... | head -1` once head has exited: the pipe's read end closed before the first write
    (deterministic, where a real `head` races the writer): exit 1, nothing on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        res = _run(ENTRIES[0], argv, write_end, close_stdout=False)
    finally:
        os.close(write_end)
    assert (res.returncode, res.stderr) == (1, ""), (res.returncode, res.stderr)
