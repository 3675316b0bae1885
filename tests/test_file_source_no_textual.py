"""A recording's far fold outside the TUI loads no Textual: FileSource.replayer asks for the running
Textual worker's cancel flag (so a step elsewhere stops the fold), and asking by importing textual.worker
loaded textual, rich and asyncio (~150 modules, ~8 MB) into every CLI tool or script that replays a file.
A fresh interpreter, the real demo recording, a fold to its last turn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"

CHILD = """
import sys
from pathlib import Path
from inspector.sources.file import FileSource
src = FileSource(Path(sys.argv[1]))
last = len(list(src.load_chunks()))
replayer = src.replayer(upto_turn=10_000)
print(replayer is not None, sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')))
"""


def test_a_far_fold_outside_the_tui_imports_no_textual() -> None:
    r = subprocess.run([sys.executable, "-c", CHILD, str(DEMO)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True []", r.stdout
