"""engine/recording/zstd_backend.py: a recording is read without zstandard's __init__ (and its
`platform` import), with the very backend a later `import zstandard` uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CODE = """
import json, sys
from engine.recording.cpsession import RecordingReader
with RecordingReader.open(sys.argv[1]) as r:
    got = [ev["i"] for ev in r.events() if ev.get("k") == "note"]
before = "platform" in sys.modules, "zstandard" in sys.modules
import zstandard
from engine.recording import cpsession
print(json.dumps({
    "before": before,
    "read": got == list(range(50)),
    "same": cpsession.zstandard.ZstdDecompressor is zstandard.ZstdDecompressor,
}))
"""


def run(tmp_path: Path, **env: str) -> dict[str, object]:
    """Write a recording here, read it in a fresh process."""
    from engine.recording.cpsession import RecordingWriter

    with RecordingWriter(tmp_path / "r.cpsession", {"model": "m", "provider": "deepseek"}) as w:
        for i in range(50):
            w.append({"k": "note", "i": i, "text": "x" * (i * 37)})
    out = subprocess.run(
        [sys.executable, "-c", CODE, str(tmp_path / "r.cpsession")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_recording_is_read_without_zstandards_init(tmp_path: Path) -> None:
    assert run(tmp_path) == {"before": [False, False], "read": True, "same": True}


def test_an_asked_for_backend_goes_through_the_package(tmp_path: Path) -> None:
    """PYTHON_ZSTANDARD_IMPORT_POLICY set: the package's __init__ chooses, as before."""
    got = run(tmp_path, PYTHON_ZSTANDARD_IMPORT_POLICY="cext")
    assert got == {"before": [True, True], "read": True, "same": True}
