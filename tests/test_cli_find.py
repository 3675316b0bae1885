"""`cp-inspect find FILE TEXT` and the scan under it (inspector/content_search.py, what the inspector's
`/` runs): the turns a text enters or leaves what a recording sent, case-insensitive, with the section
and a snippet; exit 1 when no turn sent it (as grep), 2 for no text, 1 for a missing file."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from inspector.cli import app
from inspector.content_search import ENTERS, LEAVES, ContentScan, count_in, describe, scan_source, snippet
from inspector.sources.file import FileSource
from inspector.sources.synthetic import SyntheticSource

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
runner = CliRunner()


def test_the_scan_finds_each_turn_a_text_enters_or_leaves_the_prompt() -> None:
    # The synthetic history keeps the last four rounds: "(step 12)" is sent from turn 12 to 15.
    source = SyntheticSource(40)
    scan = ContentScan("(STEP 12)", source)
    scan.scan_to(list(range(40)), lambda: False)
    assert [(c.turn, c.kind, c.section) for c in scan.changes] == [
        (12, ENTERS, "history"),
        (16, LEAVES, "history"),
    ]
    assert scan.at(13) == {"history": 1} and scan.at(16) == {}
    assert describe(scan.changes[0], "(STEP 12)") == "'(STEP 12)' enters the prompt in history"
    assert describe(scan.changes[1], "x") == "'x' left the prompt (it was in history the turn before)"


def test_the_scan_stops_when_its_answer_is_in_and_goes_on_from_there() -> None:
    source = SyntheticSource(40)
    scan = ContentScan("(step 12)", source)
    turns = list(range(40))
    scan.scan_to(turns, lambda: False, until=lambda: bool(scan.changes))
    assert scan.scanned == 13  # turns 0..12: the first change is at 12
    scan.scan_to(turns, lambda: scan.scanned >= 20)
    assert scan.scanned == 20 and [c.turn for c in scan.changes] == [12, 16]
    assert scan.next_change(12) is not None and scan.next_change(12).turn == 16  # type: ignore[union-attr]
    assert scan.next_change(12, inclusive=True).turn == 12  # type: ignore[union-attr]
    assert scan.prev_change(16).turn == 12 and scan.prev_change(12) is None  # type: ignore[union-attr]


def test_a_recording_is_scanned_through_its_own_reader() -> None:
    source = FileSource(DEMO)
    own = scan_source(source)
    try:
        assert isinstance(own, FileSource) and own is not source and own.path == source.path
    finally:
        own.close()
        source.close()
    live = SyntheticSource(30, live=True, initial=20)
    assert scan_source(live) is live


def test_count_and_snippet() -> None:
    assert count_in("Latch latch LATCH", "latch") == 3 and count_in("x", "") == 0
    text = "a" * 50 + " the latch flipped " + "b" * 50
    assert snippet(text, "latch") == "…" + "a" * 25 + " the latch flipped " + "b" * 21 + "…"  # 30 either side
    assert snippet("no hit", "latch") == ""


def test_find_lists_the_turns_with_section_and_snippet() -> None:
    r = runner.invoke(app, ["find", str(DEMO), "Latch"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == f"'Latch' in what {DEMO} sent (40 turns): it enters or leaves the prompt on 7 turns"
    assert lines[1].startswith("  turn 11  enters  history  (3 matches)  …") and "latch flipped" in lines[1]
    assert lines[2].startswith("  turn 16  again   history  (3 -> 10)")
    assert lines[3] == "  turn 17  leaves  history  (was 10)"


def test_find_json() -> None:
    r = runner.invoke(app, ["find", str(DEMO), "latch", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["turns"] == 40 and out["unreadable"] == 0
    assert [(c["turn"], c["kind"]) for c in out["changes"]] == [
        (11, "enters"),
        (16, "enters"),
        (17, "leaves"),
        (22, "enters"),
        (25, "enters"),
        (30, "leaves"),
        (37, "enters"),
    ]
    assert out["changes"][0]["section"] == "history" and "latch" in out["changes"][0]["snippet"]


def test_find_exit_status_as_grep() -> None:
    r = runner.invoke(app, ["find", str(DEMO), "zqxjw"])
    assert r.exit_code == 1 and r.output == f"'zqxjw' is in none of the 40 turns {DEMO} sent\n", r.output
    r = runner.invoke(app, ["find", str(DEMO), "  "])
    assert r.exit_code == 2 and "give the text to search for" in r.output
    r = runner.invoke(app, ["find", "/nonexistent.cpsession", "x"])
    assert r.exit_code == 1 and "no such file" in r.output


def test_a_recording_streamed_in_one_pass_counts_as_turn_by_turn_reading_does() -> None:
    """The scan reads a recording in one pass (SentStream, as verify builds each request); every turn's
    counts are the ones the Content tab's own reading (FileSource.section_content, a re-plan) gives."""
    from inspector.content_search import SentStream, stream_for

    source = FileSource(DEMO)
    turns = source.reader.turn_numbers()
    try:
        for text in ("latch", "list_files", "## user", "README"):
            stepped = ContentScan(text, source)
            stepped.scan_to(turns, lambda: False)
            streamed = ContentScan(text, source, SentStream(DEMO))
            streamed.scan_to(turns, lambda: False)
            streamed.close()
            assert streamed.counts == stepped.counts and streamed.changes == stepped.changes, text
            assert any(streamed.counts), text
        stream = stream_for(source)
        assert isinstance(stream, SentStream)
        assert stream.build_of(3) is not None and stream.build_of(2) is None  # (read on, never back)
        stream.close()
        assert stream_for(SyntheticSource(5)) is None
    finally:
        source.close()
