"""What a line too long for the terminal leaves out: the status line showed at most 32 characters of a
recording's name however wide the terminal, cut a disconnected agent's banner (and the path it names) at
the edge, and cut the model with no sign; the Alerts tab cut a message at the panel's edge with no sign
(at 120 columns, 18 of its characters) and showed the rest nowhere. Now each line shows what fits, a cut
ends with "…", and the whole is there to see: the status line's tooltip and the help screen (`?`), and
the alert under the cursor in the Alerts panel's last rows. At 80, 120 and 200 columns."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.pilot import Pilot

from inspector.app import InspectorApp
from inspector.screens import HelpScreen
from inspector.sources.file import FileSource
from inspector.sources.synthetic import SyntheticSource
from panels.alerts import FIXED, AlertsPanel
from panels.markup_line import MarkupLine
from tests.tui.conftest import settle
from tests.tui.test_hardening import DEMO

LONG = "deepseek_reasoner_dev__marshmallow-code__marshmallow-1343.cpsession"
KEPT = f"/home/someone/projects/agents/runs/2026-12-04/{LONG}"
ROOT = Path(__file__).resolve().parents[2]
OPENAI = ROOT / "demo_sessions" / "scout-openai.cpsession"
SIZES = {"80x24": (80, 24), "120x40": (120, 40), "200x60": (200, 60)}


def _drawn(app: InspectorApp) -> str:
    """The status line as drawn: cut to the terminal's width (less its padding)."""
    return app.query_one("#status", MarkupLine).render_line(0).text.rstrip()


@pytest.mark.parametrize("size", list(SIZES))
async def test_the_status_line_shows_what_fits_and_the_whole_on_hover_and_in_help(
        tmp_path: Path, size: str) -> None:
    width, height = SIZES[size]
    path = tmp_path / LONG
    shutil.copy(DEMO, path)
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=(width, height)) as pilot:
        await settle(pilot)
        drawn = _drawn(app)
        assert cell_len(drawn) <= width - 2, drawn
        assert "turn 39 (40/40)" in drawn, drawn
        if width >= 200:  # room for all of it: the whole name (it was cut to 32 characters at any width)
            assert drawn.startswith(f"REPLAY {LONG}  turn 39"), drawn
        elif width >= 120:  # room for all but its .cpsession, which goes first
            assert drawn.startswith(f"REPLAY {LONG.removesuffix('.cpsession')}  turn 39"), drawn
        else:  # the name shortened in the middle, as much of it as leaves the rest room
            assert drawn.startswith("REPLAY deepseek") and "…" in drawn.split("  turn")[0], drawn
        # The model whole (at 80 it was cut, to keep 32 characters of the name; narrower, it is cut at the
        # edge and said to be: tests/tui/test_narrow.py)
        assert drawn.endswith("claude-sonnet-4 · anthropic"), drawn
        status = app.query_one("#status", MarkupLine)
        tooltip = str(status.tooltip)
        assert f"file: {path}" in tooltip, tooltip  # the directory, which the line never shows
        if width < 200:  # what the line cut, whole
            assert f"REPLAY {LONG}  turn 39 (40/40)" in tooltip and "claude-sonnet-4 · anthropic" in tooltip, tooltip
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        session = "\n".join(app.screen.session)
        assert str(path) in session and ("claude-sonnet-4 · anthropic" in session) == (width < 200), session
        assert any(f"`file: {path}`" in row for row in app.screen.compose_rows()), app.screen.compose_rows()[:6]


@pytest.mark.parametrize("size", list(SIZES))
async def test_a_disconnected_agents_banner_keeps_the_end_of_the_path_it_names(size: str) -> None:
    width, height = SIZES[size]
    src = SyntheticSource(30, live=True, initial=20, delay=0.01)
    src.header["recording"] = KEPT
    app = InspectorApp(src)
    async with app.run_test(size=(width, height)) as pilot:
        await settle(pilot)
        assert app.disconnected is not None
        drawn = _drawn(app)
        assert cell_len(drawn) <= width - 2, drawn
        # The turn, its count and the play state always show; the banner gives way to them (tui27).
        assert "turn 29 (30/30)  ⏸ 1×" in drawn, drawn
        # The path, which the line would show only cut (at 80 columns "kept at /home….cpsession", naming
        # nothing), is on a line of its own under it: the file's name whole, as much of its directory as
        # fits. The banner names no path then (it would say it twice).
        assert "Agent disconnected — 30 turns kept" in drawn and "kept at" not in drawn, drawn
        where = app.query_one("#status-where", MarkupLine)
        assert where.display
        below = where.render_line(0).text.rstrip()
        assert cell_len(below) <= width - 2, below
        assert below.endswith(f"/{LONG}"), below
        if width >= 200:  # room for all of it
            assert below == f"Recording kept at {KEPT}", below
        elif width >= 100:  # the directory's start and end
            assert below.startswith("Kept at /home/someone/") and "…" in below, below
        else:
            assert below == f"Kept at …/{LONG}", below
        # The path whole: in the status line's tooltip and in `?`.
        assert f"recording kept at {KEPT} " in "\n".join(app.status_whole())
        assert f"recording kept at {KEPT}" in str(app.query_one("#status", MarkupLine).tooltip)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen) and any(KEPT in row for row in app.screen.compose_rows())


