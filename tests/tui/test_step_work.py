"""What one step does on the UI thread, counted: work a step repeated for nothing is not done twice."""

from __future__ import annotations

import pytest

import inspector.app as app_module
from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.markup_line import MarkupLine
from tests.tui.conftest import settle


async def test_a_step_builds_the_status_line_once(replay_source: SyntheticSource,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: watch_index built the status parts and go() built them again to find them unchanged.
    built: list[int] = []
    original = app_module.status_lines

    def counted(*args: object, **kwargs: object) -> object:
        built.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    app = InspectorApp(replay_source, start_turn=10)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        monkeypatch.setattr(app_module, "status_lines", counted)
        status = app.query_one("#status", MarkupLine)
        for key, turn in [("right", 11), ("left", 10), ("end", 39), ("home", 0)]:
            built.clear()
            await pilot.press(key)
            await pilot.pause()
            assert len(built) == 1, (key, len(built))
            assert f"turn {turn} " in str(status.render())
        built.clear()
        await pilot.press("left")  # already at the first turn: no step, and the status line is still current
        await pilot.pause()
        assert app.index == 0 and len(built) == 1


async def test_a_step_reads_the_body_and_manifest_base_styles_from_what_it_kept(
        replay_source: SyntheticSource, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the content body's and the manifest's frames walked their ancestors for `rich_style` on every
    # step (each repaint empties Textual's own copy). Kept by styles key, it must still follow a new
    # theme and a change of focus (the manifest's colours are not the same focused).
    from textual.dom import DOMNode

    from panels.content_viewer import ContentBody
    from panels.manifest import ManifestPanel
    from panels.row_frame import kept_rich_style

    app = InspectorApp(replay_source, start_turn=10)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        body, manifest = app.query_one(ContentBody), app.query_one(ManifestPanel)
        await pilot.press("right")
        await settle(pilot)
        asked: list[str] = []
        original = DOMNode.rich_style

        def counted(self: DOMNode) -> object:
            if self is body or self is manifest:
                asked.append(type(self).__name__)
            return original.fget(self)  # type: ignore[attr-defined]

        monkeypatch.setattr(DOMNode, "rich_style", property(counted))
        for key in ("right", "right", "left"):
            await pilot.press(key)
            await settle(pilot)
        assert asked == []
        monkeypatch.setattr(DOMNode, "rich_style", original)
        for change in ("theme", "focus"):
            if change == "theme":
                app.theme = "cp-light"
            else:
                manifest.focus() if not manifest.has_focus else body.focus()
            await settle(pilot)
            await pilot.press("right")
            await settle(pilot)
            assert kept_rich_style(body) == body.rich_style, change
            assert kept_rich_style(manifest) == manifest.rich_style, change
