"""A recording writer interrupted while it compresses a chunk (Ctrl-C: the KeyboardInterrupt lands between
two bytecodes, here right after the zstd stream took the chunk's bytes and before they were flushed out)
closes a file that reads back whole: the events that were buffered go into a zstd stream started afresh.
On the first chunk, close() raised IndexError at 8707d31 (the stream begun, no start written: `cp-inspect
salvage` interrupted said a traceback, not exit 130; 9be1939); on a later one the same stream was fed
the bytes again and the file held that turn's events twice, read back without a word (events() listed
the turn twice, the index once)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from engine.recording import cpsession_writer
from engine.recording.cpsession import RecordingReader, RecordingWriter
from engine.recording.cpsession_format import zstandard


class _Interrupted:
    """zstandard as the writer uses it, its `nth` compress() call (0: the first) interrupted just after
    the real stream took the bytes: a Ctrl-C before the block is flushed."""

    COMPRESSOBJ_FLUSH_BLOCK = zstandard.COMPRESSOBJ_FLUSH_BLOCK

    def __init__(self, nth: int) -> None:
        self.calls = 0
        self.nth = nth

    def ZstdCompressor(self, **kw: Any) -> Any:  # noqa: N802 (zstandard's name)
        outer = self

        class Compressor:
            def compressobj(self) -> Any:
                real = zstandard.ZstdCompressor(**kw).compressobj()

                class Obj:
                    def compress(self, data: bytes) -> bytes:
                        out = real.compress(data)
                        outer.calls += 1
                        if outer.calls - 1 == outer.nth:
                            raise KeyboardInterrupt
                        return out

                    def flush(self, mode: int) -> bytes:
                        return real.flush(mode)

                return Obj()

        return Compressor()


def _turn(w: RecordingWriter, t: int) -> None:
    text = f"output of step {t}\n" * 200
    w.append({"k": "blob", "h": hashlib.sha256(text.encode()).hexdigest(), "data": text})
    w.append({"k": "turn", "turn": t, "trace": {"turn": t, "final_tokens": 100 + t, "sections": []}})


@pytest.mark.parametrize("nth", [0, 3])
def test_a_chunk_interrupted_while_compressed_is_written_again_in_a_new_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    path = tmp_path / "interrupted.cpsession"
    monkeypatch.setattr(cpsession_writer, "zstandard", _Interrupted(nth))
    w = RecordingWriter(path, {"model": "claude-sonnet-4", "provider": "anthropic"})
    for t in range(nth):
        _turn(w, t)
    with pytest.raises(KeyboardInterrupt):
        _turn(w, nth)  # (its turn event's flush is the interrupted one)
    for t in range(nth + 1, nth + 4):
        _turn(w, t)
    w.close()
    with RecordingReader.open(path) as r:
        assert r.damage is None and r.finished
        assert r.turn_numbers() == list(range(nth + 4))
        turns = [ev["turn"] for ev in r.events() if ev["k"] == "turn"]
        assert turns == list(range(nth + 4))  # each once: the interrupted turn's events not twice
        assert r.turn(nth)["trace"]["final_tokens"] == 100 + nth


def test_a_writer_interrupted_on_its_first_chunk_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Closed at once, as `salvage` closes its writer when Ctrl-C ends its loop: the buffered turn is written
    # as the file's first chunk, a stream start (close() raised IndexError).
    path = tmp_path / "first.cpsession"
    monkeypatch.setattr(cpsession_writer, "zstandard", _Interrupted(0))
    w = RecordingWriter(path, {"model": "claude-sonnet-4", "provider": "anthropic"})
    with pytest.raises(KeyboardInterrupt):
        _turn(w, 0)
    w.close()
    with RecordingReader.open(path) as r:
        assert r.turn_numbers() == [0] and r.damage is None and r.finished
