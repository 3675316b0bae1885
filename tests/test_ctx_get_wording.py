"""`ctx get --explain` (the README's context-store line) in plain words: "1 turns ago" and "0 turns ago"
were how the newest items read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def _cp_inspect(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)


def test_ctx_get_explain_says_how_recent_in_plain_words(tmp_path: Path) -> None:
    db = str(tmp_path / "ctx.sqlite")
    assert _cp_inspect("ctx", "import", str(DEMO), "--db", db).returncode == 0
    out = _cp_inspect("ctx", "get", "--db", db, "--budget", "12000", "--explain")
    assert out.returncode == 0, out.stderr
    assert "recent (1 turn ago)" in out.stdout and "recent (this turn)" in out.stdout, out.stdout
    assert "1 turns ago" not in out.stdout and "0 turns ago" not in out.stdout
