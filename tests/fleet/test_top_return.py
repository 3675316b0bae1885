"""`top`, Enter, the inspector, `q`: back to the table as it was left. `top` shows a new table after each
attach; the sort column, its order and the filter went back to the defaults (cost, highest first, none)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from engine.probe.watch import FleetWatcher
from inspector.top_app import TopApp, TopView
from panels.fleet_table import FleetTable


async def test_the_sort_and_filter_set_before_an_attach_are_there_after_it(tmp_path: Path) -> None:
    watcher = FleetWatcher(tmp_path / "none")
    view = TopView()  # what `cp-inspect top` keeps across its tables
    first = TopApp(watcher, refresh_s=0.2, view=view)
    async with first.run_test(size=(140, 30)) as pilot:
        await pilot.pause()
        await pilot.press("s", "r", "slash", "4", "2", "enter")
        await pilot.pause()
        table = first.query_one(FleetTable)
        left = (table.sort_key, table.reverse, table.filter)
        assert left != ("cost", True, "") and table.filter == "42"
        await pilot.press("q")
    again = TopApp(watcher, refresh_s=0.2, view=view)  # the table shown when the inspector returns
    async with again.run_test(size=(140, 30)) as pilot:
        await pilot.pause()
        table = again.query_one(FleetTable)
        assert (table.sort_key, table.reverse, table.filter) == left
        assert again.query_one("#filter", Input).value == "42"
        assert again.focused is table  # keys go to the table, as before the attach
        await pilot.press("q")
