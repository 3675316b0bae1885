"""A live session attached before its first turn: `cp-inspect run` opens the inspector as soon as the
agent's first call reaches the proxy, before its answer, so the source's first answer holds no turns.
The app then took the empty timeline's position (0) as the turn shown, and when turn 0 came the index
did not change: the status line and the timeline said "turn 0 (1/1)" and every panel said "waiting for
the first turn…" until the agent's second call (an agent that made one call, or was stopped after it,
never showed anything)."""

from __future__ import annotations

import asyncio
import threading
import time

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.manifest import ManifestPanel
from panels.pressure import PressurePanel


async def test_the_first_turn_of_a_session_attached_before_it_is_drawn() -> None:
    go = threading.Event()
    src = SyntheticSource(1, live=True, initial=0, hold=go, disconnect=False)
    app = InspectorApp(src)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)  # the empty first answer is in: nothing to show yet
        assert len(app.timeline) == 0 and app.query_one(PressurePanel).trace is None
        go.set()  # the agent's first call is answered
        deadline = time.monotonic() + 30
        while len(app.timeline) < 1:
            assert time.monotonic() < deadline, "turn 0 never arrived"
            await asyncio.sleep(0.05)
        await pilot.pause()
        await pilot.pause()
        assert app.index == 0
        assert app.query_one(PressurePanel).trace is not None  # it said "waiting for the first turn…"
        assert app.query_one(ManifestPanel).row_count > 0
