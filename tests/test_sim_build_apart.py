"""The build pass's system blocks of each turn's whole conversation (the peers' view): taken by section
runs (BlockSerializer.blocks_apart), not picked out of the whole conversation's Blocks one by one every
turn (a 3,000-turn what-if: ~18 million Block reads). Differential: every build's others are exactly the
Blocks not of the history section, in order (the same objects), at a provider with markers and one
without, with every policy column running; the whole conversation's Blocks are not made (whole=False)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.sim.blocks import BlockSerializer
from engine.sim.simulate import SimSettings, simulate_events
from engine.sim.simulate_read import load_recording_events
from tests.support.recordings import record_coding_session


def _record(path: Path, turns: int) -> None:
    record_coding_session(
        path,
        turns,
        arguments=lambda t: {"t": t},
        output=lambda t: f"output of step {t} " + "x" * (t % 50) * 20,
    )


@pytest.mark.parametrize("provider", ["deepseek", "anthropic"])
def test_the_system_blocks_taken_by_section_are_the_blocks_not_of_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    path = tmp_path / "a.cpsession"
    _record(path, 120)
    apart = BlockSerializer.blocks_apart
    checked: list[int] = []

    def held_to_the_whole(
        self: BlockSerializer,
        asm: Any,
        markers: Any,
        measure: Any,
        section: str,
        whole: bool = True,
        own: Any = None,
    ) -> Any:
        blocks, others = apart(self, asm, markers, measure, section, whole, own)
        # The build pass asks for the others alone (whole=False): no list of the whole conversation's
        # Blocks is made, and the others are those of the whole request laid out again.
        assert not whole and blocks == []
        every = self.blocks(asm, markers, measure)
        want = tuple(b for b in every if b.section != section)
        assert others == want and all(map(lambda a, b: a is b, others, want))
        checked.append(len(others))
        return blocks, others

    monkeypatch.setattr(BlockSerializer, "blocks_apart", held_to_the_whole)
    events = load_recording_events(path)[0]
    settings = SimSettings(policies=["all"], window=8_000)
    if provider == "anthropic":
        settings = SimSettings(policies=["all"], window=8_000, provider="anthropic", model="claude-sonnet-4")
    report = simulate_events(events, settings)
    assert report.simulated_turns == 120
    assert len(checked) == 120 and min(checked) > 0
