"""Live turns that arrive back to back are drawn once at the newest, not one frame per turn: otherwise a
fast agent's turns queue up behind a frame each and the live view falls behind the agent."""

from __future__ import annotations

import pytest

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from tests.tui.conftest import settle


async def test_a_burst_of_live_turns_is_drawn_once_at_the_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[int] = []
    watch = InspectorApp.watch_index

    def counting(app: InspectorApp, index: int) -> None:
        drawn.append(index)
        watch(app, index)

    monkeypatch.setattr(InspectorApp, "watch_index", counting)
    app = InspectorApp(SyntheticSource(60, live=True, initial=10, disconnect=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for _ in range(100):
            if len(app.timeline) == 60 and app.index == 59:
                break
            await pilot.pause(0.05)
        assert len(app.timeline) == 60 and app.index == 59  # every turn is in, the newest is shown
        live_draws = [i for i in drawn if i >= 10]
        assert live_draws and live_draws[-1] == 59
        assert len(live_draws) <= 25, f"50 back-to-back turns drew {len(live_draws)} frames: {live_draws}"
