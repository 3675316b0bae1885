"""The Line-API views that keep a step within a frame (issue 15.1): the content body draws only the
rows on screen and copies source text; the manifest re-renders only rows that changed; the overview
panels repaint only changed lines, and what they cache is what a fresh render would draw."""

from __future__ import annotations

import threading

from textual.geometry import Offset
from textual.selection import Selection
from textual.visual import Visual

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.cache_layout import CacheLayoutPanel
from panels.content_viewer import ContentBody, ContentViewer
from panels.line_panel import LinePanel
from panels.manifest import ManifestPanel, SectionSelected
from panels.pressure import PressurePanel
from panels.text_document import prepare, row_text, wrap_rows
from panels.tier import TierPanel
from panels.timeline_strip import TimelineStrip
from tests.tui.conftest import settle


class LongContent(SyntheticSource):
    """Section content of 1,500 lines (~0.17 MB), many longer than the view is wide."""

    def section_content(self, turn: int, section_id: str) -> str:
        return "\n".join(f"turn {turn} line {i} " + ("word " * (i % 40)) for i in range(1500))


def test_wrap_rows_break_between_words_and_fold_long_words() -> None:
    lines = ["alpha beta gamma delta", "x" * 25, ""]
    rows = wrap_rows(lines, 10)
    assert [(line, start, lines[line][start:end]) for line, start, end in rows] == [
        (0, 0, "alpha beta "), (0, 11, "gamma "), (0, 17, "delta"),
        (1, 0, "x" * 10), (1, 10, "x" * 10), (1, 20, "x" * 5), (2, 0, ""),
    ]
    doc = prepare('{"a": [1, 2]}', dark=True, width=40)
    assert doc.language == "json" and len(doc.rows) == 1
    assert doc.line(0).spans, "the text is highlighted"


async def test_content_body_draws_only_visible_rows_and_copies_source_text() -> None:
    app = InspectorApp(LongContent(20))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        viewer = app.query_one("#content", ContentViewer)
        body = viewer.query_one(ContentBody)
        assert body.document is not None and len(body.document.rows) > 1500  # wrapped rows
        assert body.virtual_size.height == len(body.document.rows)
        rendered: list[int] = []
        original = body._render_row

        def counting(index: int, *args):  # type: ignore[no-untyped-def]
            rendered.append(index)
            return original(index, *args)

        body._render_row = counting  # type: ignore[method-assign]
        await pilot.press("left")  # a new turn: new text, 1,500 lines
        await settle(pilot)
        assert " · turn 18 · " in viewer.title
        assert rendered and max(rendered) < body.size.height + 2, "only rows on screen are rendered"
        assert body.scroll_y == 0
        # Scrolling keys in the body scroll it; Left/Right still step turns.
        body.focus()
        await pilot.press("pagedown", "down")
        assert body.scroll_y > body.size.height - 2
        assert max(rendered) >= body.size.height
        before = app.index
        await pilot.press("right")
        assert app.index == before + 1
        await settle(pilot)
        # Selection across a wrapped line copies the source line, without the wrap's breaks.
        doc = body.document
        assert doc is not None
        long_line = next(i for i, line in enumerate(doc.plain) if len(line) > body.wrap_width)
        selection = Selection(Offset(0, long_line), Offset(len(doc.plain[long_line]), long_line))
        text, _ = body.get_selection(selection) or ("", "")
        assert text == doc.plain[long_line] and "\n" not in text
        # The rows' strips carry (character in the source line, source line) offsets for selection.
        second_row = next(i for i, (line, start, _) in enumerate(doc.rows) if line == long_line and start > 0)
        assert row_text(doc, second_row)[2].spans, "a wrapped row keeps its highlighting"
        strip = body._render_row(second_row, body.wrap_width, body.rich_style, None)
        first = next(seg for seg in strip if seg.style and seg.style.meta.get("offset"))
        assert first.style is not None and first.style.meta["offset"] == (doc.rows[second_row][1], long_line)


