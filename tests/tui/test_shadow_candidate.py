"""The Shadow tab names the candidate the way a person writes one (diff's inline settings), not as the
journal's Python dict with every unset field as None."""

from __future__ import annotations

from pathlib import Path

from engine.config import PipelineConfig
from engine.whatif import Overrides
from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from panels.shadow import ShadowPanel, describe_candidate
from tests.test_shadow import agent
from tests.tui.conftest import settle


async def test_the_shadow_tab_names_the_candidate_in_settings_a_person_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.cpsession"
    agent(path, Overrides(window=4000, gates={"drop_rounds": False}, thresholds={"compact_history": 0.7}))
    app = InspectorApp(FileSource(path), start_turn=15)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert app.query_one("#shadow", ShadowPanel).summary is not None
        svg = app.export_screenshot().replace("&#160;", " ")
        # It read "candidate: {'window': 4000, 'thresholds': {'compact_history': 0.7}, 'gates':
        # {'drop_rounds': False}, 'provider': None}".
        assert "candidate: window=4000, threshold.compact=0.7, gate.drop_rounds=off" in svg
        assert "None" not in svg and "{'" not in svg


def test_a_whole_configuration_is_named_by_its_model_provider_and_window() -> None:
    cfg = PipelineConfig("claude-sonnet-4", "anthropic", 64000).to_event()
    assert describe_candidate(cfg) == "a configuration of its own: claude-sonnet-4, anthropic, window 64000"
    assert describe_candidate({"window": None, "thresholds": None, "gates": None, "provider": None}) == \
        "the live settings"
