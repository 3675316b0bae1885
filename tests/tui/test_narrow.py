"""Small terminals and long names: the current turn stays on the status line, and a prompt fits the screen
with its whole question (40x12 and 60x20, as a split pane or a phone's ssh client gives)."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.containers import Vertical
from textual.widgets import Label

from inspector.app import InspectorApp
from inspector.screens import GoToTurnScreen, SaveScreen
from inspector.sources import SourceEvent
from inspector.sources.file import FileSource
from inspector.sources.synthetic import SyntheticSource
from panels.markup_line import MarkupLine
from panels.pressure import PressurePanel
from tests.tui.conftest import settle
from tests.tui.test_hardening import DEMO

# The name `cp-inspect import` gives a mini-swe-agent run, as such names are.
LONG = "deepseek_reasoner_dev__marshmallow-code__marshmallow-1343.cpsession"


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
async def test_a_long_file_name_leaves_the_turn_on_the_status_line(tmp_path: Path, size: tuple[int, int]) -> None:
    path = tmp_path / LONG
    shutil.copy(DEMO, path)
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("left")
        await settle(pilot)
        status = app.query_one("#status", MarkupLine).render_line(0).text  # as drawn, cut to the width
        assert "turn 38 (39/40)" in status, status  # was cut off after the name
        # The name cut in the middle (its .cpsession first), as much of it as leaves the model whole: at
        # 80 columns the model was cut instead ("claude-sonnet-…", the provider gone), to keep 32
        # characters of the name. At 60 there is no room for both: the name keeps 12, the model is cut.
        if size[0] == 80:
            assert status.rstrip().endswith("⏸ 1×    claude-sonnet-4 · anthropic"), status
            assert status.startswith("REPLAY deepseek…low-1343  turn 38"), status
        else:
            assert status.startswith("REPLAY deeps…w-1343  turn 38"), status
            assert status.rstrip().endswith("…"), status


@pytest.mark.parametrize("size", [(40, 12), (60, 20)])
@pytest.mark.parametrize("key, screen", [("g", GoToTurnScreen), ("s", SaveScreen)])
async def test_a_prompt_fits_a_small_terminal_with_its_whole_question(
        size: tuple[int, int], key: str, screen: type) -> None:
    app = InspectorApp(SyntheticSource(30, live=True, initial=20, delay=0.01))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await settle(pilot)
        assert isinstance(app.screen, screen)
        box = app.screen.query_one(Vertical).region
        assert box.x >= 0 and box.right <= size[0], box  # the 44 / 64 column box ran off the right edge
        label = app.screen.query_one(Label)
        question = str(label.render())
        assert label.region.width * label.region.height >= len(question), (label.region, question)
        assert label.region.right <= box.right


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_the_pressure_head_stays_one_line_and_the_tier_marks_stay(size: tuple[int, int]) -> None:
    # Turn 35 of the demo sends a compacted history (pressure 0.42, over 10 windows uncompacted: 10.25
    # when this was written, 10.86 since the demo was re-recorded). The head wrapped: at 80 columns
    # "10.25" took the bar's row and the T/C/A marks fell out of the three rows; at 100 the window's
    # size wrapped and pushed the history sparkline out.
    pressure = FileSource(DEMO).full_trace(35)["pressure"]
    raw_history = pressure["raw_history"]
    assert 10 <= raw_history < 100  # a five-character figure, the one that wrapped ("10.25")
    app = InspectorApp(FileSource(DEMO), start_turn=35)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        panel = app.query_one("#pressure", PressurePanel)
        rows = [panel.render_line(y).text for y in range(panel.size.height)]
        assert rows[0].startswith(f"raw {pressure['raw']:.2f}  pred"), rows
        assert f"uncompacted {raw_history:.1f}×" in rows[0], rows  # the recording's figure, to one decimal
        assert "┃" in rows[1] and all(mark in rows[2] for mark in "TCA"), rows
        if size[0] >= 100:
            assert rows[0].rstrip().endswith("…") and rows[4].startswith("history "), rows


@pytest.mark.parametrize("size", [(40, 12), (50, 16)])
async def test_at_40_columns_the_turn_number_stays_on_the_status_line(tmp_path: Path, size: tuple[int, int]) -> None:
    """tui22's leftover: at 40 columns the recording's name (32 cells at most) and the word REPLAY left
    the turn number past the right edge. Less important parts now go first: the model, the name
    shortened, the play state."""
    path = tmp_path / LONG
    shutil.copy(DEMO, path)
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("left")
        await settle(pilot)
        status = app.query_one("#status", MarkupLine).render_line(0).text
        assert "turn 38" in status, status
        assert status.startswith("REPLAY "), status
        await pilot.resize_terminal(100, 30)  # wide again: the whole line, the model whole and the name as
        await settle(pilot)                      # much as leaves room for it (more than 32 cells here)
        status = app.query_one("#status", MarkupLine).render_line(0).text.rstrip()
        assert status.startswith("REPLAY deepseek_reasoner_…__marshmallow-1343  turn 38 (39/40)"), status
        assert status.endswith("claude-sonnet-4 · anthropic"), status


@pytest.mark.parametrize("width", [40, 30, 24])
async def test_a_disconnected_agent_at_40_columns_keeps_the_turn_number_before_its_banner(width: int) -> None:
    app = InspectorApp(SyntheticSource(12, live=True, initial=12, delay=0.01))
    async with app.run_test(size=(width, 12)) as pilot:
        await settle(pilot)
        app.disconnected = "gone"
        app.update_status()
        await settle(pilot)
        status = app.query_one("#status", MarkupLine).render_line(0).text
        assert "turn " in status and any(ch.isdigit() for ch in status.split("turn ", 1)[1][:3]), status


class _HeldLiveSource(SyntheticSource):
    """A live synthetic agent whose turns after the initial ones wait until the test lets them go (a
    loaded machine took longer to open the prompt than the agent took to send all its turns)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.go = threading.Event()

    def follow(self) -> Iterator[SourceEvent]:
        self.go.wait(30)
        yield from super().follow()


@pytest.mark.parametrize("disconnect", [False, True])
async def test_the_save_prompt_counts_the_turns_that_arrive_while_it_is_open(disconnect: bool) -> None:
    """tui22's leftover: attached to a live agent, the prompt kept the count it opened with ("5 so far")
    while turns went on arriving behind it (the save takes what was received by Enter). The count follows
    them now, and says it is final once the agent is gone."""
    source = _HeldLiveSource(30, live=True, initial=5, delay=0.05, disconnect=disconnect)
    app = InspectorApp(source)
    async with app.run_test(size=(80, 24)) as pilot:
        while len(app.timeline) < 5:  # not settle(): it waits for the live turns to end
            await pilot.pause(0.02)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, SaveScreen)
        first = str(app.screen.query_one(Label).render())
        source.go.set()  # the agent's later turns arrive with the prompt open
        for _ in range(200):
            if len(app.timeline) == 30 and (app.disconnected is not None) == disconnect:
                break
            await pilot.pause(0.05)
        await pilot.pause()
        question = str(app.screen.query_one(Label).render())
        want = ("Save 30 received turns to this file" if disconnect
                else "Save every turn received until you press Enter (30 so far) to this file")
        assert len(app.timeline) == 30 and question.startswith(want), (first, question)
        assert "30" not in first, first
