"""The shipped demo recordings read as the engine words things now: recorded by 0.1.0, their traces said
"1 turns" and "1 markers" (the engine counts through engine.wording.counted since), and replay and
explain show a recording's traces as they were recorded. Re-recorded with the same request hashes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine.recording.cpsession import RecordingReader

DEMO = Path(__file__).resolve().parent.parent / "demo_sessions"
# A count of one before a plural noun, as the old traces had it ("expected to last 1 turns").
ONE_PLURAL = re.compile(
    r"(?<![\d.,$])\b1 (turns|markers|calls|items|events|rounds|sections|messages|requests)\b"
)


@pytest.mark.parametrize("name", ["scout-anthropic", "scout-openai", "scout-gates-closed"])
def test_demo_traces_count_one_in_words(name: str) -> None:
    with RecordingReader.open(DEMO / f"{name}.cpsession") as r:
        turns = r.turn_numbers()
        assert len(turns) == 40
        said = [(t, m.group(0)) for t in turns for m in ONE_PLURAL.finditer(json.dumps(r.turn(t)["trace"]))]
    assert not said, said[:5]
