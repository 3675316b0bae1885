"""The app attached to a long session while its history arrives: the status line says how far it has come,
and once it is in, the timeline holds the session's own turns (numbers that skip included) and the strip
draws them. Before, nothing said that the empty turns drawn before the newest were on their way (at
20,000 turns, minutes at the agent's CPU budget), and the strip kept drawing them empty until another
turn came."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from engine.probe.server import ProbeServer
from tests.support.probe_agent import T
from tests.test_attach_history import CUT, TURNS, _journal


class _Held(list):  # type: ignore[type-arg]
    """The agent's journal, whose events before `upto` the probe cannot read until `go` is set (the
    history held back, as a busy agent's budget holds it)."""

    def __init__(self, events: list[dict[str, Any]], upto: int) -> None:
        super().__init__(events)
        self.upto = upto
        self.go = threading.Event()
        self.hold = False

    def __getitem__(self, i: Any) -> Any:
        if self.hold and isinstance(i, int) and i < self.upto:
            self.go.wait(T)
        return super().__getitem__(i)


async def test_the_status_line_says_how_far_the_history_has_come(monkeypatch: pytest.MonkeyPatch) -> None:
    from inspector.app import InspectorApp
    from inspector.sources.live import LiveSource
    from panels.timeline_strip import TimelineStrip

    base = Path(tempfile.mkdtemp(prefix="cph-", dir="/tmp"))
    number = lambda t: t if t < CUT else t + 37  # noqa: E731  (37 turns lost between 99 and 137)
    events = _journal(monkeypatch, base, number)
    log = _Held(events, len(events) - 1)
    xdg = base / "xdg"
    xdg.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    server = ProbeServer({"model": "m", "provider": "anthropic"}, lambda: log, pid=os.getpid())
    server.start()
    try:
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None)
        log.hold = True  # the hello and the tail are in: the history waits
        app = InspectorApp(src)
        async with app.run_test(size=(120, 40)) as pilot:
            status = ""
            for _ in range(200):
                await pilot.pause(0.02)
                status = str(app.query_one("#status").render())
                if "history" in status:
                    break
            assert f"history 0/{TURNS - 1}" in status, status
            assert len(app.timeline) == TURNS and app.timeline.traces[-1]["turn"] == number(TURNS - 1)
            log.go.set()
            for _ in range(400):
                await pilot.pause(0.02)
                status = str(app.query_one("#status").render())
                if "history" not in status:
                    break
            assert "history" not in status, status
            assert [t["turn"] for t in app.timeline.traces] == [number(t) for t in range(TURNS)]
            strip = app.query_one("#strip", TimelineStrip)
            fresh = TimelineStrip()
            fresh.traces = list(app.timeline.traces)
            fresh.set_reactive(TimelineStrip.count, len(fresh.traces))
            fresh.set_reactive(TimelineStrip.current, strip.current)
            width = strip.size.width
            assert [c.plain for c in strip.lines(width)] == [c.plain for c in fresh.lines(width)], (
                "drawn filled"
            )
        src.client.close()
    finally:
        log.go.set()
        server.close()
        shutil.rmtree(base, ignore_errors=True)