def _panel_rows(panel: AlertsPanel) -> list[str]:
    return [panel.render_line(y).text for y in range(panel.scrollable_content_region.height)]


@pytest.mark.parametrize("size", list(SIZES))
async def test_an_alert_cut_ends_with_an_ellipsis_and_the_cursors_alert_is_shown_whole(size: str) -> None:
    # The prefix-caching demo: the Anthropic demo's alerts and three whose rule (cache_miss_unexplained)
    # and message (73 characters) are longer than their columns at every width. (Since the demo was
    # re-recorded, no alert of the Anthropic demo is cut at 200 columns: its longest message is 60
    # characters, the column 62.)
    width, height = SIZES[size]
    recorded = [(str(alert["rule"]), str(alert["message"]))
                for trace in FileSource(OPENAI).load_initial() for alert in trace.get("alerts") or []]
    app = InspectorApp(FileSource(OPENAI))
    async with app.run_test(size=(width, height)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        panel = app.query_one("#alerts", AlertsPanel)
        panel.focus()
        await settle(pilot)
        alerts = [(rule, message) for _, _, _, rule, message in panel._rows]
        assert alerts == recorded and len(alerts) == 11
        cut = 0
        for row, (rule, message) in enumerate(alerts):
            panel.move_cursor(row=row)
            await pilot.pause()
            lines = _panel_rows(panel)
            room = panel.scrollable_content_region.width - FIXED  # the message's column (less a scrollbar's)
            shown = next(line for line in lines[1:] if line.startswith(f"{panel._rows[row][1]:<6}")
                         and rule[:10] in line and message[:10] in line).rstrip()
            rule_cell, message_cell = shown[15:FIXED].rstrip(), shown[FIXED:]
            rule_cut, message_cut = cell_len(rule) >= 15, cell_len(message) > room
            if rule_cut:  # the cut is said, in the rule's column too
                assert rule_cell.endswith("…") and rule.startswith(rule_cell[:-1]), shown
            else:
                assert rule_cell == rule, shown
            if message_cut:
                assert message_cell.endswith("…") and cell_len(message_cell) == room, shown
                assert message.startswith(message_cell[:-1]), shown
            else:
                assert message_cell == message, shown
            if not (rule_cut or message_cut):
                assert not panel.detail_lines(), (row, lines)
                continue
            cut += 1
            detail = panel.detail_lines()
            assert detail and lines[-len(detail):] == [d.ljust(panel.scrollable_content_region.width) for d in detail]
            assert " ".join(detail) == f"▸ {rule}: {message}", detail  # the whole alert (wrapped at spaces)
        # Every width cuts some: the three long ones at 200 columns, all eleven at 120 (a 14-cell message
        # column), all but the two shortest messages at 80.
        assert cut == {"80x24": 9, "120x40": 11, "200x60": 3}[size], cut


@pytest.mark.parametrize("size", list(SIZES))
def test_cut_lines_snapshot(snap_compare, tmp_path: Path, size: str) -> None:
    """The demo under a long name, its Alerts tab focused on an alert too long for the panel at 80 and 120
    columns: the status line and the alert rows end their cuts with "…", the alert is shown whole under the
    list. At 200 columns (since the demo was re-recorded) the name and the alert fit: nothing cut, no
    detail under the list."""
    path = tmp_path / LONG
    shutil.copy(DEMO, path)
    app = InspectorApp(FileSource(path), theme="cp-dark")

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("a")
        panel = pilot.app.query_one("#alerts", AlertsPanel)
        panel.focus()
        panel.move_cursor(row=4)  # turn 20: "cache broke at emergent: section emergent content changed"
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)


async def test_the_alerts_cursor_stays_in_view_when_focus_draws_the_border() -> None:
    """At 80x24 the Alerts panel has 6 rows, 4 once focused (its border): a cursor moved to the fifth
    alert before Tab (or a click) went under the border, out of view, as the panel drew no Resize."""
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        panel = app.query_one("#alerts", AlertsPanel)
        panel.move_cursor(row=4)
        await settle(pilot)
        panel.focus()
        await settle(pilot)
        assert any(line.startswith("20    warning  cache_break") for line in _panel_rows(panel)), _panel_rows(panel)


