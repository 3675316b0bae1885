"""The app on real data: a what-if slider on a real recording matches `cp-inspect explain --budget`, and
the app attached to a real demo agent's probe socket follows it to the end and says it disconnected."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from inspector.app import InspectorApp
from inspector.cli import app as cli
from inspector.sources.file import FileSource
from inspector.sources.live import LiveSource
from panels.slider import Slider
from panels.whatif import WhatIfPanel
from tests.conftest import demo_agent
from tests.tui.conftest import settle

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


async def test_budget_slider_matches_explain_budget() -> None:
    app = InspectorApp(FileSource(DEMO), start_turn=17)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        slider = app.query_one("#budget", Slider)
        slider.focus()
        await pilot.press("right")  # one step up from the recorded window
        await settle(pilot)
        result = app.query_one("#whatif", WhatIfPanel).result
        assert result is not None
        actual, replanned = result
        budget = int(slider.value)
        assert budget != actual["limit"] and replanned["limit"] == budget
    out = CliRunner().invoke(
        cli, ["explain", str(DEMO), "--turn", "17", "--budget", str(budget), "--format", "json"]
    )
    assert out.exit_code == 0, out.output
    explained = json.loads(out.output)
    assert actual["turn"] == explained["turn"] == 17
    assert replanned["tier"] == explained["tier"]
    assert replanned["final_tokens"] == explained["final_tokens"]
    assert replanned["request_sha256"] == explained["request_sha256"]
    assert [s["tokens"] for s in replanned["sections"]] == [s["tokens"] for s in explained["sections"]]


async def test_app_attached_to_a_live_agent_until_it_disconnects(tmp_path: Path) -> None:
    with demo_agent(tmp_path, turns=6, delay=0.4) as child:
        source = LiveSource.when_serving(child, wait_s=30)
        app = InspectorApp(source)
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):
                await pilot.pause(0.1)
                if app.disconnected:
                    break
            assert app.disconnected, "the app never noticed the agent leaving"
            assert len(app.timeline) == 6
            assert app.timeline.current == 5  # it followed the newest turn
