"""`cp-inspect top` run headless (Textual's Pilot) with no agent to watch: a runtime directory that does
not exist, so the table stays empty."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from engine.probe.watch import FleetWatcher
from inspector.top_app import TopApp


@asynccontextmanager
async def empty_top(tmp_path: Path, size: tuple[int, int] = (120, 40)) -> AsyncIterator[tuple[TopApp, Any]]:
    """The app and its pilot, after the app's first frame."""
    app = TopApp(FleetWatcher(tmp_path / "none"), refresh_s=0.2)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        yield app, pilot


async def press(pilot: Any, key: str) -> None:
    """Press `key` and let the app handle it."""
    await pilot.press(key)
    await pilot.pause()
