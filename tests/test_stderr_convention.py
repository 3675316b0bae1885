"""What cp-inspect writes to stderr follows one convention (inspector/recording_open.py's docstring):
every line starts with `cp-inspect: `, a warning with `cp-inspect: warning: `. Real subprocesses of the
commands whose lines had other prefixes or none: a damage warning, an error, ctx's empty-store note
(tests/test_ps_cli.py: ps's skipped sockets, as warnings)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inspector.cli", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=120,
    )


def _lines(r: subprocess.CompletedProcess[str]) -> list[str]:
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines, (r.returncode, r.stdout, r.stderr)
    bad = [line for line in lines if not line.startswith("cp-inspect: ")]
    assert not bad, r.stderr
    return lines


def test_every_stderr_line_says_it_is_cp_inspect(tmp_path: Path) -> None:
    cut = tmp_path / "cut.cpsession"
    data = DEMO.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    warned = _lines(_cli("simulate", str(cut), "--json"))
    assert warned[0].startswith(f"cp-inspect: warning: {cut}: last frame at offset ")
    failed = _cli("find", str(tmp_path / "none.cpsession"), "x")
    assert failed.returncode == 1 and _lines(failed)[0].startswith("cp-inspect: no such file")
    empty = tmp_path / "empty.sqlite"
    from engine.store import ContextStore

    ContextStore(empty).close()
    said = _lines(_cli("ctx", "get", "--db", str(empty), "--budget", "1000"))
    assert "holds no items yet" in said[0]
