"""Pilot tests: stepping, go-to, interesting-turn jumps, play/pause, alerts, help, palette, layout."""

from __future__ import annotations

from textual.widgets import Input

from inspector.app import InspectorApp
from inspector.screens import GoToTurnScreen, HelpScreen
from inspector.sources.synthetic import SyntheticSource
from panels.alerts import AlertsPanel
from panels.manifest import ManifestPanel
from panels.markup_line import MarkupLine
from panels.tier import TierPanel
from panels.timeline_strip import TimelineStrip
from tests.tui.conftest import settle


def status_text(app: InspectorApp) -> str:
    return str(app.query_one("#status", MarkupLine).render())


async def test_opens_on_last_turn_and_steps(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert len(app.timeline) == 40 and app.index == 39
        await pilot.press("left", "left")
        assert app.index == 37
        assert app.query_one("#tier", TierPanel).trace["turn"] == 37
        await pilot.press("home")
        assert app.index == 0
        await pilot.press("left")  # clamps at the first turn
        assert app.index == 0
        await pilot.press("right")
        assert app.index == 1
        await pilot.press("end")
        assert app.index == 39
        assert "turn 39" in status_text(app)


async def test_start_turn_and_manifest_follows(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source, start_turn=5)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.index == 5
        manifest = app.query_one("#manifest", ManifestPanel)
        assert manifest.row_count == len(replay_source.trace(5)["sections"])


async def test_go_to_turn(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("g")
        assert isinstance(app.screen, GoToTurnScreen)
        await pilot.press("1", "2", "enter")
        assert app.index == 12
        await pilot.press("g", "9", "9", "enter")  # out of range: stays open
        assert isinstance(app.screen, GoToTurnScreen)
        app.screen.query_one(Input).value = ""
        await pilot.press("escape")
        assert app.index == 12


async def test_interesting_turn_jumps(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source, start_turn=0)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        expected = app.timeline.interesting
        assert expected, "the synthetic session has tier changes, cache breaks and alerts"
        await pilot.press("n")
        assert app.index == expected[0]
        await pilot.press("right_square_bracket")
        assert app.index == expected[1]
        await pilot.press("N")
        assert app.index == expected[0]
        await pilot.press("left_square_bracket")  # none earlier: stays
        assert app.index == expected[0]


async def test_play_pause_and_speed(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source, start_turn=0)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        for _ in range(6):
            await pilot.press("plus")
        assert app.speed == 6  # clamps at the fastest speed
        await pilot.press("space")
        # Pilot's press waits for the screen to settle; on a loaded machine playback (32 turns/s) may
        # have run to the last turn and stopped before it returns.
        assert app.playing or app.index == app.timeline.last
        await pilot.pause(0.3)
        for _ in range(50):  # a loaded machine may not have run the first tick yet: wait for it, up to 5 s
            if app.index > 0:
                break
            await pilot.pause(0.1)
        # On a loaded machine playback may already have reached the last turn and stopped by itself.
        if app.playing:
            await pilot.press("space")
        assert not app.playing
        stopped_at = app.index
        assert stopped_at > 0
        await pilot.pause(0.1)
        assert app.index == stopped_at
        await pilot.press("minus")
        assert app.speed == 5
        # The toggle at the slowest speed (a turn every 2 s): at 16 turns/s a loaded machine could play
        # all 40 turns between the two presses, stop at the end, and the second press would play again.
        for _ in range(5):
            await pilot.press("minus")
        assert app.speed == 0
        await pilot.press("home")
        await pilot.press("space")
        await pilot.press("space")
        assert not app.playing  # space toggles


async def test_alert_selection_jumps_to_its_turn(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        alerts = app.query_one("#alerts", AlertsPanel)
        turns_with_alerts = [t["turn"] for t in app.timeline.traces for _ in t["alerts"]]
        assert alerts.row_count == len(turns_with_alerts)
        await pilot.press("a")
        alerts.focus()
        await pilot.pause()
        alerts.move_cursor(row=2)
        await pilot.press("enter")
        assert app.index == turns_with_alerts[2]


async def test_timeline_strip_click_jumps(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        strip = app.query_one("#strip", TimelineStrip)
        cell = strip._cell(strip.content_size.width)
        await pilot.click("#strip", offset=(2 + 10 * cell + cell // 2, 1))  # border + padding, then turn 10
        assert app.index == 10


async def test_help_screen_and_palette(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for wanted in ("Go to turn N", "Play / pause", "Next interesting turn (tier change, cache break, alert)"):
            assert wanted in titles
        go = next(c for c in app.get_system_commands(app.screen) if c.title == "Next turn")
        before = app.index
        await pilot.press("home")
        go.callback()
        await pilot.pause()
        assert app.index == 1 and before == 39


async def test_narrow_layout_restacks(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.query_one("#root").has_class("narrow")
        assert app.query_one("#manifest", ManifestPanel).compact
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert not app.query_one("#root").has_class("narrow")


async def test_theme_from_env_and_bad_name(monkeypatch, replay_source: SyntheticSource) -> None:
    monkeypatch.setenv("TEXTUAL_THEME", "cp-light")
    assert InspectorApp(replay_source).theme == "cp-light"
    assert InspectorApp(replay_source, theme="hc").theme == "cp-high-contrast"
    app = InspectorApp(replay_source, theme="no-such-theme")
    assert app.theme == "cp-dark"
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert any("unknown theme" in str(n.message) for n in app._notifications)
    # The command line refuses an unknown --theme (exit 2): in the app, an unknown name is the
    # environment's, and the warning says so (it read as if --theme had been given).
    monkeypatch.setenv("TEXTUAL_THEME", "neon")
    app = InspectorApp(replay_source)
    assert app.theme == "cp-dark"
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        told = [str(n.message) for n in app._notifications]
        assert "unknown theme 'neon' (from $TEXTUAL_THEME); using dark (--theme takes dark, light or high-contrast)" in told, told
