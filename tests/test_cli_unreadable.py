"""A file the user cannot read is said as the command's own one line (`cp-inspect: cannot open recording
X: Permission denied`, exit 1), whichever parser read the command line: typer's path check answered first
on the typer path (`verify -- FILE`, every `import`) with its usage block and "Invalid value for 'src':
path 'X' is not readable." (exit 2).

Root reads a mode-000 file, so as root the real test runs the command in a new user namespace
(`unshare -U`: root's files are then another user's, and the mode holds); it is skipped where neither
works. The CliRunner test needs no privileges: it takes readability away from typer's check alone
(os.access), which is what the old code consulted, so it fails there and passes here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
TRAJECTORY = (  # a mini-swe-agent trajectory of one call
    '{"info": {"config": {"model": {"model_name": "deepseek-chat"}}}, "trajectory_format": "mini-swe-agent-1", '
    '"instance_id": "t", "messages": [{"role": "system", "content": "You fix bugs."}, '
    '{"role": "user", "content": "Fix it."}, {"role": "assistant", "content": "ls"}]}'
)

# (argv with FILE for the unreadable recording or trajectory, the exit status the README gives it)
COMMANDS = [
    (["import", "auto", "FILE", "-o", "OUT"], 1),
    (["import", "auto", "FILE", "--list"], 1),
    (["verify", "--", "FILE"], 1),
    (["verify", "FILE"], 1),
    (["salvage", "-o", "OUT", "--", "FILE"], 1),
    (["explain", "--", "FILE"], 1),
    (["simulate", "--", "FILE"], 1),
    (["replay", "--", "FILE"], 1),
    (["forks", "--", "FILE"], 2),  # forks: 2 for any input it cannot use
]


def _prefix(probe: Path) -> list[str] | None:
    """How to run a child that cannot read `probe` (mode 000), or None where this host cannot."""
    if not os.access(probe, os.R_OK):
        return []  # not root: the mode holds
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    try:
        res = subprocess.run(
            [unshare, "-U", sys.executable, "-c", f"open({str(probe)!r}).read()"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [unshare, "-U"] if b"PermissionError" in res.stderr else None


@pytest.mark.parametrize(("argv", "status"), COMMANDS, ids=[" ".join(a) for a, _ in COMMANDS])
def test_an_unreadable_file_is_one_line_saying_so(tmp_path: Path, argv: list[str], status: int) -> None:
    src = tmp_path / ("run.json" if argv[0] == "import" else "run.cpsession")
    if argv[0] == "import":
        src.write_text(TRAJECTORY)
    else:
        shutil.copyfile(DEMO, src)
    src.chmod(0)
    prefix = _prefix(src)
    if prefix is None:
        pytest.skip("running as root without a user namespace (unshare -U): a mode-000 file stays readable")
    out = tmp_path / "out.cpsession"
    args = [str(src) if a == "FILE" else str(out) if a == "OUT" else a for a in argv]
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    res = subprocess.run(
        [*prefix, sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == status, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr  # no usage block, no traceback
    assert lines[0].startswith("cp-inspect: ") and str(src) in lines[0], lines[0]
    assert "Permission denied" in lines[0], lines[0]
    assert "Invalid value" not in res.stderr and res.stdout == ""
    assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "FILE"],
        ["simulate", "FILE", "--window", "32000"],
        ["forks", "FILE"],
        ["import", "auto", "TRAJ", "--list"],
    ],
)
def test_typer_leaves_reading_to_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """Typer's own readability check (os.access, before the command runs) is off for every path: with it
    answering "not readable" the command still runs and reads the file itself."""
    traj = tmp_path / "run.json"
    traj.write_text(TRAJECTORY)
    files = {"FILE": str(DEMO), "TRAJ": str(traj)}
    denied = set(files.values())
    real_access = os.access

    def access(path: object, mode: int, *a: object, **k: object) -> bool:
        if str(path) in denied and mode & os.R_OK:
            return False
        return real_access(path, mode, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    res = CliRunner().invoke(app, [files.get(a, a) for a in argv])
    assert "not readable" not in res.output, res.output
    assert res.exit_code == 0, res.output
