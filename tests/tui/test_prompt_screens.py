"""The inspector's input prompts (`g` go to turn, `/` search, `s` save) share one modal base
(inspector/screens/prompt.py): each drawn with its question, its box and its own footer over the main
screen, Esc closing it with nothing, and a refused answer said in a toast with the prompt left open."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input, Label

from inspector.app import InspectorApp
from inspector.screens import GoToTurnScreen, SaveScreen, SearchScreen
from inspector.screens.prompt import InputPrompt
from inspector.sources.file import FileSource
from inspector.sources.synthetic import SyntheticSource
from tests.tui.conftest import settle

DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"


def test_every_input_prompt_is_one_base() -> None:
    for screen in (GoToTurnScreen, SearchScreen, SaveScreen):
        assert issubclass(screen, InputPrompt), screen


async def test_each_prompt_opens_refuses_and_closes_with_escape() -> None:
    app = InspectorApp(SyntheticSource(30, live=True, initial=20, delay=0.01))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        for key, kind, question, refused in (
            ("g", GoToTurnScreen, "#goto-question", "99"),
            ("slash", SearchScreen, "#search-question", "   "),
            ("s", SaveScreen, "#save-question", ""),
        ):
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, kind), (key, app.screen)
            assert str(app.screen.query_one(question, Label).render()).strip()
            app.screen.query_one(Input).value = refused
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, kind), f"{key}: {refused!r} was taken"
            await pilot.press("escape")
            await settle(pilot)
            assert not isinstance(app.screen, InputPrompt), key


async def _typed(pilot: Pilot, key: str, text: str) -> None:
    await settle(pilot)
    await pilot.press(key)
    await settle(pilot)
    if text:
        await pilot.press(*text)
    await settle(pilot)


def test_go_to_prompt_snapshot(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = InspectorApp(FileSource(DEMO), theme="cp-dark", start_turn=0)
    assert snap_compare(app, terminal_size=(120, 40), run_before=lambda p: _typed(p, "g", "17"))


def test_search_prompt_snapshot(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = InspectorApp(FileSource(DEMO), theme="cp-light", start_turn=0)
    assert snap_compare(app, terminal_size=(80, 24), run_before=lambda p: _typed(p, "slash", "latch"))
