"""The Replayer's fold cache (cursor + checkpoints) must give exactly what a fold from scratch gives,
whatever order turns are asked in."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import engine.recording.replay as replay
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer
from engine.whatif import Overrides

DEMOS = sorted((Path(__file__).resolve().parents[2] / "demo_sessions").glob("*.cpsession"))


@pytest.mark.parametrize("path", DEMOS, ids=lambda p: p.stem)
def test_cached_replan_matches_a_fresh_fold(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "CHECKPOINT_EVERY", 4)  # many checkpoints in a short session
    events = [unpack_event(e) for e in RecordingReader.open(path).events()]
    cached = Replayer(events)
    turns = list(range(cached.turns))
    order = turns + turns[::-1] + random.Random(3).sample(turns, len(turns))
    ov = Overrides(window=6000)
    # A fold from scratch, once a turn (a fresh Replayer's answer does not depend on the order asked in;
    # the cached one's is what is tested, three times a turn, in three orders).
    want = {}
    for t in turns:
        fresh = Replayer(events)
        want[t] = (fresh.replan(t).serialized.request_sha256, fresh.replan(t, ov).trace["sections"])
    for t in order:
        assert cached.replan(t).serialized.request_sha256 == want[t][0]
        assert cached.replan(t, ov).trace["sections"] == want[t][1]
    assert cached.verify().ok


@pytest.mark.parametrize("path", DEMOS[:2], ids=lambda p: p.stem)
def test_lazily_read_journal_matches_a_full_fold(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FileSource reads the journal only as far as the turn asked for and extends its Replayer: content
    and re-plans must be what a Replayer over the whole journal gives, in any order."""
    from inspector.sources.file import FileSource

    monkeypatch.setattr(replay, "CHECKPOINT_EVERY", 4)
    monkeypatch.setattr(FileSource, "READ_AHEAD", 2)
    src = FileSource(path)
    full = Replayer([unpack_event(e) for e in RecordingReader.open(path).events()])
    turns = list(range(full.turns))
    for t in random.Random(5).sample(turns, len(turns)) + turns[::-1]:
        assert src._built(t).serialized.request_sha256 == full.replan(t).serialized.request_sha256
        assert src.replan(t, Overrides(window=6000))["sections"] == full.replan(t, Overrides(window=6000)).trace["sections"]
    src._load_events()  # everything, as a session-wide what-if asks for
    assert len(src.events) == len(full.events)


def test_file_source_summaries_and_full_traces() -> None:
    from inspector.sources.file import FileSource
    from inspector.timeline import summarize

    src = FileSource(DEMOS[0])
    chunks = list(src.load_chunks(first=3, size=7))
    summaries = [s for chunk in chunks for s in chunk.traces]
    # Each chunk says whether more follow (the reader posts it without decoding the next one first).
    assert [chunk.more for chunk in chunks] == [True] * (len(chunks) - 1) + [False]
    assert [len(chunk.traces) for chunk in chunks[:2]] == [3, 7]
    traces = src.load_initial()
    assert summaries == [summarize(t) for t in traces]
    assert all(src.full_trace(t["turn"]) == t for t in traces)
    assert len(src._traces) <= src.TRACE_CACHE
