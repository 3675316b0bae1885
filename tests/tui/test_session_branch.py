"""A captured session that shares another's opening says so in the inspector.

The proxy and the taps file a restart of the agent on the same task (or another attempt, or a step asked
again) as a session of its own, noted on its first turn (`conversation_branch`, engine.capture.lineage):
`cp-inspect explain` and the proxy's output said it, the inspector did not. A person replaying
RUN-s2.cpsession saw a session like any other. Now the Tier panel says it on that turn, and the status
line's tooltip and `?` ("This session") say it whole on every turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.capture.lineage import BRANCH_KEY
from engine.pipeline import Pipeline
from inspector.app import InspectorApp
from inspector.screens import HelpScreen
from inspector.sources.file import FileSource
from panels.tier import TierPanel
from tests.tui.conftest import settle

RESTART = {"kind": "same_opening", "session": 1, "turn": 0, "at_message": 2}
FORK = {"kind": "fork", "session": 3, "turn": 2, "at_message": 6}


def _recording(path: Path, branch: dict[str, Any] | None) -> Path:
    """Three turns recorded by the engine, the first noted as the tap notes a branched session's."""
    pipe = Pipeline("gpt-4o", "openai", 128_000, record=str(path))
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    for turn in range(3):
        pipe.next_request()
        if turn == 0 and branch is not None:
            pipe.annotate(BRANCH_KEY, branch)
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
    ("branch", "short", "whole"),
    [
        (RESTART, "new session same opening as session 1", "same opening as session 1: a new conversation"),
        (FORK, "new session forked from session 3 at message 6", "forked from session 3 at message 6 (the"),
    ],
)
async def test_a_branched_session_says_so(
    tmp_path: Path, branch: dict[str, Any], short: str, whole: str, size: tuple[int, int]
) -> None:
    path = _recording(tmp_path / "RUN-s2.cpsession", branch)
    assert FileSource(path).full_trace(0)["conversation_branch"] == branch  # (journaled with the turn)
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("home")
        await settle(pilot)
        assert short in _tier_text(app), _tier_text(app)
        tier = app.query_one("#tier", TierPanel)
        shown = "\n".join(tier.render_line(y).text for y in range(tier.region.height))
        assert "new session" in shown, shown  # on screen, not only in the panel's lines
        await pilot.press("right")  # the note is the first turn's: the next says nothing of it
        await settle(pilot)
        assert "new session" not in _tier_text(app)
        said = [x for x in app.status_whole() if x.startswith("this session: ")]
        assert len(said) == 1 and whole in said[0], app.status_whole()  # on every turn
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        rows = app.screen.compose_rows()
        assert any(whole in r for r in rows[: rows.index("## Keys")]), rows


async def test_a_session_of_its_own_says_nothing(tmp_path: Path) -> None:
    path = _recording(tmp_path / "RUN.cpsession", None)
    app = InspectorApp(FileSource(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("home")
        await settle(pilot)
        assert "new session" not in _tier_text(app)
        assert not [x for x in app.status_whole() if x.startswith("this session")]
