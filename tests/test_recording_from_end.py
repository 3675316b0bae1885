"""A recording without footer (its writer still at work: what a follower attaches to) opened from its end
(RecordingReader.open(from_end=True), cpsession_index._scan_from_end): the newest stream's chunks and a
prefix of each earlier stream's first chunk are read, not every frame, and the index is the one a scan of
the whole file builds. Files written before session 51 (tests/fixtures/v2_before_51, made by that
session's start's writer), cut off, damaged or resumed from an old file are read as before."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from engine.recording.cpsession import STREAM_RESET_RAW, RecordingError, RecordingReader, RecordingWriter

OLD = Path(__file__).resolve().parent / "fixtures" / "v2_before_51" / "footerless.cpsession"
HEADER = {"model": "claude-sonnet-4", "provider": "anthropic", "start_time": 1.0}


def _text(t: int) -> str:
    return "".join(f"step {t} line {i}: {'ok' if i % 3 else 'retry'}\n" for i in range(1600))


def _append_turns(w: RecordingWriter, turns: range) -> None:
    for t in turns:
        text = _text(t)
        w.append({"k": "blob", "h": hashlib.sha256(text.encode()).hexdigest(), "data": text})
        w.append({"k": "turn", "turn": t, "trace": {"turn": t, "final_tokens": 100 + t, "sections": []}})


def _footerless(path: Path, turns: int = 40) -> Path:
    with RecordingWriter(path, HEADER) as w:
        _append_turns(w, range(turns))
    with RecordingReader.open(path) as r:
        end = r.data_end
    os.truncate(path, end)
    return path


def _index(r: RecordingReader) -> list[tuple[int, tuple[int, int]]]:
    return [(t, r.turn_frame(t)) for t in r.turn_numbers()]


def _same_as_a_whole_scan(path: Path) -> RecordingReader:
    whole = RecordingReader.open(path)
    quick = RecordingReader.open(path, from_end=True)
    assert not quick.finished and quick.damage is None and whole.damage is None
    assert _index(quick) == _index(whole)
    assert quick.data_end == whole.data_end == path.stat().st_size
    whole.close()
    return quick


def test_a_footerless_file_is_indexed_from_its_end_reading_a_small_part(tmp_path: Path) -> None:
    path = _footerless(tmp_path / "agent.cpsession", turns=60)
    size = path.stat().st_size
    assert 60 * len(_text(0)) > 4 * STREAM_RESET_RAW  # (several streams to walk back through)
    with RecordingReader.open(path) as whole:
        assert whole.bytes_read >= size  # (the scan reads every frame)
    quick = _same_as_a_whole_scan(path)
    assert quick.bytes_read < 0.35 * size  # the newest stream, and a prefix of each earlier one's start
    # Random access as from any index: a turn of the first stream, one in the middle, the newest.
    for t in (0, 1, 29, 59):
        assert quick.turn(t)["trace"]["final_tokens"] == 100 + t
    assert quick.blob(hashlib.sha256(_text(3).encode()).hexdigest()) == _text(3)
    quick.close()


def test_following_goes_on_from_an_index_read_from_the_end(tmp_path: Path) -> None:
    path = tmp_path / "agent.cpsession"
    w = RecordingWriter(path, HEADER)
    _append_turns(w, range(30))  # each turn's chunk written as it closes: the file a follower finds
    r = RecordingReader.open(path, from_end=True)
    assert r.turn_numbers() == list(range(30)) and r.damage is None
    _append_turns(w, range(30, 45))
    new = [ev["turn"] for ev in r.refresh() if ev["k"] == "turn"]
    assert new == list(range(30, 45)) and r.turn_numbers() == list(range(45))
    assert r.turn(40)["trace"]["final_tokens"] == 140
    w.close()
    r.refresh()
    assert r.finished
    r.close()


def test_a_file_written_before_the_stream_index_is_scanned_as_before(tmp_path: Path) -> None:
    # Written by session 51's start (its chunks name no stream start): the whole scan, the same index.
    path = tmp_path / "old.cpsession"
    shutil.copy(OLD, path)
    quick = _same_as_a_whole_scan(path)
    assert quick.turn_numbers() == list(range(30))
    assert quick.bytes_read >= path.stat().st_size
    assert quick.turn(17)["trace"]["final_tokens"] == 117
    quick.close()


def test_an_old_file_resumed_by_this_writer_is_read_from_its_end_to_the_old_part(tmp_path: Path) -> None:
    path = tmp_path / "resumed.cpsession"
    shutil.copy(OLD, path)
    old_size = path.stat().st_size
    with RecordingWriter.resume(path) as w:
        _append_turns(w, range(30, 90))
    with RecordingReader.open(path) as r:
        end = r.data_end
    os.truncate(path, end)
    quick = _same_as_a_whole_scan(path)
    assert quick.turn_numbers() == list(range(90))
    # The old part scanned whole, the new one walked back through: less than the file.
    assert quick.bytes_read < old_size + 0.5 * (path.stat().st_size - old_size)
    assert quick.turn(5)["trace"]["final_tokens"] == 105 and quick.turn(80)["trace"]["final_tokens"] == 180
    quick.close()


def test_a_file_cut_mid_frame_is_scanned_whole_and_its_tail_reported(tmp_path: Path) -> None:
    path = _footerless(tmp_path / "cut.cpsession")
    os.truncate(path, path.stat().st_size - 5)  # the agent killed while writing its newest chunk
    whole = RecordingReader.open(path)
    quick = RecordingReader.open(path, from_end=True)
    assert quick.damage is not None and quick.damage == whole.damage
    assert "incomplete" in quick.damage.message
    assert _index(quick) == _index(whole) and quick.turn_numbers() == list(range(39))
    whole.close()
    quick.close()


def test_damage_before_the_newest_stream_is_found_where_it_is_read(tmp_path: Path) -> None:
    path = _footerless(tmp_path / "damaged.cpsession")
    with RecordingReader.open(path) as r:
        pos, end = r.turn_frame(2)
    data = bytearray(path.read_bytes())
    data[end - 20] ^= 0xFF  # in turn 2's chunk's data: its checksum no longer holds
    path.write_bytes(bytes(data))
    with pytest.raises(RecordingError, match=f"at offset {pos}"):
        RecordingReader.open(path)  # a scan of every frame meets it on opening
    quick = RecordingReader.open(path, from_end=True)  # as a file with a footer: when the turn is read
    assert quick.turn_numbers() == list(range(40))
    assert quick.turn(39)["trace"]["final_tokens"] == 139
    with pytest.raises(RecordingError, match=f"at offset {pos}"):
        quick.turn(2)
    quick.close()


@pytest.mark.parametrize("where", ["a chunk in the middle", "past the end", "the largest offset"])
def test_a_tail_naming_a_wrong_stream_start_is_scanned_whole(where: str, tmp_path: Path) -> None:
    path = _footerless(tmp_path / "wrong.cpsession")
    with RecordingReader.open(path) as r:
        middle = r.turn_frame(20)[0]  # a chunk, not the start of its stream
    named = {"a chunk in the middle": middle, "past the end": path.stat().st_size + 10}.get(where, 2**64 - 1)
    data = bytearray(path.read_bytes())
    data[-8:] = named.to_bytes(8, "big")  # (the newest chunk's own field: its checksum fails too)
    path.write_bytes(bytes(data))
    with pytest.raises(RecordingError) as whole:
        RecordingReader.open(path)
    with pytest.raises(RecordingError) as quick:
        RecordingReader.open(path, from_end=True)
    assert quick.value.offset == whole.value.offset and "checksum" in str(quick.value)


def test_a_chunk_lost_to_an_interrupt_leaves_the_next_one_a_stream_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the first chunk was written (salvage's writer, say): close() wrote the rest as a
    chunk of a stream with no start (IndexError since the chunks name their stream's start)."""
    path = tmp_path / "interrupted.cpsession"
    w = RecordingWriter(path, HEADER)
    real = os.write
    calls = [0]

    def interrupted(fd: int, data: bytes) -> int:
        calls[0] += 1
        if calls[0] == 1:
            raise KeyboardInterrupt
        return real(fd, data)

    monkeypatch.setattr(os, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _append_turns(w, range(1))
    monkeypatch.setattr(os, "write", real)
    _append_turns(w, range(1, 3))
    w.close()
    with RecordingReader.open(path) as r:
        assert r.turn_numbers() == [1, 2] and r.turn(2)["trace"]["final_tokens"] == 102


def test_a_stream_index_naming_a_turn_before_turn_0_is_refused() -> None:
    # A flipped byte in a stream start's index read as turn -1: the from-end index took it without a
    # word (the whole scan refused the file); refused, from_end scans the file whole instead.
    from engine.recording.cpsession_format import prev_stream_index

    assert prev_stream_index([100, [0, 1, 1], [0, 50, 50]], 1000) == (100, [0, 1, 2], [100, 150, 200])
    with pytest.raises(ValueError, match="before turn 0"):
        prev_stream_index([100, [-1, 1, 1], [0, 50, 50]], 1000)
