"""Every command's --help gives an example, and the examples that need nothing but the clone (the demo
recordings) run as printed: the console script, in a directory holding demo_sessions/ as a clone does."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.console_script import typer_in_process

ROOT = Path(__file__).resolve().parent.parent

# Commands whose --help shows an example (ps, top and eval are left to their text).
WITH_EXAMPLES = ["explain", "verify", "salvage", "import", "replay", "attach", "demo", "simulate", "diff",
                 "forks", "export", "report", "proxy", "run", "ctx get", "ctx import", "ctx add", "ctx expand"]
# What an example may not be run for here: a terminal UI, a network peer, or a placeholder for a file of
# the reader's own (written in capitals, or a name this test cannot have).
TERMINAL_UIS = {"replay", "attach", "top", "run"}
NEEDS_A_PEER = {"export", "proxy"}
THEIR_OWN_FILES = re.compile(r"\b[A-Z]{2,}\b|(damaged|main|branch|parent)\.cpsession")


def _cp_inspect(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "XDG_RUNTIME_DIR": str(cwd)}
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _help(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`cp-inspect COMMAND --help` as the console script prints it: help is typer's on every path (no
    typer-free path reads --help), so it is read in this process (a child for each cost ~0.2 s of CPU in
    imports), at the width and in the directory the examples run with."""
    return typer_in_process([*command, "--help"], cwd=cwd, env={"COLUMNS": "200", "XDG_RUNTIME_DIR": str(cwd)})


def _examples(help_text: str) -> list[str]:
    """The command lines under an "Example:" / "Examples:" heading (a note after two spaces dropped)."""
    out: list[str] = []
    lines = help_text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() in ("Example:", "Examples:"):
            for follow in lines[i + 1:]:
                if not follow.strip().startswith("cp-inspect "):
                    break
                out.append(re.split(r"\s{3,}", follow.strip())[0])
    return out


def test_every_command_has_an_example_and_the_clones_own_ones_run(tmp_path: Path) -> None:
    (tmp_path / "demo_sessions").symlink_to(ROOT / "demo_sessions")
    top = _help(cwd=tmp_path)
    assert top.returncode == 0
    assert "Start with:" in top.stdout and "cp-inspect demo" in top.stdout  # where a new user begins
    examples: list[str] = []
    for command in WITH_EXAMPLES:
        shown = _help(*command.split(), cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        found = _examples(shown.stdout)
        assert found, f"`cp-inspect {command} --help` gives no example:\n{shown.stdout}"
        assert all(shlex.split(e)[1:1 + len(command.split())] == command.split() for e in found), found
        examples += found
    # ctx import makes the store ctx get reads: run in the order listed, imports first.
    runnable = [e for e in examples
                if shlex.split(e)[1] not in TERMINAL_UIS | NEEDS_A_PEER and not THEIR_OWN_FILES.search(e)
                and not (shlex.split(e)[1] == "demo" and "--no-tui" not in e)]
    runnable.sort(key=lambda e: 0 if " ctx import " in e else 1)
    assert len(runnable) >= 8, runnable
    for example in runnable:
        done = _cp_inspect(*shlex.split(example)[1:], cwd=tmp_path)
        assert done.returncode == 0, (example, done.stdout[-1500:], done.stderr[-1500:])
        assert done.stdout.strip(), example


def test_turn_options_say_they_count_from_the_end_too(tmp_path: Path) -> None:
    """explain and replay take --turn -1 (the last); their help said only "Turn to explain" / "Open at
    this turn", so a person looking for the last turn had to know its number."""
    for command in ("explain", "replay"):
        shown = _help(command, cwd=tmp_path).stdout
        turn = shown[shown.index("  --turn <int>"):].split("  --", 2)[1]
        assert "-1 is the last" in " ".join(turn.split()), (command, turn)
