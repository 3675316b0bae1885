"""Keys that arrive together are handled in order, each where focus is once the keys before it are done
(inspector/key_order.py). tmux sends Esc then Left as one write (`\\x1b\\x1b[D`): Textual reads both keys
at once, and the Left used to reach the slider that Esc was about to take focus from."""

from __future__ import annotations

from textual import events

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.manifest import ManifestPanel
from panels.slider import Slider
from tests.tui.conftest import settle


def _together(app: InspectorApp, *keys: tuple[str, str | None]) -> None:
    """Post the keys to the app back to back, as the driver's input thread does with one read."""
    for key, character in keys:
        app.post_message(events.Key(key, character))


async def test_escape_then_left_together_steps_instead_of_moving_the_slider(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source, start_turn=30)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        budget = app.query_one("#budget", Slider)
        budget.focus()
        await pilot.pause()
        start = budget.value
        _together(app, ("escape", None), ("left", None))
        await settle(pilot)
        # Before: the slider moved one step left and the turn stayed at 30.
        assert budget.value == start
        assert isinstance(app.focused, ManifestPanel) and app.index == 29
        _together(app, ("right", None), ("right", None), ("left", None))  # no focus change: all three step
        await settle(pilot)
        assert app.index == 30 and budget.value == start


async def test_keys_after_a_widget_key_keep_their_order(replay_source: SyntheticSource) -> None:
    # Down moves the manifest's row (the manifest handles it), then Right steps: both, in that order.
    app = InspectorApp(replay_source, start_turn=10)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        manifest = app.query_one("#manifest", ManifestPanel)
        row = manifest.cursor_row
        _together(app, ("down", None), ("right", None), ("down", None), ("left", None))
        await settle(pilot)
        assert manifest.cursor_row == row + 2 and app.index == 10
        budget = app.query_one("#budget", Slider)
        await pilot.press("w")
        budget.focus()
        await pilot.pause()
        start = budget.value
        _together(app, ("right", None), ("right", None))  # the focused slider takes both
        await settle(pilot)
        assert budget.value == start + 2 * budget.step and app.index == 10
