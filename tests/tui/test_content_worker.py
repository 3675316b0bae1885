"""The content worker's text reaches the screen, or the person is told why not.

pydicom-1413's history holds an issue pasted with CRLF line ends. Rich's Text drops carriage returns
(and backspace, bell, vertical tab, form feed), so a highlighted line came out shorter than the row
cut from it, slicing the row raised in the worker, and the view silently kept the previous turn (the
step benchmark then waited for the new turn forever)."""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.style import Style

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.content_viewer import ContentBody, ContentViewer, render_row
from panels.highlight import highlight
from panels.text_document import prepare, row_text
from tests.tui.conftest import settle

CRLF = "Consider the following PR description:\r\nHello,\r\n\r\nI am getting \bthis\x07 error\x0b\x0c\r\n" + (
    "x = 'a long line that wraps at forty columns, with a\rcarriage return inside'\r\n" * 3)


def test_control_codes_are_dropped_as_rich_drops_them_and_every_row_renders() -> None:
    for language_text in (CRLF, "def f():\r\n    return 1\r\n"):
        doc = prepare(language_text, dark=True, width=40)
        console = Console(width=40, color_system="truecolor")
        full = highlight(language_text, doc.language, True)
        full.expand_tabs(8)
        reference = full.split("\n", allow_blank=True)
        for i, (line_no, start, end) in enumerate(doc.rows):
            _, _, text = row_text(doc, i)
            assert text.plain == doc.plain[line_no][start:end]
            assert "\r" not in text.plain and "\b" not in text.plain
            render_row(doc, i, 40, Style(), console)  # raised IndexError on "Hello,\r"
        # Lines ending in CRLF draw as a full highlight of the text draws them (pygments reads a lone
        # carriage return mid-line as a line break, rich then drops it: no reference for those).
        for i in range(len(doc.plain) if language_text.startswith("def") else 4):
            got = list(Segment.simplify(doc.line(i).render(console)))
            assert got == list(Segment.simplify(reference[i].render(console))), i
    assert prepare(CRLF, True, 40).plain[1] == "Hello,"


class CrlfHistory(SyntheticSource):
    def section_content(self, turn: int, section_id: str) -> str:
        return f"turn {turn}\r\n{CRLF}"


async def test_a_step_shows_the_new_turn_of_a_crlf_text() -> None:
    app = InspectorApp(CrlfHistory(20))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        viewer = app.query_one("#content", ContentViewer)
        for key, turn in (("left", 18), ("left", 17), ("right", 18)):
            await pilot.press(key)
            await settle(pilot)
            assert f"turn {turn} " in viewer.title + " "
            body = viewer.query_one(ContentBody)
            shown = [body.render_line(y).text.rstrip() for y in range(3)]
            assert shown == [f"turn {turn}", "Consider the following PR description:", "Hello,"]
            assert not app._notifications


class FailingContent(SyntheticSource):
    def section_content(self, turn: int, section_id: str) -> str:
        if turn in (17, 15):
            raise ValueError(f"turn {turn} cannot be folded")
        return super().section_content(turn, section_id)


async def test_a_failing_content_worker_is_said_on_screen_once() -> None:
    app = InspectorApp(FailingContent(20))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("left")  # turn 18: fine
        await settle(pilot)
        assert not app._notifications
        await pilot.press("left")  # turn 17 fails
        await settle(pilot)
        messages = [str(n.message) for n in app._notifications]
        assert messages == ["ValueError: turn 17 cannot be folded"]
        await pilot.press("left")  # turn 16 works again; then 15 fails: said again (a new failure)
        await settle(pilot)
        await pilot.press("left")
        await settle(pilot)
        assert [str(n.message) for n in app._notifications][-1] == "ValueError: turn 15 cannot be folded"
        assert len(app._notifications) == 2
