"""A cold far jump in a recording decompresses each of its chunks once (inspector/sources/file.py's
FileSource.replayer, engine/recording/replay.py's Replayer.advance).

A jump read the journal through the turn asked for (and the read-ahead) before the fold began; each text
read starts in the text window, which keeps the last TEXT_BUDGET bytes, so on a recording whose texts
exceed it the fold found the early ones gone and read them from the file again: a jump to the last turn of
a 218 MB recording fed ~14,000 chunks to zstd for 7,000 in the file (and held 436 MB at its peak). The
jump is now read and folded a checkpoint span at a time. What the test holds, on a recording made here
through the real engine whose texts are about twice the window: a cold jump to the last turn, to the
middle and on from there decompresses every chunk once, and builds the very turn a fold read whole builds."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.recording.cpsession import RecordingReader
from engine.recording.replay import CHECKPOINT_EVERY
from inspector.sources.file import FileSource
from tests.support.recordings import chunks_fed, record_reading_session

TURNS = 330
# The texts of a checkpoint span and the read-ahead fit (~3 KB a turn), those of the whole file do not.
BUDGET = 480 << 10
READ_AHEAD = 8


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_reading_session(tmp_path_factory.mktemp("jump") / "run.cpsession", TURNS, seed=5)


@pytest.fixture
def fed(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter[int]]:
    """Chunks fed to zstd, by file offset, from here on (every reader of the process)."""
    monkeypatch.setattr(FileSource, "TEXT_BUDGET", BUDGET)
    monkeypatch.setattr(FileSource, "READ_AHEAD", READ_AHEAD)
    with chunks_fed(monkeypatch) as counts:
        yield counts


def _shown(src: FileSource, turn: int) -> tuple[str, str, str]:
    built = src._built(turn)
    return (
        built.serialized.request_sha256,
        json.dumps(built.trace, sort_keys=True, default=str),
        json.dumps(src.full_trace(turn), sort_keys=True, default=str),
    )


def _whole_fold(recording: Path, turns: list[int]) -> dict[int, tuple[str, str, str]]:
    """What each turn shows when its jump is read whole before the fold (the code before)."""
    src = FileSource(recording)
    src.FOLD_STEPS = 1 << 20  # one step past any turn: the jump is read, then folded
    try:
        return {t: _shown(src, t) for t in turns}
    finally:
        src.close()


def test_the_recording_outgrows_the_window(recording: Path) -> None:
    with RecordingReader.open(recording) as r:
        assert r.turn_numbers() == list(range(TURNS))
        texts = sum(len(ev["data"]) for _, ev in r.event_frames() if ev.get("k") == "blob")
    assert texts > 1.5 * BUDGET and TURNS > 2 * CHECKPOINT_EVERY


@pytest.mark.parametrize("turns", [[TURNS - 1], [TURNS // 2], [TURNS // 2, TURNS - 1]])
def test_a_cold_far_jump_decompresses_each_chunk_once(
    recording: Path, fed: collections.Counter[int], turns: list[int]
) -> None:
    want = _whole_fold(recording, turns)
    fed.clear()
    src = FileSource(recording)
    try:
        got = {t: _shown(src, t) for t in turns}
        reads = src.texts.reads
    finally:
        src.close()
    assert fed and max(fed.values()) == 1, sorted(fed.values())[-5:]
    assert reads == 0  # every text the fold read was still in the window
    assert got == want


def test_the_whole_fold_read_the_early_chunks_again(recording: Path, fed: collections.Counter[int]) -> None:
    # What the test above guards against, on this recording: read whole, the early texts left the window.
    _whole_fold(recording, [TURNS - 1])
    assert max(fed.values()) >= 2
