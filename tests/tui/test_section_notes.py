"""A section's note in the trace (why it was sent as it was) is shown where a person looks at the section.

The engine writes one on the history section when Bedrock gets an empty message as text
(engine/providers/bedrock.py: '[empty message]', blank text dropped), and on a section whose binder failed
("timed out after 0.5s", the demo's turn 12). No reader showed either: the manifest said "full" or
"degraded", the Content tab the text, `cp-inspect explain` the figures. Now the manifest marks the name
with "*" (in its padding: a note never widens the column), the Content tab says the note under the section's title, and explain prints it under the row."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.pipeline import Pipeline
from engine.providers.bedrock import EMPTY_TEXT
from inspector.app import InspectorApp
from inspector.cli import app as cli
from inspector.sources.file import FileSource
from panels.content_viewer import ContentViewer
from panels.manifest import ManifestPanel
from panels.markup_line import MarkupLine
from tests.tui.conftest import settle
from tests.tui.test_hardening import DEMO

NOTE_MARK = "*"  # in the padding after the name of a section with a note (panels.manifest.NOTE_MARK)


def _bedrock_recording(path: Path) -> Path:
    """Two turns to Bedrock of an imported conversation holding empty messages (the second turn's
    history note names them), recorded by the engine."""
    pipe = Pipeline("anthropic.claude-sonnet-4-5", "bedrock", 200_000, record=str(path))
    pipe.check_content = False  # as the importers fold what the agent sent
    pipe.identity("You are terse.")
    pipe.user("List the files.")
    pipe.next_request()
    pipe.record_usage({"input_tokens": 30, "output_tokens": 1})
    pipe.assistant("")  # an agent's empty reply
    pipe.user("")  # and the user's empty answer
    pipe.next_request()
    pipe.record_usage({"input_tokens": 40, "output_tokens": 1})
    pipe.close()
    return path


def _note_of(path: Path, turn: int) -> str:
    source = FileSource(path)
    trace = source.full_trace(turn)
    return next(s["note"] for s in trace["sections"] if s["kind"] == "history")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_history_note_is_shown_with_the_section(tmp_path: Path, size: tuple[int, int]) -> None:
    path = _bedrock_recording(tmp_path / "bedrock.cpsession")
    note = _note_of(path, 1)
    assert note.startswith("2 messages with no content") and repr(EMPTY_TEXT) in note, note
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        manifest = app.query_one("#manifest", ManifestPanel)
        history = manifest._ids.index("history")
        rows = [manifest.render_line(1 + i).text for i in range(len(manifest._rows))]
        name = "History".ljust(manifest._widths["section"])
        assert rows[history].startswith(f" {name}{NOTE_MARK}"), rows  # there is more to read
        assert all(NOTE_MARK not in r for i, r in enumerate(rows) if i != history), rows
        manifest.focus()
        manifest.move_cursor(row=history)
        await settle(pilot)
        viewer = app.query_one("#content", ContentViewer)
        line = app.query_one("#content-note", MarkupLine)
        assert viewer.title.startswith("history · turn 1") and viewer.note == note
        assert line.display and line.region.height >= 1
        shown = " ".join(line.render_line(y).text.strip() for y in range(line.region.height))
        assert shown.startswith("note: 2 messages with no content"), shown
        if size[0] >= 120:
            assert shown.replace(" ", "") == f"note: {note}".replace(" ", ""), shown  # whole, wrapped
        await pilot.press("left")  # turn 0 sent no empty message: no note, and the line goes
        await settle(pilot)
        assert viewer.title.startswith("history · turn 0") and viewer.note == ""
        assert not line.display
        await pilot.press("right")  # back: the step shows the note again (prepared or fetched)
        await settle(pilot)
        assert viewer.note == note and line.display
        await pilot.press("b")  # the request body has no note
        await settle(pilot)
        assert viewer.title.startswith("request body") and not line.display


async def test_a_degraded_sections_note_in_the_demo() -> None:
    """Turn 12 of the demo: the environment's binder timed out. Its mark takes no room: the manifest's
    columns (which only widen) are as they were at turn 11, so at 120 columns the sent column stays whole."""
    app = InspectorApp(FileSource(DEMO), start_turn=11)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        manifest = app.query_one("#manifest", ManifestPanel)
        row = manifest._ids.index("environment")
        widths = dict(manifest._widths)
        manifest.move_cursor(row=row)
        await settle(pilot)
        assert NOTE_MARK not in manifest.render_line(1 + row).text
        assert app.query_one("#content", ContentViewer).note == ""
        await pilot.press("right")
        await settle(pilot)
        line = manifest.render_line(1 + row).text
        assert line.startswith(" Environment" + NOTE_MARK), line
        assert str(manifest._rows[row]["form"]) == "degraded"
        assert app.query_one("#content", ContentViewer).note == "timed out after 0.5s"
        assert manifest._widths["section"] == widths["section"], (widths, manifest._widths)
        assert line.rstrip().endswith(" 12"), line  # the sent column, whole at 120 columns


def test_explain_prints_a_sections_note(tmp_path: Path) -> None:
    path = _bedrock_recording(tmp_path / "bedrock.cpsession")
    note = _note_of(path, 1)
    r = CliRunner().invoke(cli, ["explain", str(path), "--turn", "1"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("history "))
    assert lines[row + 1] == f"    note: {note}", lines[row: row + 2]
    r = CliRunner().invoke(cli, ["explain", str(path), "--turn", "1", "--format", "json"])
    assert r.exit_code == 0, r.output
    import json

    sections = json.loads(r.output)["sections"]
    assert next(s for s in sections if s["id"] == "history")["note"] == note
    assert "note:" not in CliRunner().invoke(cli, ["explain", str(path), "--turn", "0"]).output
