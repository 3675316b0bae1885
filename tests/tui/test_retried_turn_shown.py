"""A call the SDK retried (an upstream 429, then its reply) says so in the inspector, as `explain` does.

Seen using `cp-inspect run` on an agent with the real anthropic SDK against a stand-in answering 429
before its reply: the proxy keeps the failed attempts on the turn (engine/capture/proxy/retries.py),
`explain` and `simulate` said so, but the TUI showed such a turn as any other (no line in the Tier
panel, no stop for `n`), so a person watching a rate-limited agent saw nothing of it. Here the real SDK
goes through the real proxy to the stand-in (tests/support/retried_calls.py); the recording is opened as
`replay` (and an attached inspector following it) opens it. Each recording is made once for the module:
both sizes read the same file (a FileSource only reads it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from inspector.timeline import interesting_reasons
from panels.tier import TierPanel
from tests.support.retried_calls import record_all_failed, record_retried
from tests.tui.conftest import settle


def _recorded(tmp_path_factory: pytest.TempPathFactory, record: Callable[[Path], Path]) -> Path:
    where = tmp_path_factory.mktemp(record.__name__)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_RUNTIME_DIR", str(where))  # the proxy's probe socket, in this test's directory
        return record(where)


@pytest.fixture(scope="module")
def retried_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _recorded(tmp_path_factory, record_retried)


@pytest.fixture(scope="module")
def all_failed_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _recorded(tmp_path_factory, record_all_failed)


def _tier_text(app: InspectorApp) -> str:
    tier = app.query_one("#tier", TierPanel)
    return " ".join(tier.render_line(y).text.strip() for y in range(tier.region.height))


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_retried_turn_says_so_in_the_tier_panel(retried_recording: Path, size: tuple[int, int]) -> None:
    app = InspectorApp(FileSource(retried_recording), start_turn=0)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert "retried" not in _tier_text(app)
        await pilot.press("right")
        await settle(pilot)
        shown = _tier_text(app)
        assert "retried after HTTP 429" in shown, shown
        assert "error" not in shown, shown  # the call was answered in the end
        await pilot.press("right")
        await settle(pilot)
        assert "retried" not in _tier_text(app)
        # `n` stops there (the stand-in's usage makes every turn an alert's too: asked of the summaries)
        said = [interesting_reasons(t, None) for t in app.timeline.traces]
        assert ["retried" in r for r in said] == [False, True, False], said


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_turn_whose_every_attempt_failed_keeps_its_retried_line_in_view(
    all_failed_recording: Path, size: tuple[int, int]
) -> None:
    """The error (the API's JSON body) wrapped over every row of the panel and pushed "retried after HTTP
    429, HTTP 429" under its edge at both sizes. It is cut to the rows left, with "…", and whole in the
    panel's tooltip."""
    app = InspectorApp(FileSource(all_failed_recording), start_turn=1)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        tier = app.query_one("#tier", TierPanel)
        rows = [tier.render_line(y).text.rstrip() for y in range(tier.size.height)]  # the rows in view
        assert any(r.startswith("retried after HTTP 429, HTTP 429") for r in rows), rows
        assert rows[1].startswith("error HTTP 429"), rows
        assert "stand-in says 429" not in " ".join(rows) and rows[-2].endswith("…"), rows  # cut, and says so
        assert "stand-in says 429" in str(tier.tooltip), tier.tooltip
        await pilot.press("left")  # an answered turn: no tooltip left behind
        await settle(pilot)
        assert tier.tooltip is None
