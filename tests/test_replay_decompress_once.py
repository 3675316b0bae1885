"""Stepping through a recording decompresses each of its chunks once (inspector/sources/file.py,
engine/recording/text_window.py's hold_trace).

The replay reads the journal ahead of its fold with one reader, and read each turn's trace again with
another (the text window's, for the fold) and once more through the first for the turn on screen
(`full_trace`): the second read decompressed the chunk again, the third decompressed its zstd stream
from the stream's start (the reader's stream had moved on), and threw the first reader's stream off
for its next read-ahead. Stepping 2,000 turns of a 12,000-turn recording fed 123,133 chunks to zstd for
2,256 in the file. What the test holds, on a recording made here through the real engine: stepping as
the app does (the fold's build and the full trace of each turn), every chunk is decompressed once, and
what is shown is what the recording holds."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from engine.recording.cpsession import RecordingReader
from engine.recording.journal import trace_of
from inspector.sources.file import FileSource
from tests.support.recordings import chunks_fed, record_reading_session

TURNS = 300


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_reading_session(tmp_path_factory.mktemp("once") / "run.cpsession", TURNS, seed=3)


def test_stepping_as_the_app_does_decompresses_each_chunk_once(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RecordingReader.open(recording) as r:
        streams = len(r._streams)
        turns = r.turn_numbers()
        recorded = {t: r.turn(t)["trace"] for t in turns}
    assert streams >= 3 and len(turns) == TURNS  # random access into a stream has work to repeat
    with chunks_fed(monkeypatch) as fed:
        src = FileSource(recording)
        try:
            for t in turns:
                built = src._built(t)
                shown = src.full_trace(t)
                assert shown == recorded[t] and trace_of({"trace": shown}) is shown
                assert built.trace["final_tokens"] == recorded[t]["final_tokens"]
            assert src.texts.trace_reads == 0
        finally:
            src.close()
    assert max(fed.values()) == 1, sorted(fed.values())[-5:]


def _decoded_held() -> int:
    """Bytes still held of what the recording reader decoded (events, texts, traces)."""
    gc.collect()
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, "*/engine/recording/frames.py")]
    )
    return sum(stat.size for stat in snap.statistics("filename"))


def test_the_journal_a_replay_holds_does_not_grow_with_the_turns_stepped(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each event but the texts and traces was held decoded, ~4 KB a turn (52 MB over 12,000 turns): the
    # journal is paged now (engine/recording/paged_events.py), the frames of its recent turns decoded.
    monkeypatch.setattr(FileSource, "READ_AHEAD", 16)
    monkeypatch.setattr(FileSource, "TEXT_BUDGET", 64 << 10)  # ~20 turns of texts
    src = FileSource(recording)
    try:
        tracemalloc.start()
        try:
            for t in range(100):
                src._built(t)
            at_100 = _decoded_held()
            want = {t: src._built(t).serialized.request_sha256 for t in range(100, TURNS)}
            at_end = _decoded_held()
        finally:
            tracemalloc.stop()
        per_turn = (at_end - at_100) / (TURNS - 100)
        assert per_turn < 1_000, f"{per_turn:,.0f} bytes a turn held"
        # Stepping back reads the pages again from the file, and builds the same requests as a fresh replay.
        back = [TURNS - 1, 40, 170, 3]
        again = {t: src._built(t).serialized.request_sha256 for t in back}
        fresh = FileSource(recording)
        try:
            assert again == {t: fresh._built(t).serialized.request_sha256 for t in back}
            assert {t: want[t] for t in (170, TURNS - 1)} == {t: again[t] for t in (170, TURNS - 1)}
        finally:
            fresh.close()
        assert src.events[0]["k"] == "session" and len(src.events) == len(fresh.events)
    finally:
        src.close()
