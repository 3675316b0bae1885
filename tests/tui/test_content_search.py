"""Content search in the inspector (`/`, then `f` / `F`): the turns a text enters or leaves what each
turn sent, found by a worker that the person can stop (Esc) and that never holds the UI; the section that
holds it marked in the manifest and its hits highlighted and scrolled to in the Content tab. Live, it
searches the turns received so far and goes on over those that arrive."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input

from inspector.app import InspectorApp
from inspector.screens import SearchScreen
from inspector.sources.file import FileSource
from inspector.sources.synthetic import SyntheticSource
from panels.content_viewer import ContentViewer
from panels.manifest import ManifestPanel
from panels.markup_line import MarkupLine
from tests.support.stream_builds import record_builds
from tests.tui.conftest import settle

DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"


async def search(pilot: Pilot, text: str) -> None:
    await pilot.press("slash")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, SearchScreen)
    screen.query_one("#search-input", Input).value = text
    await pilot.press("enter")


def bar(app: InspectorApp) -> str:
    line = app.query_one("#search-bar", MarkupLine)
    return str(line._content.plain) if line.display else ""


def turn(app: InspectorApp) -> int:
    return app.timeline.traces[app.index]["turn"]


def shown_rows(viewer: ContentViewer) -> list[str]:
    body = viewer.body
    doc = body.document
    assert doc is not None
    top = int(body.scroll_y)
    rows = doc.rows[top : top + body.scrollable_content_region.height]
    return [doc.plain[n][a:b] for n, a, b in rows]


async def test_slash_finds_where_a_text_enters_and_leaves_the_prompt_of_a_recording() -> None:
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await search(pilot, "Latch")  # any case
        await settle(pilot)
        assert turn(app) == 11, bar(app)
        assert "turn 11: 'Latch' enters the prompt in history" in bar(app)
        manifest = app.query_one("#manifest", ManifestPanel)
        assert manifest.selected_section() == "history" and manifest.marked == frozenset({"history"})
        viewer = app.query_one("#content", ContentViewer)
        assert viewer.title.startswith("history · turn 11 ·")
        assert viewer.body.needle == "latch"
        # Scrolled to the hit that came in (the history's last), not left at the top of a 21,000-char text.
        assert viewer.body.scroll_y > 0 and any("latch" in row.lower() for row in shown_rows(viewer))

        await pilot.press("f")
        await settle(pilot)
        assert turn(app) == 16 and "comes again in history (3 -> 10 matches)" in bar(app)
        await pilot.press("f")
        await settle(pilot)
        assert turn(app) == 17 and "left the prompt" in bar(app)
        assert manifest.marked == frozenset()  # turn 17 sent none of it
        await pilot.press("F")
        await settle(pilot)
        assert turn(app) == 16

        # `n` is still the next interesting turn, not the next match.
        interesting = next(i for i in app.timeline.interesting if i > app.index)
        await pilot.press("n")
        await settle(pilot)
        assert app.index == interesting

        await pilot.press("escape")  # puts the search away
        await pilot.pause()
        assert bar(app) == "" and app.search.scan is None
        assert viewer.body.needle == "" and manifest.marked == frozenset()


async def test_a_text_no_turn_sent_is_said_and_the_view_stays() -> None:
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=5)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await search(pilot, "zqxjw")
        await settle(pilot)
        assert turn(app) == 5
        assert "not found in what turns 0–39 sent" in bar(app)


class SlowSource(SyntheticSource):
    """Each section's text takes a while to build, as a long recording's fold does."""

    def section_content(self, turn: int, section_id: str) -> str:
        time.sleep(0.01)
        return super().section_content(turn, section_id)


async def test_a_long_search_says_how_far_it_is_keeps_the_ui_and_stops_on_escape() -> None:
    app = InspectorApp(SlowSource(120), theme="cp-dark", start_turn=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await search(pilot, "nowhere in it")
        deadline = time.monotonic() + 60  # (only reached when the search never says how far it is)
        while "searching turn" not in bar(app) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert "searching turn" in bar(app) and "of 120)" in bar(app), bar(app)
        await pilot.press("right")  # the UI steps while the worker searches
        await pilot.pause()
        assert app.index == 1
        await pilot.press("escape")
        await pilot.pause()
        assert not app.search.running and "stopped at turn" in bar(app), bar(app)
        scan = app.search.scan
        assert scan is not None
        stopped = scan.scanned
        await pilot.pause(0.3)
        assert scan.scanned <= stopped + 1 < 120  # the worker stopped (at most the turn it was on)
        assert app.index == 1
        await pilot.press("f")  # goes on from where it stopped
        await settle(pilot)
        assert "not found in what turns 0–119 sent" in bar(app), bar(app)


async def until(pilot: Pilot, done: Callable[[], bool], wait_s: float = 20) -> None:
    """Pause until `done()` (a live source's worker never ends: settle() would wait for it)."""
    give_up = time.monotonic() + wait_s
    while not done() and time.monotonic() < give_up:
        await pilot.pause(0.05)


async def test_live_it_searches_the_turns_received_and_goes_on_over_new_ones() -> None:
    hold = threading.Event()  # the turns after the first 20 arrive once it is set
    app = InspectorApp(SyntheticSource(30, live=True, initial=20, hold=hold), theme="cp-dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(app.timeline) == 20 and app.index >= 0)
        await pilot.press("home")
        await search(pilot, "(step 25)")
        await until(pilot, lambda: "not found" in bar(app))
        assert "not found in what turns 0–19 sent" in bar(app), bar(app)
        hold.set()  # the agent goes on
        await until(pilot, lambda: len(app.timeline) == 30)
        await pilot.press("home")
        await pilot.press("f")
        await until(pilot, lambda: "enters" in bar(app))
        assert turn(app) == 25 and "turn 25: '(step 25)' enters the prompt in history" in bar(app), bar(app)
        await pilot.press("f")
        await until(pilot, lambda: "left" in bar(app))
        assert turn(app) == 29, bar(app)


async def test_a_search_that_meets_the_end_wraps_as_less_does() -> None:
    """`/` at the last turn searched forward only and found nothing ("no later turn"), `F` at the first
    said "no earlier turn": the person had to know the other key. Now the search wraps and says so; a
    text sent nowhere is "not found" once, either way."""
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        assert turn(app) == 39
        await search(pilot, "latch")
        await settle(pilot)
        assert turn(app) == 11, bar(app)
        # What was found first, then that the search wrapped and why ("search wrapped to turn 0 · turn
        # 11: ..." read as two answers, and at 80 columns left what was found cut short).
        assert bar(app) == (
            "/latch  turn 11: 'latch' enters the prompt in history  ·  wrapped: none from turn 39 on  ·  "
            "f next, F previous, Esc clears"
        ), bar(app)
        await pilot.press("f")  # no wrap now: the next change after turn 11
        await settle(pilot)
        assert turn(app) == 16 and "wrapped" not in bar(app), bar(app)

        await pilot.press("home")
        await settle(pilot)
        await pilot.press("F")  # nothing before turn 0: the last change of all
        await settle(pilot)
        scan = app.search.scan
        assert scan is not None and scan.scanned == 40
        last = scan.changes[-1]
        assert turn(app) == last.turn > 11 and "  ·  wrapped: none before turn 0  ·  " in bar(app), bar(app)
        await pilot.press("f")  # from the last change, forward: round again to the first
        await settle(pilot)
        assert turn(app) == 11 and f"  ·  wrapped: none after turn {last.turn}  ·  " in bar(app), bar(app)

        await search(pilot, "zqxjw")
        await settle(pilot)
        assert turn(app) == 11 and bar(app) == "/zqxjw  not found in what turns 0–39 sent", bar(app)
        await pilot.press("F")
        await settle(pilot)
        assert turn(app) == 11 and bar(app) == "/zqxjw  not found in what turns 0–39 sent", bar(app)


async def test_f_at_the_only_change_says_it_is_the_only_one() -> None:
    """'permissions' enters the demo's prompt at turn 0 and never leaves it: `f` there wrapped round to
    turn 0 again and said "search wrapped to turn 0 · turn 0: ..." each time, as if it had moved."""
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await search(pilot, "permissions")
        await settle(pilot)
        assert turn(app) == 0 and "turn 0: 'permissions' enters the prompt in latches" in bar(app), bar(app)
        for key in ("f", "F"):
            await pilot.press(key)
            await settle(pilot)
            assert turn(app) == 0 and bar(app) == (
                "/permissions  turn 0 is the only turn it enters or leaves the prompt: 'permissions' enters "
                "the prompt in latches  ·  Esc clears"
            ), bar(app)


async def test_live_a_search_at_the_newest_turn_wraps_to_the_first_change() -> None:
    """Following a live agent (the newest turn shown), `/` found nothing: every change is behind it."""
    app = InspectorApp(SyntheticSource(20, live=True), theme="cp-dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(app.timeline) == 20 and app.index == 19)
        await search(pilot, "(step 5)")
        await until(pilot, lambda: "enters" in bar(app))
        assert turn(app) == 5, bar(app)
        assert "turn 5: '(step 5)' enters the prompt in history  ·  wrapped: none from turn 19 on" in bar(
            app
        ), bar(app)


async def test_a_second_query_goes_on_with_the_first_ones_pass() -> None:
    """`/` with a new text went over the recording from turn 0 again, building each turn again: now only
    the turns the first query's pass had not reached are built."""
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await search(pilot, "latch")
        await settle(pilot)
        first = app.search.scan
        assert first is not None and turn(app) == 11
        stream = first.stream
        assert stream is not None and first.scanned == 12  # turns 0-11: as far as the answer needed
        built = record_builds(stream)
        await pilot.press("end")
        await search(pilot, "list_files")
        await settle(pilot)
        scan = app.search.scan
        assert scan is not None and scan is not first and scan.stream is stream
        assert "list_files" in bar(app) and scan.scanned == 40, bar(app)
        assert built == list(range(12, 40)), built


async def _latch_found(pilot: Pilot) -> None:
    await settle(pilot)
    await search(pilot, "latch")
    await settle(pilot)


def test_search_found_snapshot_120x40(snap_compare) -> None:
    """The search bar, the History row marked, the hits highlighted and scrolled to (the demo recording)."""
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=0)
    assert snap_compare(app, terminal_size=(120, 40), run_before=_latch_found)


def test_search_found_snapshot_80x24(snap_compare) -> None:
    app = InspectorApp(FileSource(DEMO), theme="cp-light", start_turn=0)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_latch_found)
