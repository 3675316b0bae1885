"""attach --record saves what it received when the inspector exits; a disk that fills while the session
ran made that save a RecordingError traceback after the screen had closed. Now one line naming the file
and what it keeps, exit 1. A real child process whose file size limit (RLIMIT_FSIZE, SIGXFSZ ignored)
makes the writes fail as a full disk does, saving a real recording's events as attach does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"

CHILD = """
import resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from inspector.attach_cli import _save_received
from inspector.sources.file import FileSource
src = FileSource(Path(sys.argv[1]))
src.events  # loaded before the limit, as attach has them in memory
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
_save_received(src, Path(sys.argv[2]))
"""


def test_a_save_the_disk_cuts_short_is_one_line_and_exit_1(tmp_path: Path) -> None:
    out = tmp_path / "attached.cpsession"
    r = subprocess.run(
        [sys.executable, "-c", _wrapped(CHILD), str(DEMO), str(out)], cwd=ROOT, capture_output=True, text=True
    )
    assert "Traceback" not in r.stderr, r.stderr  # (on the old attach: RecordingError's traceback)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.startswith(f"cp-inspect: could not save the attached session: {out}: write failed"), r.stderr
    assert "File too large" in r.stderr and f"cp-inspect verify {out}" in r.stderr  # why, and how to check it
    assert "saved" not in r.stdout


def _wrapped(body: str) -> str:
    """The child as typer's standalone mode ends a command: typer.Exit becomes the exit status."""
    return "import typer\ntry:\n" + "".join(f"    {line}\n" for line in body.strip().splitlines()) + (
        "except typer.Exit as e:\n    raise SystemExit(e.exit_code)\n"
    )
