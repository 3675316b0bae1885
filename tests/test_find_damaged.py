"""`cp-inspect find FILE TEXT` over a recording damaged part way (a corrupt frame mid-file): it listed what
the turns before the damage sent and said "67 turns could not be read", not why nor what to do, where every
other command names the corrupt frame and the salvage command. The summary says both now."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from inspector.cli import app

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"


def test_find_over_a_damaged_recording_says_why_turns_could_not_be_read(tmp_path: Path) -> None:
    data = bytearray(DEMO.read_bytes())
    at = len(data) // 2
    data[at : at + 16] = b"X" * 16  # a frame in the middle no longer matches its checksum
    damaged = tmp_path / "damaged.cpsession"
    damaged.write_bytes(bytes(data))
    runner = CliRunner()
    r = runner.invoke(app, ["find", str(damaged), "permissions"])
    head = r.output.splitlines()[0]
    unread = json.loads(runner.invoke(app, ["find", str(damaged), "permissions", "--json"]).output)[
        "unreadable"
    ]
    assert r.exit_code == 0 and unread > 0, r.output
    assert f"; {unread} turns could not be read: " in head, head
    assert "corrupt frame" in head and f"cp-inspect salvage {damaged} -o FIXED.cpsession" in head, head
    assert f"could not be read: {damaged}" not in head  # (the file is named once, at the start)


def test_verify_names_a_checksum_fault_once_as_a_corrupt_frame(tmp_path: Path) -> None:
    # "corrupt frame (checksum mismatch (corrupt frame))": the frame decoder's own words, wrapped by a
    # caller that says "corrupt frame" itself, said it twice.
    data = bytearray(DEMO.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged = tmp_path / "damaged.cpsession"
    damaged.write_bytes(bytes(data))
    r = CliRunner().invoke(app, ["verify", str(damaged)])
    assert r.exit_code != 0
    assert "corrupt frame (checksum mismatch) at offset" in r.output, r.output
    assert r.output.count("corrupt frame") == 1, r.output
