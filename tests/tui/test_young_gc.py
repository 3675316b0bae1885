"""While the app shows a session the collector's generation-0 threshold is raised (a step's thousands of
short-lived objects no longer set off a collection or two each step), and it is put back on unmount."""

from __future__ import annotations

import gc

from inspector import young_gc
from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from tests.tui.conftest import settle


async def test_the_threshold_is_raised_while_stepping_and_restored_after() -> None:
    before = gc.get_threshold()
    app = InspectorApp(SyntheticSource(10))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("right")
        await pilot.pause()
        assert gc.get_threshold()[0] >= young_gc.YOUNG and gc.get_threshold()[1:] == before[1:]
    assert gc.get_threshold() == before


def test_a_collector_set_to_never_run_is_left_alone() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(0, *before[1:])
        young_gc.raise_threshold()
        assert gc.get_threshold()[0] == 0
        young_gc.restore()
    finally:
        gc.set_threshold(*before)
