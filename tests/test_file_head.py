"""What a file given to a command is, told from its first bytes in one place (inspector/recording_open.py:
file_head, starts_a_recording, starts_json), as `import` (a recording given as a trajectory), `ctx import`
(a recording or a trajectory) and `ctx --db` (a recording or trajectory given as the store) ask it."""

from __future__ import annotations

from pathlib import Path

from inspector import cli_ctx, cli_ctx_import, import_cli
from inspector.recording_open import file_head, starts_a_recording, starts_json, trajectory_hint

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def test_a_recording_a_json_file_and_other_bytes_are_told_apart(tmp_path: Path) -> None:
    head = file_head(DEMO)
    assert head is not None and len(head) == 64
    assert starts_a_recording(head) and not starts_json(head)
    traj = tmp_path / "run.traj"  # a trajectory with a BOM and blank lines first: JSON all the same
    traj.write_bytes(b'\xef\xbb\xbf \n\t[{"role": "user"}]')
    jhead = file_head(traj)
    assert jhead is not None and starts_json(jhead) and not starts_a_recording(jhead)
    other = tmp_path / "notes.txt"
    other.write_bytes(b"# notes on the run, plain text")
    ohead = file_head(other)
    assert ohead is not None and not starts_a_recording(ohead) and not starts_json(ohead)


def test_a_file_that_cannot_be_read_has_no_head(tmp_path: Path) -> None:
    assert file_head(tmp_path / "missing.cpsession") is None
    assert file_head(tmp_path) is None  # a directory


def test_each_command_reads_the_same_answer(tmp_path: Path) -> None:
    traj = tmp_path / "run.json"
    traj.write_text('{"messages": []}')
    renamed = tmp_path / "copy.bin"  # a recording whatever its name
    renamed.write_bytes(DEMO.read_bytes())
    assert import_cli._is_recording(renamed) and not import_cli._is_recording(traj)
    assert not import_cli._is_recording(tmp_path)  # not a regular file: never opened
    assert cli_ctx_import._is_recording(renamed) and not cli_ctx_import._is_recording(traj)
    assert cli_ctx_import._is_recording(tmp_path / "absent.cpsession")  # by its name
    assert cli_ctx._not_a_store(renamed) == "a .cpsession recording"
    assert cli_ctx._not_a_store(traj) == "JSON (a trajectory or log?)"
    assert cli_ctx._not_a_store(tmp_path / "new.sqlite") is None
    hint = trajectory_hint(traj)
    assert hint is not None and "is JSON, not a .cpsession recording" in hint
