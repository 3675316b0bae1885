"""The session's shadow summary, worked out again as live turns arrive, runs one at a time.

Each batch of live turns asks for it again (it reads every event of the session). The runner started a
new thread worker each time, in an exclusive group: the older run, cancelled, still ran to its end (a
thread worker cannot be stopped), so at 50,000 turns five or more runs over the whole session waited on
the source's lock at once, taking the CPU the history's fill and the live turns needed. Now a request
that comes while one runs is kept, and run once after it, on the newest events.
"""

from __future__ import annotations

import threading
import time

import pytest

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from tests.tui.conftest import settle


async def test_shadow_summaries_run_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    running, most, calls = [0], [0], []
    lock = threading.Lock()
    slow = SyntheticSource.shadow_summary

    def shadow_summary(src: SyntheticSource) -> dict | None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            calls.append(time.monotonic())
            time.sleep(0.15)  # a long session's summary: every event read
            return slow(src)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(SyntheticSource, "shadow_summary", shadow_summary)
    app = InspectorApp(SyntheticSource(30, live=True, initial=10, delay=0.05, disconnect=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for _ in range(200):
            if len(app.timeline) == 30 and running[0] == 0:
                break
            await pilot.pause(0.05)
        assert len(app.timeline) == 30
        await pilot.pause(0.5)
        assert running[0] == 0
        assert most[0] == 1, f"{most[0]} shadow summaries ran at once"
        assert calls, "the summary was asked for"
