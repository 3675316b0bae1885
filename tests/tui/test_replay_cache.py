"""The Replayer's fold cache (cursor + checkpoints) must give exactly what a fold from scratch gives,
whatever order turns are asked in."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import engine.replay as replay
from engine.journal import unpack_event
from engine.recording import RecordingReader
from engine.replay import Overrides, Replayer

DEMOS = sorted((Path(__file__).resolve().parents[2] / "demo_sessions").glob("*.cpsession"))


@pytest.mark.parametrize("path", DEMOS, ids=lambda p: p.stem)
def test_cached_replan_matches_a_fresh_fold(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "CHECKPOINT_EVERY", 4)  # many checkpoints in a short session
    events = [unpack_event(e) for e in RecordingReader.open(path).events()]
    cached = Replayer(events)
    turns = list(range(cached.turns))
    order = turns + turns[::-1] + random.Random(3).sample(turns, len(turns))
    ov = Overrides(window=6000)
    for t in order:
        fresh = Replayer(events)
        assert cached.replan(t).serialized.request_sha256 == fresh.replan(t).serialized.request_sha256
        assert cached.replan(t, ov).trace["sections"] == fresh.replan(t, ov).trace["sections"]
    assert cached.verify().ok
