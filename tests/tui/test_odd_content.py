"""Odd content as a person's agent produces it: markup and terminal escapes in what the agent sends
(section ids, message text, tool output) and in what the person types (a theme, a path). Shown as
written, never interpreted, and never the end of the app. Real engine recordings where text is needed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.console import Console
from rich.style import Style
from textual.pilot import Pilot
from textual.widgets._toast import Toast

from engine import Pipeline
from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from inspector.sources.synthetic import SyntheticSource
from panels.content_viewer import ContentViewer, render_row
from panels.manifest import ManifestPanel
from panels.markup_line import MarkupLine
from panels.text_document import prepare, row_text
from tests.tui.conftest import settle

ESCAPES = "\x1b[31mRED\x1b[0m \x1b]0;TITLE\x1b\\ \x1b]52;c;aGk=\x1b\\ \x1b[2J \x00 \x7f \x9b31m"


def record(path: Path, source_id: str, text: str) -> Path:
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000, record=str(path))
    pipe.identity("You are careful.")
    pipe.add_source(source_id, "context", text=text)
    for i in range(3):
        pipe.user(f"step {i}")
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
        pipe.assistant("ok")
    pipe.close()
    return path


async def settled(pilot: Pilot[None]) -> None:
    """settle(), bounded: once the app has died of an exception, waiting on it never returns."""
    try:
        await asyncio.wait_for(settle(pilot), 20)
    except TimeoutError:
        pass
    assert pilot.app.is_running and pilot.app.return_code is None, "the app ended"


async def select_section(pilot: Pilot[None], section: str) -> None:
    """Down the manifest to `section`, as a person would (stops if the app has ended: a crash)."""
    app = pilot.app
    manifest = app.query_one("#manifest", ManifestPanel)
    for _ in range(12):
        if manifest.selected_section() == section or not app.is_running:
            break
        await asyncio.wait_for(pilot.press("down"), 20)
        await settled(pilot)
    assert manifest.selected_section() == section


def toasts(app: InspectorApp) -> list[str]:
    return [str(t.render()) for t in app.screen.query(Toast)]


async def test_a_theme_name_with_markup_is_named_literally_not_a_crash() -> None:
    # `--theme '[/]x'`: the warning's toast parsed it as markup and raised MarkupError; the app died.
    app = InspectorApp(SyntheticSource(5), theme="[/]oops[b]")
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.pause(0.1)
        assert app.is_running and app.return_code is None
        assert any("unknown theme '[/]oops[b]'" in t for t in toasts(app)), toasts(app)


async def test_a_save_path_with_markup_is_named_literally(tmp_path: Path) -> None:
    app = InspectorApp(SyntheticSource(30, live=True, initial=20, delay=0.01))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        bad = str(tmp_path / "missing-dir" / "[b]x[/b].cpsession")
        app.save_worker(bad)
        await settle(pilot)
        await pilot.pause(0.1)
        assert any(f"could not save to {bad}" in t for t in toasts(app)), toasts(app)
        good = str(tmp_path / "[red]y.cpsession")
        app.save_worker(good)
        await settle(pilot)
        await pilot.pause(0.1)
        assert app.is_running and Path(good).exists()
        assert any(f"turns to {good}" in t for t in toasts(app)), toasts(app)


async def test_a_section_id_with_markup_titles_the_content_literally(tmp_path: Path) -> None:
    # The agent names its sections (add_source): selecting "docs[/]x" raised MarkupError in the title.
    path = record(tmp_path / "names.cpsession", "docs[/]x[b]", "the docs")
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await select_section(pilot, "docs[/]x[b]")
        await pilot.press("left")  # a step retitles the same text in the step's frame
        await settled(pilot)
        title = str(app.query_one("#content-title", MarkupLine).render())
        assert title.startswith("docs[/]x[b] · turn 1 ·"), title
        assert app.query_one("#content", ContentViewer).text == "the docs"


def test_terminal_escapes_in_text_are_shown_not_sent() -> None:
    # Drawn as they were, ESC [31m turned the rest of the row red, ESC ] 0 / 52 set the window title and
    # the clipboard, ESC [2J cleared the screen: whatever an agent's tool printed, the terminal obeyed.
    doc = prepare(f"out: {ESCAPES}\n\ttabbed", dark=True, width=200)
    console = Console(width=200, color_system="truecolor", force_terminal=True)
    for i in range(len(doc.rows)):
        _, _, text = row_text(doc, i)
        for segment in render_row(doc, i, 200, Style(), console):
            assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in segment.text), repr(segment.text)
        assert text.plain == doc.plain[doc.rows[i][0]][doc.rows[i][1]:doc.rows[i][2]]
    assert doc.plain[0] == "out: ␛[31mRED␛[0m ␛]0;TITLE␛\\ ␛]52;c;aGk=␛\\ ␛[2J ␀ ␡ \ufffd31m"
    assert doc.plain[1] == " " * 8 + "tabbed"


async def test_escapes_in_a_recorded_section_reach_the_screen_as_pictures(tmp_path: Path) -> None:
    path = record(tmp_path / "esc.cpsession", "out", f"pytest said {ESCAPES}")
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await select_section(pilot, "out")
        viewer = app.query_one("#content", ContentViewer)
        assert viewer.text.startswith("pytest said")
        drawn = "".join(viewer.body.render_line(y).text for y in range(4))
        assert "pytest said ␛[31mRED␛[0m" in drawn, drawn
        assert "\x1b" not in drawn and "\x9b" not in drawn


def controls_in(widget) -> list[str]:  # type: ignore[no-untyped-def]
    """The rows of `widget` as drawn that carry a control character to the terminal."""
    rows = [widget.render_line(y) for y in range(widget.size.height)]
    return [repr(row.text) for row in rows
            if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for seg in row for c in seg.text)]


async def test_an_error_a_latch_and_a_section_name_with_newlines_and_escapes_stay_one_row(tmp_path: Path) -> None:
    # A provider's error text (record_error), a latch's name and a section's name are the agent's: a
    # newline in an alert's row broke it (the rest of the message vanished, rows below shifted), an
    # ESC in it reached the terminal.
    path = tmp_path / "odd.cpsession"
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000, record=str(path))
    pipe.identity("You are careful.")
    pipe.add_source("doc", "context", text="the doc", name="doc\nname\x1b[41m")
    pipe.latch("mode\x1b[41m", "a")
    for i in range(4):
        pipe.user(f"step {i}")
        if i == 2:
            pipe.latch("mode\x1b[41m", "b")
        req = pipe.next_request()
        if i == 1:
            pipe.record_error("prompt_too_long", "prompt is too long:\n  201000 tokens\r\n\x1b[31mmax\x1b[0m")
        else:
            pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
        pipe.assistant("ok")
    pipe.close()
    app = InspectorApp(FileSource(path), start_turn=1)
    async with app.run_test(size=(250, 50)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        for panel in ("#alerts", "#tier", "#manifest", "#cache"):
            assert controls_in(app.query_one(panel)) == [], panel
        alerts = app.query_one("#alerts")
        text = "\n".join(alerts.render_line(y).text for y in range(alerts.size.height))
        assert "prompt is too long:␤  201000 tokens␤␛[31mmax␛[0m" in text, text
        assert "session latch flipped: mode␛[41m" in text, text
        tier = app.query_one("#tier")
        assert any("error prompt_too_long: prompt is too long:␤" in tier.render_line(y).text
                   for y in range(tier.size.height))


async def test_why_the_cache_missed_names_an_odd_section_without_sending_its_escape(tmp_path: Path) -> None:
    path = tmp_path / "why.cpsession"
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000, record=str(path))
    pipe.identity("You are careful.")
    pipe.add_source("docs\x1b[41m", "context", text="alpha one")
    for i in range(3):
        pipe.user(f"step {i}")
        if i == 1:
            pipe.set_content("docs\x1b[41m", "beta two")  # the cache breaks in that section
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
        pipe.assistant("ok")
    pipe.close()
    app = InspectorApp(FileSource(path), start_turn=1)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await settle(pilot)
        why = app.query_one("#why")
        text = "\n".join(why.render_line(y).text for y in range(why.size.height))
        assert "[docs␛[41m]" in text, text
        assert controls_in(why) == []
