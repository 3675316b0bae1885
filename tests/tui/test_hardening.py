"""Issue 10 items 9, 16, 17, 18 on real engine recordings (demo_sessions/): a damaged file's error and a
recovered tail are shown in the TUI; stepping keys always step; help shows keys as typed; alerts take one
key; essential state is not cut at 80x24 and 120x40; a disconnected agent says where its session is kept."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from textual.widgets import Label, Static, TabbedContent

from engine.recording.cpsession import RecordingReader
from inspector.app import InspectorApp
from inspector.screens import HelpScreen
from inspector.sources.file import FileSource
from inspector.sources.synthetic import SyntheticSource
from panels.markup_line import MarkupLine
from panels.slider import Slider
from panels.whatif import WhatIfPanel
from panels.whatif_session import PEER_ORDER
from tests.tui.conftest import settle

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
SIZES = [(80, 24), (120, 40)]


def status_text(app: InspectorApp) -> str:
    return str(app.query_one("#status", MarkupLine).render())


def where_text(app: InspectorApp) -> str:
    """The line under the status line that says where an ended agent's session is ("" when not shown)."""
    where = app.query_one("#status-where", MarkupLine)
    return str(where.render()) if where.display else ""


def screen_text(app: InspectorApp) -> str:
    """What is on screen, as plain text lines (the compositor's render of every visible widget)."""
    return "\n".join(line.text for line in app.screen._compositor.render_update(full=True).strips)  # type: ignore[union-attr]


def _damaged_at_turn_20(tmp_path: Path) -> tuple[Path, int]:
    """A copy of the demo recording with a flipped byte in turn 20's frame (the footer and its index
    intact, the turn not), and that frame's offset."""
    p = tmp_path / "damaged.cpsession"
    shutil.copy(DEMO, p)
    with RecordingReader.open(p) as r:
        bad = r._turn_offs[20]
    data = bytearray(p.read_bytes())
    data[bad + 30] ^= 0xFF
    p.write_bytes(bytes(data))
    return p, bad


async def test_a_damaged_recording_shows_its_error_in_the_tui(tmp_path: Path) -> None:
    p, bad = _damaged_at_turn_20(tmp_path)
    app = InspectorApp(FileSource(p))
    async with app.run_test(size=(120, 40)) as pilot:
        # Until the app says its source failed, and the screen after that: settle() would wait its
        # whole 10 s for a start-up that a failed source never finishes.
        give_up = time.monotonic() + 60  # (only reached when the failure is never said)
        while app.failed is None and time.monotonic() < give_up:
            await pilot.pause(0.02)
        await app.screen.wait_for_refresh()
        await app.screen.wait_for_refresh()
        await pilot.pause()
        assert app.failed is not None and f"offset {bad}" in app.failed
        text = status_text(app)
        assert "cannot read it" in text and f"offset {bad}" in text
        assert "loading" not in text  # no silent wait for a turn that will never come


@pytest.mark.parametrize("start", [None, 5])
async def test_a_recording_damaged_part_way_shows_the_turns_before_the_damage(tmp_path: Path,
                                                                             start: int | None) -> None:
    """A corrupt frame at turn 20 of 40 (the index at the end intact): the first chunk of turns (50)
    held it, and was lost whole: the screen said "waiting for the first turn…" and "no turns yet"
    though turns 0..19 read (explain and salvage read them). Now they are shown, and the error with
    them, opened at the last turn (the last readable one) or at --turn 5."""
    p, bad = _damaged_at_turn_20(tmp_path)
    app = InspectorApp(FileSource(p), start_turn=start)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.failed is not None and f"offset {bad}" in app.failed
        assert len(app.timeline) == 20
        assert app.timeline.traces[app.index]["turn"] == (19 if start is None else start)
        await pilot.press("home")
        await settle(pilot)
        assert app.index == 0 and app.timeline.traces[0]["turn"] == 0


