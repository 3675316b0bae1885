"""The footer composes its keys once at start-up (Textual's recomposes on each of the three "bindings
updated" signals of the start, with the same keys), and still follows a real change of the keys."""

from __future__ import annotations

import pytest
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.slider import Slider
from tests.tui.conftest import settle


def _shown(app: InspectorApp) -> list[str]:
    return [f"{k.key}:{k.description}" for k in app.query_one(Footer).query(FooterKey)]


async def test_the_keys_are_composed_once_at_start_up_and_follow_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    composed: list[str] = []
    original = Footer.recompose

    async def counting(self: Footer) -> None:
        composed.append(type(self).__name__)
        await original(self)

    monkeypatch.setattr(Footer, "recompose", counting)
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert len(composed) == 1  # (three on the old code)
        keys = _shown(app)
        assert "g:Go to" in keys and "q:Quit" in keys
        await pilot.press("w")
        await settle(pilot)
        app.query_one("#budget", Slider).focus()  # a slider's own key joins the footer
        await settle(pilot)
        assert any(k.startswith("escape:Done") for k in _shown(app)) and len(composed) == 2
        await pilot.press("escape")  # back to the manifest: the keys as they were
        await settle(pilot)
        assert _shown(app) == keys
