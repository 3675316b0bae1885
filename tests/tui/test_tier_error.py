"""A turn whose call got no answer (an upstream 429 or 500, a broken stream) says so in the Tier panel,
on screen at the sizes people use: the error was the panel's last line, under its edge at 120x40 (the
token scale's own row above it) and at 80x24 (three rows), so such a turn looked like any other but for
the timeline's "!" (seen with `cp-inspect run` against an upstream answering 429). The 80x24 case fails on
the old code; at 120x40 the old panel hid the error only when the planned row had no room for the scale."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Pipeline
from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from panels.tier import TierPanel
from tests.tui.conftest import settle


def _turn(pipe: Pipeline, error: tuple[str, str] | None = None) -> None:
    """One call: answered (its usage recorded), or failed with `error` (code, message)."""
    pipe.user("go on")
    req = pipe.next_request()
    if error is None:
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
    else:
        pipe.record_error(*error)
    pipe.assistant("ok")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_an_error_turn_says_its_error_on_screen(tmp_path: Path, size: tuple[int, int]) -> None:
    path = tmp_path / "errors.cpsession"
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=200_000, record=str(path))
    pipe.identity("You are careful.")
    _turn(pipe)
    _turn(pipe, ("rate_limit_error", "stand-in says 429"))  # turn 1: the upstream's 429
    _turn(pipe, ("error", "cp-inspect proxy: could not reach the upstream"))
    _turn(pipe)
    pipe.close()
    app = InspectorApp(FileSource(path), start_turn=1)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        tier = app.query_one("#tier", TierPanel)
        shown = " ".join(tier.render_line(y).text.strip() for y in range(tier.region.height))
        assert "error rate_limit_error: stand-in says 429" in shown, shown  # (wrapped at 80 columns)
        await pilot.press("right")  # turn 2: a failure of no known kind, as an unreachable upstream's
        await settle(pilot)
        shown = " ".join(tier.render_line(y).text.strip() for y in range(tier.region.height))
        assert "error cp-inspect proxy: could not reach" in shown, shown  # it read "error error: cp-inspect"
        await pilot.press("right")  # the next turn was answered: no error there
        await settle(pilot)
        shown = " ".join(tier.render_line(y).text.strip() for y in range(tier.region.height))
        assert "error" not in shown and "why" in shown, shown
