"""The main screen is styled once on its way to the first frame (MainScreen._on_screen_resume).

Textual restyles a whole screen each time it is shown; the first time, every widget had been styled as
it mounted. MainScreen skips that first pass: these tests check that it is skipped, and that skipping it
changes nothing (a full restyle after start-up finds every widget's styles, and the frame, as they were),
at a wide, a narrow and a short size (the sizes that set the root's classes), and that a later resume
that asks for a restyle still gets one.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual import events
from textual.app import App
from textual.dom import DOMNode

from inspector.app import InspectorApp
from inspector.partial_compositor import MainScreen
from inspector.sources.synthetic import SyntheticSource
from tests.tui.conftest import settle


def styles_of(app: InspectorApp) -> dict[str, Any]:
    """Every widget's applied rules (and its components'), by its place in the tree."""
    out: dict[str, Any] = {}
    for i, node in enumerate(app.screen.walk_children(with_self=True)):
        key = f"{i}:{type(node).__name__}#{node.id}"
        out[key] = (node.styles.base.get_rules(), sorted(node.classes), sorted(node.pseudo_classes))
    return out


def screen_restyles(monkeypatch: pytest.MonkeyPatch) -> list[DOMNode]:
    """The nodes App.update_styles is asked to restyle with their whole subtree, the screen among them."""
    calls: list[DOMNode] = []
    update_styles = App.update_styles

    def counted(self: App[Any], node: DOMNode, animate: bool = True) -> None:
        calls.append(node)
        update_styles(self, node, animate)

    monkeypatch.setattr(App, "update_styles", counted)
    return calls


async def test_the_first_screen_is_not_restyled_whole_when_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on the old code: Screen._on_screen_resume restyled the main screen (all ~50 widgets) once
    more, right after each had been styled as it mounted."""
    calls = screen_restyles(monkeypatch)
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert not [node for node in calls if isinstance(node, MainScreen)]


@pytest.mark.parametrize("size", [(120, 40), (200, 60), (80, 30), (120, 20)])
async def test_skipping_it_changes_no_style_and_no_cell(size: tuple[int, int]) -> None:
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        before, drawn = styles_of(app), app.export_screenshot()
        app.screen.update_node_styles(animate=False)  # the pass Textual would have made
        await settle(pilot)
        assert styles_of(app) == before
        assert app.export_screenshot() == drawn


async def test_a_later_resume_still_restyles(monkeypatch: pytest.MonkeyPatch) -> None:
    """A later resume that asks for it (Textual's pop of a screen with a see-through background, or a
    switch back after a CSS change) restyles the main screen as Textual does."""
    calls = screen_restyles(monkeypatch)
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.screen.post_message(events.ScreenResume())
        await settle(pilot)
        assert [node for node in calls if isinstance(node, MainScreen)]