def test_a_turn_before_the_damage_shows_its_content_and_re_plans(tmp_path: Path) -> None:
    """The same damage: the read-ahead past a turn before it (64 turns) met the corrupt frame, and the
    turn's content, request body, why-miss and what-if failed with it ("cannot show this content:
    corrupt frame"). A turn before the damage is read as from the intact file, in any order; a turn
    past it still says what is wrong."""
    from engine.recording.cpsession import RecordingError
    from engine.whatif import Overrides

    p, bad = _damaged_at_turn_20(tmp_path)
    damaged, intact = FileSource(p), FileSource(DEMO)
    try:
        for turn in (1, 19, 4, 0, 12):
            assert damaged.request_body(turn) == intact.request_body(turn), turn
            assert damaged.why_missed(turn) == intact.why_missed(turn), turn
        replan = Overrides(window=20_000)
        assert damaged.replan(7, replan) == intact.replan(7, replan)
        with pytest.raises(RecordingError, match=f"offset {bad}"):
            damaged.request_body(25)
        assert damaged.request_body(3) == intact.request_body(3)  # and still after that
    finally:
        damaged.close()
        intact.close()


async def test_a_recovered_tail_is_visible_in_the_tui(tmp_path: Path) -> None:
    p = tmp_path / "killed.cpsession"
    with RecordingReader.open(DEMO) as r:
        cut = r._turn_offs[30] + 40  # inside turn 30's frame, as if the agent was killed mid-write
    p.write_bytes(DEMO.read_bytes()[:cut])
    app = InspectorApp(FileSource(p))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert len(app.timeline) == 30
        text = status_text(app)
        assert "last frame at offset" in text and "30 complete turns kept" in text
        notes = [n.message for n in app._notifications]
        assert any("30 complete turns kept" in m for m in notes), notes


async def test_stepping_keys_always_step_after_opening_what_if() -> None:
    app = InspectorApp(FileSource(DEMO), start_turn=10)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        budget = app.query_one("#budget", Slider)
        before = budget.value
        await pilot.press("w")
        assert app.query_one("#details", TabbedContent).active == "tab-whatif"
        await pilot.press("end")
        assert app.index == len(app.timeline) - 1  # End went to the last turn...
        await pilot.press("left", "left")
        assert app.index == len(app.timeline) - 3
        await settle(pilot)
        assert (
            budget.value < 20_000 and not budget.touched
        )  # the recorded 10.2k window (slider steps), not 200k
        assert before > 0
        # A slider takes the arrows only when focused, and the footer says so and how to leave.
        budget.focus()
        await pilot.pause()
        shown = {b.binding.key: b.binding.description for b in app.screen.active_bindings.values()}
        assert "Done" in shown.get("escape", "") and shown.get("right") == "More"
        await pilot.press("right")
        assert budget.touched
        await pilot.press("escape")
        here = app.index
        await pilot.press("left")
        assert app.index == here - 1


async def test_help_shows_keys_as_typed_and_alerts_take_one_key() -> None:
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        assert app.query_one("#details", TabbedContent).active == "tab-alerts"
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        md = "\n".join(r for r in app.screen.compose_rows())  # type: ignore[attr-defined]
        for typed in ("`+`", "`=`", "`]`", "`[`", "`?`", "`←`", "`→`", "`-`"):
            assert typed in md, typed
        for spelled in ("equals_sign", "right_square_bracket", "question_mark", "left_square_bracket"):
            assert spelled not in md, spelled


@pytest.mark.parametrize("size", SIZES)
async def test_gates_show_their_state_and_what_if_result_is_visible(size: tuple[int, int]) -> None:
    app = InspectorApp(FileSource(DEMO), start_turn=25)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        whatif = app.query_one("#whatif", WhatIfPanel)
        for label in whatif.query(Label):
            if (label.id or "").startswith("gate-label-"):
                # the state word is the first thing in the label and inside its visible width
                text = str(label.render())
                assert text.split()[0] in ("on", "off") and label.region.width >= len(text.split()[0]) + 1
        app.query_one("#budget", Slider).focus()
        await pilot.press("shift+right")
        await settle(pilot)
        assert whatif.result is not None
        result = app.query_one("#whatif-result", Static)
        visible = whatif.region.intersection(result.region)
        assert visible.height >= 3, (result.region, whatif.region)  # the re-plan's answer is on screen


@pytest.mark.parametrize("size", SIZES)
async def test_status_and_go_to_prompt_are_not_cut(size: tuple[int, int]) -> None:
    app = InspectorApp(FileSource(DEMO), start_turn=25)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert "turn 25" in status_text(app)
        await pilot.press("g")
        await pilot.pause()
        prompt = " ".join(str(w.render()) for w in app.screen.query(Static))
        assert "0" in prompt and "39" in prompt  # the range the prompt asks for is shown whole


