"""What the status line and the keys tell a person new to the inspector (ux27's pass): a live view
following the newest turn is not shown paused; at 120 columns a disconnected agent's banner gives way
before the turn and the play state; `s` in a replay says why it does nothing; `?` lists each key once."""

from __future__ import annotations

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.markup_line import MarkupLine
from tests.tui.conftest import settle


def _drawn(app: InspectorApp) -> str:
    return app.query_one("#status", MarkupLine).render_line(0).text.rstrip()


async def test_a_live_view_following_the_newest_turn_is_not_shown_paused() -> None:
    app = InspectorApp(SyntheticSource(30, live=True, initial=20, delay=0.01, disconnect=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.disconnected is None and app.timeline.follow
        drawn = _drawn(app)
        # It said "⏸ 1×  following newest": a pause sign on a view that moves with every turn.
        assert "following newest" in drawn and "⏸" not in drawn, drawn
        await pilot.press("left")
        await settle(pilot)
        drawn = _drawn(app)
        assert "⏸ 1×" in drawn and "stepped back (End to follow)" in drawn, drawn  # now it is paused
        await pilot.press("end")
        await settle(pilot)
        assert "following newest" in _drawn(app) and "⏸" not in _drawn(app), _drawn(app)
