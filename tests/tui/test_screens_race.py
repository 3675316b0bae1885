"""Messages that arrive while another screen is on top (issue 15.8): content, turns and re-plans are
for the main screen's panels, which are not the active screen's; handling them must not crash."""

from __future__ import annotations

import threading

from inspector.app import InspectorApp
from inspector.screens import HelpScreen
from inspector.sources.synthetic import SyntheticSource
from panels.content_viewer import ContentViewer
from panels.markup_line import MarkupLine
from tests.tui.conftest import settle


class GatedContent(SyntheticSource):
    """A synthetic source whose section content is held until the test releases it, so the test
    decides when the content-loaded message arrives (the race, made deterministic)."""

    def __init__(self, n_turns: int) -> None:
        super().__init__(n_turns)
        self.asked = threading.Event()
        self.release = threading.Event()

    def section_content(self, turn: int, section_id: str) -> str:
        self.asked.set()
        self.release.wait(timeout=60)
        return f"content of {section_id} at turn {turn}"


async def test_content_arriving_under_the_help_screen_lands_in_the_viewer() -> None:
    source = GatedContent(20)
    source.release.set()  # let the initial load's content through
    app = InspectorApp(source)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        source.release.clear()
        source.asked.clear()
        await pilot.press("left")  # request content for the new turn ...
        for _ in range(600):
            if source.asked.is_set():
                break
            await pilot.pause(0.05)
        assert source.asked.is_set(), "the step never asked the source for content"
        await pilot.press("question_mark")  # ... and open another screen before it arrives
        assert isinstance(app.screen, HelpScreen)
        source.release.set()
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)  # still open, and the app did not crash
        viewer = app.default_screen.query_one("#content", ContentViewer)
        title = str(viewer.query_one("#content-title", MarkupLine).render())
        assert f"turn {app.timeline.traces[app.index]['turn']}" in title
        await pilot.press("escape")
        await settle(pilot)
        assert app.return_code is None  # still running: no exception ended it


async def test_content_arriving_while_the_app_closes_is_dropped() -> None:
    source = GatedContent(20)
    source.release.set()
    app = InspectorApp(source)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        source.release.clear()
        source.asked.clear()
        await pilot.press("left")
        for _ in range(600):
            if source.asked.is_set():
                break
            await pilot.pause(0.05)
        assert source.asked.is_set()
        threading.Timer(0.01, source.release.set).start()  # the content arrives as the app shuts down
        app.exit()
    assert app.return_code == 0
