"""`cp-inspect top` as a newcomer meets it: `?` explains the keys and the columns (it did nothing), and
Enter on an empty table says why nothing happened (it was silent)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Markdown

from inspector.screens.help import HelpScreen
from tests.support.top_pilot import empty_top, press


async def test_question_mark_opens_top_help_with_its_keys_and_columns(tmp_path: Path) -> None:
    async with empty_top(tmp_path) as (app, pilot):
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        rows = "\n".join(app.screen.compose_rows())
        assert rows.startswith("# ContextPipe top")
        for key, told in [("`⏎`", "open the inspector on the highlighted agent"), ("`s`", "sort by the next column"), ("`/`", "filter rows"),
                          ("`q`", "Quit")]:
            assert any(key in line and told in line for line in rows.splitlines()), (key, rows)
        shown = app.screen.query_one(Markdown).source
        assert "HIT 10" in shown and "TOK/MIN" in shown  # top's columns ...
        assert "Cache layout" not in shown  # ... not the inspector's panels
        await press(pilot, "escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")


async def test_enter_on_an_empty_table_says_there_is_no_agent(tmp_path: Path) -> None:
    async with empty_top(tmp_path) as (app, pilot):
        await press(pilot, "enter")
        assert any("no agent to attach to" in str(n.message) for n in app._notifications), list(app._notifications)
        await pilot.press("q")
    assert app.return_value is None


async def test_an_unknown_theme_is_a_warning_not_a_traceback(tmp_path: Path) -> None:
    """`cp-inspect top --theme neon` ended in Textual's InvalidThemeError traceback (exit 1) before its
    first frame; the inspector's own --theme warned and showed the default. Now both do that."""
    from engine.probe.watch import FleetWatcher
    from inspector.top_app import TopApp

    app = TopApp(FleetWatcher(tmp_path / "none"), theme="neon", refresh_s=0.2)
    assert app.theme == "cp-dark"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        told = [str(n.message) for n in app._notifications]
        assert "unknown theme 'neon'; using dark (--theme takes dark, light or high-contrast)" in told, told
        await pilot.press("q")
    assert TopApp(FleetWatcher(tmp_path / "none"), theme="light").theme == "cp-light"


class _OneAgent:
    """What TopApp reads of a FleetWatcher, with one live agent in it."""

    skipped: list[str] = []
    error: str | None = None

    def snapshot(self) -> list[object]:
        from engine.fleet import AgentRow

        return [AgentRow(target="4242", pid=4242, model="gpt-4o", provider="openai", command="agent [x]",
                         state="live", detail="", turns=3, last_turn=2, pressure=0.4, tier="Normal",
                         hit_rate_recent=0.5, hit_rate=0.5, cost_usd=0.01, priced=True, alerts=0,
                         cache_breaks=0, tap_errors=0, tokens_per_min=100.0)]


async def test_a_filter_with_brackets_is_shown_as_typed(tmp_path: Path) -> None:
    """The summary line shows the filter: as markup, a filter of `[/]` ended the app (MarkupError, exit 1,
    Textual's traceback) and `[b]x` was styled away."""
    from inspector.top_app import TopApp

    app = TopApp(_OneAgent(), refresh_s=0.2)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        for typed in ("[/]", "[b]x"):
            await press(pilot, "slash")
            await pilot.press(*typed)
            await press(pilot, "enter")
            summary = str(app.query_one("#summary").render())
            assert f"filter {typed}" in summary and "total $0.0100 · sort" in summary, summary
            await press(pilot, "escape")
        assert app.is_running
        await pilot.press("q")


async def test_a_filter_that_hides_every_agent_says_so() -> None:
    """A filter matching no agent left an empty table and no word of why (Enter said "none is shown
    yet", as before any agent had been seen)."""
    from inspector.top_app import TopApp

    app = TopApp(_OneAgent(), refresh_s=0.2)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await press(pilot, "slash")
        await pilot.press(*"zzz")
        await press(pilot, "enter")
        summary = str(app.query_one("#summary").render())
        assert "filter zzz matches no agent (Esc clears it)" in summary, summary
        await press(pilot, "enter")
        told = [str(n.message) for n in app._notifications]
        assert "no agent to attach to: none matches the filter (Esc clears it)" in told, told
        await press(pilot, "escape")
        summary = str(app.query_one("#summary").render())
        assert "matches no agent" not in summary and "filter" not in summary, summary
        await pilot.press("q")


def test_a_routed_models_column_shows_the_model_not_the_router() -> None:
    """top's MODEL column kept the first 18 characters: "openrouter/anthrop" for every Claude run
    through OpenRouter. The routing prefix goes first, then the end is cut with an ellipsis."""
    from panels.fmt import model_in

    assert model_in("openrouter/anthropic/claude-3.5-sonnet", 18) == "…/claude-3.5-sonnet"
    assert model_in("openrouter/anthropic/claude-3.5-sonnet", 30) == "…/anthropic/claude-3.5-sonnet"
    assert model_in("openrouter/anthropic/claude-3.5-sonnet", 60) == "openrouter/anthropic/claude-3.5-sonnet"
    assert model_in("gpt-4o[/]", 5) == "gpt-4o[/]"  # "]" is no model's name: the caller cuts it whole
    assert model_in("a/claude-sonnet-4-20250514-very-long", 18) == "…/claude-sonnet-4-20250514-very-long"
    from dataclasses import replace

    from engine.fleet import AgentRow
    from panels.fleet_table import cells

    row = _OneAgent().snapshot()[0]
    assert isinstance(row, AgentRow)
    assert cells(replace(row, model="openrouter/anthropic/claude-3.5-sonnet"))[1].plain == "…/claude-3.5-sonn…"
    assert cells(replace(row, model="openrouter/openai/gpt-4o"))[1].plain == "…/openai/gpt-4o"
    assert cells(row)[1].plain == "gpt-4o"
