"""The stepping keys reach their binding without bubbling through the widgets (inspector/key_route.py),
and every key a widget has a use for still reaches that widget."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from textual import events, on
from textual.binding import Binding
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input

import inspector.app
from inspector.app import InspectorApp
from inspector.key_route import ignores_key, step_keys
from inspector.screens import GoToTurnScreen
from inspector.sources.synthetic import SyntheticSource
from panels.content_viewer import ContentBody
from panels.manifest import ManifestPanel
from panels.slider import Slider
from tests.tui.conftest import settle


@contextmanager
def key_dispatches() -> Iterator[list[str]]:
    """The class names of the message pumps that dispatch a Key event, in order."""
    seen: list[str] = []
    original = MessagePump._dispatch_message

    async def spy(self: MessagePump, message: object) -> None:
        if isinstance(message, events.Key):
            seen.append(type(self).__name__)
        await original(self, message)  # type: ignore[arg-type]

    MessagePump._dispatch_message = spy  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        MessagePump._dispatch_message = original  # type: ignore[method-assign]


async def test_step_key_is_handled_by_the_app_alone(replay_source: SyntheticSource) -> None:
    # Before key_route the Right key went app -> manifest -> Horizontal -> Vertical -> screen -> app.
    app = InspectorApp(replay_source, start_turn=10)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        for focus, key, after in [("#manifest", "right", 11), ("#content-body", "left", 10),
                                  ("#manifest", "end", 39), ("#content-body", "home", 0)]:
            app.query_one(focus).focus()
            await pilot.pause()
            with key_dispatches() as seen:
                await pilot.press(key)
                await pilot.pause()
            assert app.index == after, (focus, key)
            assert seen == ["InspectorApp"], (focus, key, seen)


async def test_focused_slider_still_takes_left_and_right(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source, start_turn=30)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        budget = app.query_one("#budget", Slider)
        budget.focus()
        await pilot.pause()
        start = budget.value
        await pilot.press("right", "right")
        assert budget.value == start + 2 * budget.step and app.index == 30
        await pilot.press("left")
        assert budget.value == start + budget.step and app.index == 30
        await pilot.press("home")
        assert budget.value == budget.minimum and app.index == 30
        await pilot.press("escape", "left")  # Esc hands the arrows back to stepping
        assert isinstance(app.focused, ManifestPanel) and app.index == 29
        await settle(pilot)


async def test_modal_input_keeps_its_arrows(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source, start_turn=20)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("g", "1", "2", "left", "3", "home", "right", "end")
        assert isinstance(app.screen, GoToTurnScreen)
        assert app.screen.query_one(Input).value == "132" and app.index == 20
        await pilot.press("escape")
        await settle(pilot)


def test_step_keys_are_the_stepping_bindings() -> None:
    keys = step_keys(list(InspectorApp.BINDINGS))
    assert {"left", "right", "home", "end", "n", "N", "left_square_bracket", "right_square_bracket"} == keys


def test_a_widget_with_any_key_handler_gets_the_key_the_ordinary_way() -> None:
    class OnKey(Widget):
        def on_key(self, event: events.Key) -> None: ...

    class KeyMethod(Widget):
        def key_right(self) -> None: ...

    class Decorated(Widget):
        @on(events.Key)
        def seen(self, event: events.Key) -> None: ...

    class Inherits(OnKey):
        pass

    class Plain(Widget):
        def on_mouse_down(self, event: events.MouseDown) -> None: ...

    for cls in (OnKey, KeyMethod, Decorated, Inherits, Input):
        assert not ignores_key(cls, ("right",)), cls
    assert ignores_key(KeyMethod, ("left",))  # key_right has no use for Left
    for cls in (Plain, ManifestPanel, ContentBody, Slider):
        assert ignores_key(cls, ("right",)), cls


async def test_a_step_key_builds_the_binding_chain_once(replay_source: SyntheticSource,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # Textual's look-up builds it for the priority bindings and again for the ordinary ones (2 a step before).
    built: list[int] = []
    chain = Screen._binding_chain

    def counted(screen: Screen) -> object:
        built.append(1)
        return chain.fget(screen)  # type: ignore[attr-defined]

    app = InspectorApp(replay_source, start_turn=10)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        monkeypatch.setattr(Screen, "_binding_chain", property(counted))
        for key, after in [("right", 11), ("left", 10), ("end", 39), ("home", 0)]:
            built.clear()
            await pilot.press(key)
            await pilot.pause()
            assert app.index == after and len(built) == 1, (key, len(built))


class PriorityRightApp(InspectorApp):
    CSS_PATH = str(Path(inspector.app.__file__).with_name("app.tcss"))  # (relative to the class's module)
    BINDINGS = [Binding("right", "mark", "Mark", priority=True)]

    def __init__(self, source: SyntheticSource) -> None:
        super().__init__(source, start_turn=10)
        self.marked = 0

    def action_mark(self) -> None:
        self.marked += 1


async def test_a_priority_binding_still_comes_first(replay_source: SyntheticSource) -> None:
    app = PriorityRightApp(replay_source)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("right", "left")
        assert app.marked == 1 and app.index == 9  # Right marked (and did not step); Left stepped