async def test_a_saved_path_in_the_banner_at_80_columns_keeps_its_end() -> None:
    """At 80 columns the banner has ~13 cells left for the path `s` saved to: it was cut at the edge
    ("saved to /tmp/tui26/saved-d"), then, shortened to 16 cells it did not have, cut again at the edge
    ("/tmp/tu…psessio…"). Then shortened to the room there is, its end kept; now it is whole, on the line
    under the status line (the path the banner would have cut)."""
    app = InspectorApp(SyntheticSource(30, live=True, initial=20, delay=0.01))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.disconnected is not None
        app.saved_turns = 30
        app.saved_to = "/tmp/tui26/saved-demo.cpsession"
        await settle(pilot)
        drawn = _drawn(app)
        assert cell_len(drawn) <= 78, drawn
        assert "saved to" not in drawn and "Agent disconnected" in drawn, drawn
        below = app.query_one("#status-where", MarkupLine).render_line(0).text.rstrip()
        assert below == "Saved to /tmp/tui26/saved-demo.cpsession", below
        assert "saved to /tmp/tui26/saved-demo.cpsession" in "\n".join(app.status_whole())


async def test_hovering_the_status_line_shows_it_whole(tmp_path: Path) -> None:
    """Through Textual's own tooltip (the line's tooltip is made when the mouse rests on it)."""
    from textual.widgets._tooltip import Tooltip

    path = tmp_path / LONG
    shutil.copy(DEMO, path)
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=(80, 24), tooltips=True) as pilot:
        await settle(pilot)
        await pilot.hover("#status", offset=(10, 0))
        await pilot.pause(1.0)  # Textual shows a tooltip after the mouse rests ~0.5 s
        tip = app.screen.get_child_by_type(Tooltip)
        shown = str(tip.render())
        assert tip.display and f"REPLAY {LONG}  turn 39 (40/40)" in shown and f"file: {path}" in shown, shown


@pytest.mark.parametrize("size", list(SIZES))
async def test_the_cache_layouts_left_out_row_says_why_within_the_panel(tmp_path: Path, size: str) -> None:
    # Turn 4 of `cp-inspect demo` places 1 marker and leaves 4 prefixes out, each named with its place: at
    # 120 columns the row was cut inside those places ("(end of tools at 224, global scope") with no sign.
    width, height = SIZES[size]
    rec = tmp_path / "demo.cpsession"
    subprocess.run([sys.executable, "-m", "inspector.demo_agent", "--turns", "6", "--delay", "0", "--record", str(rec)],
                   check=True, capture_output=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    app = InspectorApp(FileSource(rec), start_turn=4)
    async with app.run_test(size=(width, height)) as pilot:
        await settle(pilot)
        panel = app.query_one("#cache")
        room = panel.scrollable_content_region.width
        rows = [panel.render_line(y).text.rstrip() for y in range(panel.scrollable_content_region.height)]
        why = [row for row in rows if "left out:" in row]
        if width < 100:  # the narrow layout's two rows: the strip and its cache line
            assert not why, rows
            return
        assert why, rows
        row = why[0].strip()
        assert cell_len(row) <= room, row
        assert row.startswith("▲ left out: 4 prefixes under the model's 1024-token minimum cacheable prefix"), row
        # The places in full where they fit (200 columns), else left out whole, never cut inside them.
        assert row.endswith(")") if width >= 200 else row.endswith("minimum cacheable prefix"), row


@pytest.mark.parametrize("size", list(SIZES))
async def test_the_tier_panel_says_which_tier_each_pressure_asks_for_and_recovery(size: str) -> None:
    # At 80x24 (a 40-column panel) the row read "raw TrimSchemas · pred TrimSchemas ·": cut at the edge,
    # with no sign, before "recovery no".
    width, height = SIZES[size]
    app = InspectorApp(FileSource(DEMO), start_turn=39)  # TrimSchemas, raw and predictive alike
    async with app.run_test(size=(width, height)) as pilot:
        await settle(pilot)
        panel = app.query_one("#tier")
        room = panel.scrollable_content_region.width
        rows = [panel.render_line(y).text.rstrip() for y in range(panel.scrollable_content_region.height)]
        assert all(cell_len(r) <= room for r in rows), rows
        tiers = [r.strip() for r in rows if "recovery" in r]
        full = "raw TrimSchemas · pred TrimSchemas · recovery no"
        # (At 120x40 the long row wrapped: "recovery no" alone on a row, the planned/sent row pushed out.)
        assert tiers == [full if len(full) <= room else "raw, pred TrimSchemas · recovery no"], rows
        assert any(r.startswith("planned ") for r in rows) or width < 100, rows  # (3 rows at 80x24)
