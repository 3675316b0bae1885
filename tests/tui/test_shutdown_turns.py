"""Turns a live source posts while the app shuts down are dropped, whichever panel is pruned first.

Seen under load (the TUI tests pinned to one core beside two CPU hogs): test_status_model_fit ended with
`NoMatches: No nodes match '#alerts'` raised in InspectorApp._turns_received. Shutdown (Pilot's exit, as
App.exit's) marks the app not running and prunes the screen's widgets (a set: in no fixed order) while the
app's message loop still dispatches what the reader thread posted; the handler's guard asked only
whether the content viewer was still attached, and the Alerts panel had gone first."""

from __future__ import annotations

import asyncio
import threading
from contextlib import suppress

from inspector.app import InspectorApp
from inspector.messages import TurnsReceived
from inspector.sources.synthetic import SyntheticSource


async def test_turns_posted_while_the_app_shuts_down_are_dropped() -> None:
    held = threading.Event()  # the agent's later turns never come on their own
    source = SyntheticSource(12, live=True, initial=6, disconnect=False, hold=held)
    app = InspectorApp(source)
    shown: list[int] = []
    real_close_all = app._close_all

    async def close_all() -> None:
        # As shutdown's pruning may have it: the Alerts panel gone, the viewer still attached, and a
        # chunk of turns from the reader dispatched by the app's loop meanwhile.
        await app.query_one("#alerts").remove()
        dispatched = asyncio.Event()
        app.post_message(TurnsReceived([source.trace(t) for t in range(6, 9)], more=False))
        app.call_next(dispatched.set)  # after the turns' message, in the app's queue
        with suppress(TimeoutError):
            await asyncio.wait_for(dispatched.wait(), 10)
        shown.append(len(app.timeline))
        await real_close_all()

    app._close_all = close_all  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        # (not settle(): it waits for the source's worker, which a held live source never ends)
        for _ in range(400):
            if len(app.timeline) == 6 and app.query_one("#alerts").is_attached:
                break
            await pilot.pause(0.05)
        assert len(app.timeline) == 6
    # (run_test raises the app's exception here: NoMatches from the handler before the fix)
    assert shown == [6]  # the turns that came during shutdown were dropped, not half taken
