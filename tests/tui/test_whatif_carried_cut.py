"""The What-if on a turn after a compaction, as a person meets it: widening the window there left "tokens
sent" unchanged with no word why (the cost_aware policy keeps the compacted history as the session's
state, and a re-plan of one turn keeps it). The answer now says the history stays compacted, where the
cut was made, and what would show the session without it (W, or a turn before the cut). On the
compaction's own turn, and before it, the re-plan changes the history and no such note is shown. The
demo recording (a real engine recording: it compacts at turn 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from tests.tui.conftest import settle

DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"


async def _widened(turn: int, size: tuple[int, int] = (120, 40)) -> tuple[str, InspectorApp]:
    """The What-if answer's text on `turn` after the window slider is moved up, as with the keys."""
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=turn)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        await pilot.press("w")  # again: the budget slider has focus
        await pilot.press("shift+right")
        await settle(pilot)
        shown = str(app.query_one("#whatif-result").render())
        return " ".join(shown.split()), app


async def test_a_wider_window_after_a_compaction_says_the_history_stays_compacted_and_how_to_see_it() -> None:
    shown, app = await _widened(20)
    assert "window (provider) 10k 20k" in shown, shown
    assert "tokens sent 3.1k 3.1k ±0" in shown, shown  # what left the person without a word why
    assert (
        "tokens sent 3.1k 3.1k ±0 History stays compacted: a re-plan of this turn keeps the cut made at turn "
        "17 (7.3k tokens left out) under any setting. Press W to re-run the whole session under these "
        "settings, or go to a turn before 17."
    ) in shown, shown


def _screen(app: InspectorApp) -> list[str]:
    """What is on screen, as plain text lines."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_the_note_is_on_screen_beside_tokens_sent(size: tuple[int, int]) -> None:
    """At 80x24 (a What-if pane of six rows) the answer showed "tokens sent ... ±0" on its last row and the
    note that says why four rows below it: a person saw the window widen and nothing move. The row and the
    whole note are on screen together, at every size."""
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=20)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        await pilot.press("w", "shift+right")
        await settle(pilot)
        pane = app.query_one("#whatif").scrollable_content_region  # (the What-if pane's part of each row)
        shown = _screen(app)[pane.y: pane.bottom]
        rows = [" ".join(row[pane.x: pane.right].split()) for row in shown]
        at = next((i for i, row in enumerate(rows) if row.startswith("tokens sent 3.1k 3.1k ±0")), None)
        assert at is not None, "\n".join(rows)
        note = " ".join(rows[at + 1:])
        assert note.startswith("History stays compacted: a re-plan of this turn keeps the cut made at turn 17"), note
        assert "or go to a turn before 17." in note, "\n".join(rows)
        if size == (80, 24):  # the rows that say what moved, above it
            assert rows[at - 2].startswith("window (provider) 10k 20k"), "\n".join(rows)


async def test_w_from_there_re_runs_the_session_with_fewer_compactions() -> None:
    """What the note points to does what it says: the session-wide what-if under the wider window
    compacts less often than the recording did."""
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        await pilot.press("w", "shift+right")
        await settle(pilot)
        await pilot.press("W")
        await settle(pilot)
        for _ in range(600):  # the session's re-run goes on in a worker
            if app.query_one("#whatif").session_result is not None:
                break
            await pilot.pause(0.1)
        report = app.query_one("#whatif").session_result
        assert report is not None
        recorded = sum(
            1 for t in app.timeline.traces if (t.get("compaction") or {}).get("decision") == "compacted"
        )
        shown = " ".join(str(app.query_one("#whatif-result").render()).split())
        assert "compactions" in shown, shown
        row = shown.split("compactions", 1)[1].split()
        assert int(row[0]) < recorded, (row, recorded)  # the what-if column: fewer cuts than the recording's


@pytest.mark.parametrize("turn", [16, 17])
async def test_no_such_note_where_the_re_plan_changes_the_history(turn: int) -> None:
    # 16: before any compaction; 17: the compaction's own turn, which a wider window does not make
    shown, _ = await _widened(turn)
    assert "window (provider) 10k 20k" in shown, shown
    assert "History stays compacted" not in shown, shown