async def test_disconnect_says_where_the_session_is_kept(tmp_path: Path) -> None:
    src = SyntheticSource(30, live=True, initial=20)
    src.header["recording"] = "/data/agent-run.cpsession"
    app = InspectorApp(src)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        # At 120 columns the line leaves the agent's pid out for the path and the turn and play state
        # (a longer path goes on the line under it: tests/tui/test_cut_lines.py); whole in the tooltip and `?`.
        assert "recording kept at /data/agent-run.cpsession" in "\n".join(app.status_whole())
        assert "recording kept at /data/agent-run.cpsession   turn 29 (30/30)  ⏸ 1×" in status_text(app)
        assert where_text(app) == ""
        assert "press s" not in status_text(app)
    src2 = SyntheticSource(30, live=True, initial=20)
    app2 = InspectorApp(src2)
    async with app2.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "press s to save" in status_text(app2)
        assert not app2.query_one("#status-where", MarkupLine).display  # no path to name: no such line
        out = tmp_path / "saved.cpsession"
        app2.save_worker(str(out))
        await settle(pilot)
        # The path on the line under the status line, whole when it fits (pytest's tmp path may not: then
        # shortened in the middle, the file's name whole), and whole in the tooltip and the help screen.
        shown = where_text(app2)
        assert shown.startswith(("Saved to /", "Kept at /")) and shown.endswith("/saved.cpsession"), shown
        assert f"saved to {out}" in "\n".join(app2.status_whole())
        assert "press s to save" not in status_text(app2)


@pytest.mark.parametrize("size", SIZES)
async def test_session_wide_table_does_not_wrap(size: tuple[int, int]) -> None:
    app = InspectorApp(FileSource(DEMO), start_turn=25)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("W")
        await settle(pilot)
        whatif = app.query_one("#whatif", WhatIfPanel)
        assert whatif.session_result is not None
        shown = app.query_one("#whatif-result", Static)
        content = shown.render()
        width = shown.content_region.width
        lines = [ln for ln in str(content).splitlines() if ln.strip()]
        assert any("prompt tokens" in ln for ln in lines)
        # The tables and the chart (prose notes below them may wrap like prose)
        heads = (
            "prompt tokens",
            "uncached",
            "cache hit",
            "cost",
            "compactions",
            "cache breaks",
            "what-if",
            "closed",
            "policy",
            *PEER_ORDER,
        )
        table = [ln for ln in lines if ln.lstrip().startswith(heads) and ":" not in ln]
        assert len(table) >= 10, table
        too_wide = [ln for ln in table if len(ln) > width]
        assert not too_wide, (width, too_wide)


async def test_what_if_answer_is_revealed_once_laid_out_even_if_the_refresh_came_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The refresh the panel waits for can run its callbacks before the screen has laid out the new answer
    (a refresh already due runs them ahead of the text's layout): the reveal then measured the old text and
    scrolled to the wrong place, leaving the answer cut at 80x24 (1 run in 4). Forced here: the callback
    runs at once, before any layout; the answer must still end up in view."""
    app = InspectorApp(FileSource(DEMO), start_turn=25)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        whatif = app.query_one("#whatif", WhatIfPanel)
        monkeypatch.setattr(whatif, "call_after_refresh", lambda callback, *a, **k: callback(*a, **k))
        app.query_one("#budget", Slider).focus()
        await pilot.press("shift+right")
        await settle(pilot)
        assert whatif.result is not None
        result = app.query_one("#whatif-result", Static)
        visible = whatif.region.intersection(result.region)
        assert visible.height >= 3, (result.region, whatif.region)


async def test_a_cut_off_recordings_toast_says_how_to_salvage_it(tmp_path: Path) -> None:
    """A recording cut off by a killed writer: its whole turns are shown, and the toast said only
    "recording damaged: last frame ... incomplete ...", not what to do; it now names the salvage command,
    as `cp-inspect verify` does."""
    data = DEMO.read_bytes()
    cut = tmp_path / "cut.cpsession"
    cut.write_bytes(data[: len(data) * 2 // 3])
    app = InspectorApp(FileSource(cut))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        told = [n.message for n in app._notifications]
        said = [m for m in told if m.startswith("recording damaged: last frame at offset")]
        assert len(said) == 1, told
        assert said[0].endswith(f"the turns shown are whole: to keep them as a closed recording that reads "
                                f"without the warning: cp-inspect salvage {cut} -o FIXED.cpsession"), said
