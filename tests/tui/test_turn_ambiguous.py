"""A captured request that several sessions fit equally says so in the inspector.

The proxy and the taps file such a request with the earliest session and note it on the turn
(`conversation_ambiguous`, engine.capture.lineage): `cp-inspect explain` printed the note, the inspector
did not, so a person stepping through RUN.cpsession read that turn as surely this session's. Now the Tier
panel says it in a few words on that turn, and the status line's tooltip and `?` say it whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.capture.lineage import AMBIGUOUS_KEY, Placement, ambiguous_note
from engine.pipeline import Pipeline
from inspector.app import InspectorApp
from inspector.screens import HelpScreen
from inspector.sources.file import FileSource
from panels.tier import TierPanel
from tests.tui.conftest import settle


def _unsure(also: tuple[int, ...]) -> dict[str, Any]:
    """What the tap annotates (CaptureTap.filed_ambiguously)."""
    return {"session": 1, "also": list(also), "note": ambiguous_note(Placement(1, ambiguous=also), 1)}


def _recording(path: Path, unsure: dict[str, Any] | None, at: int = 1) -> Path:
    """Three turns recorded by the engine, turn `at` noted as the tap notes an ambiguous filing."""
    pipe = Pipeline("gpt-4o", "openai", 128_000, record=str(path))
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    for turn in range(3):
        pipe.next_request()
        if turn == at and unsure is not None:
            pipe.annotate(AMBIGUOUS_KEY, unsure)
        pipe.record_usage({"prompt_tokens": 40 + turn, "completion_tokens": 3})
        pipe.assistant(f"step {turn}")
        pipe.user(f"result {turn}")
    pipe.close()
    return path


def _tier_text(app: InspectorApp) -> str:
    tier = app.query_one("#tier", TierPanel)
    return "\n".join(line.plain for line in tier.lines(200))


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.parametrize(
    ("also", "short", "whole"),
    [
        (
            (2,),
            "unsure fits session 2 too (filed with 1)",
            "filed with session 1, but session 2 fits it as well",
        ),
        ((2, 3), "unsure fits sessions 2, 3 too (filed with 1)", "but sessions 2, 3 fit it as well"),
    ],
)
async def test_an_ambiguous_turn_says_so(
    tmp_path: Path, also: tuple[int, ...], short: str, whole: str, size: tuple[int, int]
) -> None:
    path = _recording(tmp_path / "RUN.cpsession", _unsure(also))
    journaled = FileSource(path).full_trace(1)["conversation_ambiguous"]  # (with the turn)
    assert journaled["also"] == list(also)
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("home")
        await settle(pilot)
        assert "unsure" not in _tier_text(app)  # turn 0: filed surely
        assert not [x for x in app.status_whole() if x.startswith("this turn: ")]
        await pilot.press("right")
        await settle(pilot)
        assert short in _tier_text(app), _tier_text(app)
        tier = app.query_one("#tier", TierPanel)
        shown = "\n".join(tier.render_line(y).text for y in range(tier.region.height))
        assert "unsure fits session" in shown, shown  # on screen, not only in the panel's lines
        said = [x for x in app.status_whole() if x.startswith("this turn: ")]
        assert len(said) == 1 and whole in said[0], app.status_whole()
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        rows = app.screen.compose_rows()
        assert any(whole in r for r in rows[: rows.index("## Keys")]), rows
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("right")  # the note is turn 1's alone
        await settle(pilot)
        assert "unsure" not in _tier_text(app)
        assert not [x for x in app.status_whole() if x.startswith("this turn: ")]
