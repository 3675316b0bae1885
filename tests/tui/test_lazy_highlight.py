"""The content view highlights lazily (issue 15.1): the content worker only splits and wraps a text,
pygments runs for the rows that are drawn, and a row far down comes out as a full highlight of the
whole text would draw it (the lexer's state carries across lines, e.g. into a long docstring)."""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.content_viewer import ContentBody, ContentViewer
from panels.highlight import highlight
from panels.text_document import prepare
from tests.tui.conftest import settle

# A docstring opened on line 1 and closed on the last line: every line between is a string, which
# only lexing from the top can know; a def after it; a tab and an optimizer mark on the way.
LONG_PY = "\n".join(
    ['import os', 'DOC = """start of a long string']
    + [f"line {i} def not_code(x): return {i}\twith a tab" for i in range(3000)]
    + ['end of the string [...1,234 tokens omitted...]"""', "def last(y: int) -> int:", "    return y + 1"]
)


def _reference(text: str, dark: bool) -> list[Text]:
    """The lines as highlighting the whole text at once draws them (what the view did before)."""
    full = highlight(text, "python", dark)
    full.expand_tabs(8)
    return list(full.split("\n", allow_blank=True))


def _segments(text: Text) -> list[Segment]:
    return list(Segment.simplify(text.render(Console(width=400, color_system="truecolor"))))


def test_prepare_lexes_nothing_and_a_line_lexes_only_up_to_it() -> None:
    doc = prepare(LONG_PY, dark=True, width=40)
    assert doc.language == "python" and len(doc.plain) == 3005
    assert doc.highlighter.lexed == 0, "the worker's part runs no lexer"
    assert len(doc.rows) > len(doc.plain)  # lines wrap at 40
    reference = _reference(LONG_PY, dark=True)
    for i in range(40):
        assert _segments(doc.line(i)) == _segments(reference[i])
    assert doc.highlighter.lexed < len(LONG_PY) // 20, "a screenful lexes a screenful, not the text"
    for i in (3001, 3002, 3003, 3004, 2000):  # far down: inside the string, its end, the def after it
        assert _segments(doc.line(i)) == _segments(reference[i]), i
    string_style = doc.line(1500).spans[0].style
    assert doc.line(1500).spans == [doc.line(1500).spans[0]] and string_style == doc.line(1501).spans[0].style
    assert doc.line(3003).spans != doc.line(1500).spans, "the def after the string is code again"
    assert any(s.style == "bold black on yellow" for s in doc.line(3002).spans), "the optimizer's mark"


def test_light_theme_plain_text_and_markdown_match_a_full_highlight() -> None:
    for text, language in (("plain words\n\n\tindented [...5 tokens omitted...] spill://x/y.txt\n", "text"),
                           ("You are **Bot**.\n- Prefer small diffs.\n- Run tests.", "markdown")):
        for dark in (True, False):
            doc = prepare(text, dark=dark, width=40)
            full = highlight(text, language, dark)
            full.expand_tabs(8)
            reference = full.split("\n", allow_blank=True)
            assert doc.language == language
            lines = [i for i, line in enumerate(doc.plain) if line]
            assert [_segments(doc.line(i)) for i in lines] == [_segments(reference[i]) for i in lines]


class LongPython(SyntheticSource):
    def section_content(self, turn: int, section_id: str) -> str:
        return f"# turn {turn}\n" + LONG_PY


async def test_only_rows_on_screen_are_highlighted_and_the_last_row_is_right() -> None:
    app = InspectorApp(LongPython(20))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        viewer = app.query_one("#content", ContentViewer)
        body = viewer.query_one(ContentBody)
        await pilot.press("left")  # a new turn: new text
        await settle(pilot)
        doc = body.document
        assert doc is not None and "# turn 18" in doc.plain[0]
        assert 0 < doc.highlighter.lexed < len(doc.text) // 20, "only the first screenful was highlighted"
        assert body.virtual_size.height == len(doc.rows)
        # Scroll to the very end (mouse wheel / scrollbar): the last row is drawn highlighted as a
        # full highlight draws it, and the copy of the last line is its source text.
        body.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        last_y = body.size.height - 1
        strip = body.render_line(last_y)
        assert strip.text.rstrip() == "    return y + 1"
        reference = _reference(doc.text, app.current_theme.dark)[-1]
        def colours(segments: list[Segment]) -> list[tuple[str, object]]:  # per character, not per piece
            return [(ch, s.style.color if s.style else None) for s in segments for ch in s.text if ch != " "]

        want = colours(_segments(reference))
        assert colours(list(strip)) == want and want[0][1] is not None
        assert doc.highlighter.lexed == len(doc.highlighter.text), "the end is lexed once it is shown"