async def test_manifest_renders_only_changed_rows_and_moves_its_cursor() -> None:
    source = SyntheticSource(40)

    def ids(turn: int) -> list[str]:
        return [sec["id"] for sec in source.trace(turn)["sections"]]

    start = next(t for t in range(39) if ids(t) == ids(t + 1))  # the next turn has the same sections
    app = InspectorApp(source, start_turn=start)
    selected: list[str] = []
    async with app.run_test(size=(160, 48), message_hook=lambda m: isinstance(m, SectionSelected)
                            and selected.append(m.section_id)) as pilot:
        await settle(pilot)
        manifest = app.query_one("#manifest", ManifestPanel)
        rows = manifest.row_count
        assert rows == len(app.full_trace(app.index)["sections"])  # type: ignore[index]
        rendered: list[int] = []
        original = manifest._render_row

        def counting(row: int, base):  # type: ignore[no-untyped-def]
            rendered.append(row)
            return original(row, base)

        manifest._render_row = counting  # type: ignore[method-assign]
        before = {i: manifest._rows[i] for i in range(rows)}
        await pilot.press("right")
        await pilot.pause()
        changed = {i for i in range(rows) if manifest._rows[i] != before[i]}
        assert changed != set(range(rows)), "some rows keep their figures from one turn to the next"
        assert set(rendered) <= changed, (rendered, changed)  # unchanged rows come from the cache
        manifest.focus()
        await pilot.press("down", "down")
        await settle(pilot)
        assert manifest.cursor_row == 2
        assert selected[-1] == manifest.selected_section()
        assert f"{manifest.selected_section()} · turn" in app.query_one("#content", ContentViewer).title
        await pilot.click("#manifest", offset=(5, 1 + 1 + 4))  # border, header, then row 4
        await settle(pilot)
        assert manifest.cursor_row == 4 and selected[-1] == manifest.selected_section()


async def test_line_panels_cache_what_a_fresh_render_draws() -> None:
    """Stepping back and forth reuses cached lines; each must equal a render from scratch (a cache
    keyed on Content's own equality, which ignores styles, drew the timeline cursor on the wrong turn)."""
    app = InspectorApp(SyntheticSource(40), start_turn=25)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        for keys in (("left",) * 3, ("right",) * 5, ("home",), ("end",), ("left",)):
            await pilot.press(*keys)
            await pilot.pause()
            for cls in (PressurePanel, TierPanel, CacheLayoutPanel, TimelineStrip):
                panel: LinePanel = app.query_one(cls)
                width = panel.size.width
                fresh = Visual.to_strips(panel, panel.render(), width, None, panel.visual_style)
                shown = [panel.render_line(y) for y in range(len(fresh))]
                for y, (a, b) in enumerate(zip(shown, fresh, strict=True)):
                    assert a.text == b.text, (cls.__name__, y)
                    assert [s.style for s in a.simplify()] == [s.style for s in b.simplify()], (cls.__name__, y)


class Gated(SyntheticSource):
    """Section content held until the test releases it: shows what the step's own frame draws."""

    def __init__(self, n_turns: int) -> None:
        super().__init__(n_turns)
        self.release = threading.Event()
        self.release.set()

    def section_content(self, turn: int, section_id: str) -> str:
        self.release.wait(timeout=30)
        return super().section_content(turn, section_id)


async def test_a_step_to_the_same_text_is_titled_in_its_own_frame() -> None:
    source = Gated(40)
    shas = [{s["id"]: s["sha256"] for s in source.trace(t)["sections"]} for t in range(40)]
    turn, same, other = next((t, sid, o) for t in range(39) for sid in shas[t] for o in shas[t]
                             if shas[t + 1].get(sid) == shas[t][sid] and shas[t + 1].get(o) not in (None, shas[t][o]))
    app = InspectorApp(source, start_turn=turn)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        manifest = app.query_one("#manifest", ManifestPanel)
        viewer = app.query_one("#content", ContentViewer)
        manifest.move_cursor(row=manifest._ids.index(same))
        await settle(pilot)
        source.release.clear()  # content for the next turn is held back
        await pilot.press("right")
        await pilot.pause()
        assert f"{same} · turn {turn + 1} · " in viewer.title  # unchanged text: titled at once
        source.release.set()
        await settle(pilot)
        await pilot.press("left")
        await settle(pilot)
        manifest.move_cursor(row=manifest._ids.index(other))
        await settle(pilot)
        source.release.clear()
        await pilot.press("right")
        await pilot.pause()
        assert f"{other} · turn {turn} · " in viewer.title  # changed text: the old title until it comes
        source.release.set()
        await settle(pilot)
        assert f"{other} · turn {turn + 1} · " in viewer.title
