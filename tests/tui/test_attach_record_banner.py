"""`cp-inspect attach PID --record FILE` over an agent that records nothing itself: once the agent had
ended, the banner and the toast said "press s to save", over a session `--record` writes to FILE when
the inspector is left; a person saved it twice, or did not know it was kept. They say where it goes."""

from __future__ import annotations

from inspector.app import InspectorApp
from inspector.messages import SourceDisconnected
from inspector.sources.synthetic import SyntheticSource
from inspector.status import EXITED
from panels.markup_line import MarkupLine
from tests.tui.conftest import settle


async def _ended(save_on_quit: str | None) -> tuple[str, list[str]]:
    src = SyntheticSource(12, live=True, initial=12, delay=0.01, disconnect=False)
    app = InspectorApp(src)
    app.save_on_quit = save_on_quit
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await settle(pilot)
        app.post_message(SourceDisconnected(EXITED))
        await settle(pilot)
        return app.query_one("#status", MarkupLine).render_line(0).text, [
            n.message for n in app._notifications
        ]


async def test_attach_record_says_where_the_session_is_written_when_the_agent_has_ended() -> None:
    status, told = await _ended("/tmp/rec/live.cpsession")
    assert "Agent exited — 12 turns kept; written to /tmp/rec/live.cpsession when you quit" in status, status
    assert "press s" not in status, status
    assert told == [
        "The agent's process has ended. 12 turns kept; they are written to /tmp/rec/live.cpsession "
        "when you quit."
    ], told


async def test_a_plain_attach_still_says_press_s() -> None:
    status, told = await _ended(None)
    assert "Agent exited — 12 turns kept; press s to save" in status, status
    assert told == ["The agent's process has ended. 12 turns kept; press s to save them."], told
