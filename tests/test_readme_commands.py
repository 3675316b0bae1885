"""The README's command reference ("Other commands") runs as printed, top to bottom, in a fresh directory:
a new user copies those lines in order. Terminal UIs, a live agent's PID and files of the reader's own
(FILE, a.cpsession) are left out; TRAJECTORY.json is a real trajectory, when the shared folder is here."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import trajectory_files

ROOT = Path(__file__).resolve().parent.parent
NOT_HERE = {"replay", "attach", "demo", "top", "run"}  # a terminal UI, a live agent, or minutes of demo
THEIR_OWN = ("PID", "FILE", "a.cpsession")


def _reference_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Other commands", 1)[1].split("\nExit status", 1)[0]
    return [
        line.split("  #", 1)[0].strip()
        for line in block.splitlines()
        if line.strip().startswith("cp-inspect ")
    ]


def _cp_inspect(words: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(cwd)}
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *words], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_command_reference_runs_as_printed(tmp_path: Path) -> None:
    (tmp_path / "demo_sessions").symlink_to(ROOT / "demo_sessions")
    minis = [p for p in trajectory_files() if p.name.endswith(".traj.json")]
    if not minis:  # the import line cannot run: the recording it makes stands in
        (tmp_path / "run.cpsession").write_bytes(
            (ROOT / "demo_sessions" / "scout-openai.cpsession").read_bytes()
        )
    ran = []
    for line in _reference_lines():
        words = shlex.split(line)[1:]
        if words[0] in NOT_HERE or any(w in THEIR_OWN for w in words):
            continue
        if "TRAJECTORY.json" in words:
            if not minis:
                continue
            words = [str(minis[0]) if w == "TRAJECTORY.json" else w for w in words]
        done = _cp_inspect(words, tmp_path)
        # It was `ctx get --db ctx.sqlite` first: "no context store there" (exit 2) on a fresh clone.
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
        ran.append(words[0] if words[0] != "ctx" else f"ctx {words[1]}")
    assert {"explain", "simulate", "ctx get", "ctx reindex"} <= set(ran), ran
