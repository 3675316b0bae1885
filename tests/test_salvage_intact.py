"""`cp-inspect salvage` of a recording that was not damaged: "wrote OUT: 40 complete turns" alone left the
person looking for what had been wrong with it. It says so now: whole and closed (the copy is the same
session), or only not closed (a writer stopped between two turns: the copy is closed)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from engine.recording.cpsession import RecordingReader
from inspector.cli import app

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"


def test_salvage_of_a_whole_recording_says_nothing_was_damaged(tmp_path: Path) -> None:
    out = tmp_path / "copy.cpsession"
    r = CliRunner().invoke(app, ["salvage", str(DEMO), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [
        f"wrote {out}: 40 complete turns, 309 events",
        f"  nothing was damaged: {DEMO} was whole and closed; the copy holds every turn",
    ]


def test_salvage_of_a_recording_that_was_not_closed_says_so(tmp_path: Path) -> None:
    with RecordingReader.open(DEMO) as reader:
        assert reader.finished
        end = reader.data_end  # (the footer starts here: the file as a killed writer leaves it between turns)
    unclosed = tmp_path / "unclosed.cpsession"
    unclosed.write_bytes(DEMO.read_bytes()[:end])
    out = tmp_path / "closed.cpsession"
    r = CliRunner().invoke(app, ["salvage", str(unclosed), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [
        f"wrote {out}: 40 complete turns, 309 events",
        f"  nothing was damaged: {unclosed} was only not closed (its writer stopped between two turns)",
    ]
    with RecordingReader.open(out) as copy:
        assert copy.finished and copy.damage is None


def test_salvage_of_a_cut_recording_says_the_damage_once(tmp_path: Path) -> None:
    """The damage was said twice: the report's "dropped:" line on stdout and the same words as a warning on
    stderr (every reader's warning on opening a damaged file), one after the other on a terminal."""
    import subprocess
    import sys

    data = DEMO.read_bytes()
    cut = tmp_path / "cut.cpsession"
    cut.write_bytes(data[: len(data) * 2 // 3])
    out = tmp_path / "fixed.cpsession"
    r = subprocess.run(
        [sys.executable, "-m", "inspector.cli", "salvage", str(cut), "-o", str(out)],
        capture_output=True, text=True, timeout=120, cwd=DEMO.parents[1],
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {out}: "), r.stdout
    assert "  dropped: last frame at offset " in r.stdout, r.stdout
    assert r.stderr == "", r.stderr
