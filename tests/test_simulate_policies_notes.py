"""`simulate A B C --policies all`: the notes under the table, for several recordings. Each recording's
calibration was said twice (a head line per file, then a note per file that differed from the others only
in its ratio), and a note that applied to every recording named every one of them after it: nine imports
gave sixteen notes. A ratio shared is said once, the notes differ only where the recordings do, and a
note names the recordings only when it does not apply to all of them."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from inspector.cli import app

DEMOS = sorted((Path(__file__).resolve().parents[1] / "demo_sessions").glob("*.cpsession"))


def test_notes_for_several_recordings_are_said_once() -> None:
    assert len(DEMOS) == 3
    r = CliRunner().invoke(app, ["simulate", *map(str, DEMOS), "--policies", "all"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    # One calibration line (the three share x1.059), naming no file: it is every recording's.
    calibrated = [line for line in lines if "token counts calibrated" in line]
    assert calibrated == ["  token counts calibrated to the provider's (x1.059 on every recording)"], (
        calibrated
    )
    notes = [line for line in lines if line.startswith("note: ")]
    assert len(notes) == len(set(notes))
    scaled = [n for n in notes if n.startswith("note: token counts scaled by")]
    assert len(scaled) == 1 and scaled[0].startswith(
        "note: token counts scaled by each recording's ratio above: claude-sonnet-4's own tokens"
    ), scaled
    for note in notes:
        named = [d.name for d in DEMOS if str(d) in note]
        assert len(named) < len(DEMOS), f"a note that applies to all names them all: {note}"
    # One that applies to one recording still names it.
    assert any("openai cache rules" in n and n.endswith(f"({DEMOS[2]})") for n in notes), notes


def test_one_recording_keeps_its_own_lines() -> None:
    r = CliRunner().invoke(app, ["simulate", str(DEMOS[0]), "--policies", "all"])
    assert r.exit_code == 0, r.output
    assert f"  token counts calibrated to the provider's (x1.059 on {DEMOS[0]})" in r.output.splitlines()
    assert "note: token counts scaled by 1.059: claude-sonnet-4's own tokens" in r.output
