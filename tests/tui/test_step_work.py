"""What one step does on the UI thread, counted: work a step repeated for nothing is not done twice."""

from __future__ import annotations

import pytest

import inspector.app as app_module
from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.markup_line import MarkupLine
from tests.tui.conftest import settle


async def test_a_step_builds_the_status_line_once(replay_source: SyntheticSource,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: watch_index built the status parts and _go built them again to find them unchanged.
    built: list[int] = []
    original = app_module.status_parts

    def counted(*args: object, **kwargs: object) -> object:
        built.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    app = InspectorApp(replay_source, start_turn=10)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        monkeypatch.setattr(app_module, "status_parts", counted)
        status = app.query_one("#status", MarkupLine)
        for key, turn in [("right", 11), ("left", 10), ("end", 39), ("home", 0)]:
            built.clear()
            await pilot.press(key)
            await pilot.pause()
            assert len(built) == 1, (key, len(built))
            assert f"turn {turn} " in str(status.render())
        built.clear()
        await pilot.press("left")  # already at the first turn: no step, and the status line is still current
        await pilot.pause()
        assert app.index == 0 and len(built) == 1
