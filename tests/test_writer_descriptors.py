"""A RecordingWriter gives its descriptor (and its lock on the file) back when dropped without close().

It held a bare descriptor with no finalizer: a writer let go without close() kept the descriptor, and the
flock that keeps a second writer out, until the process ended. Collected, it now closes the descriptor
and writes nothing: the events buffered since the last turn are dropped and no footer is written, so the
file is what a killed writer leaves (every turn appended before it, read by rebuilding the index).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from engine.recording.cpsession import RecordingReader, RecordingWriter

# (conftest.young_heap: each gc.collect() here scans only what the test made)
pytestmark = pytest.mark.usefixtures("young_heap")


def _open_descriptors() -> int:
    gc.collect()  # what is only waiting for collection is not a leak
    return len(os.listdir("/proc/self/fd"))


# The count is the whole process's: something else of it (another test's thread, a library's first use)
# may open a descriptor meanwhile. A leak is one per writer, 40 here: a few others are allowed.
OTHERS = 3


def _turn(n: int) -> dict:
    return {"k": "turn", "turn": n, "trace": {"turn": n, "final_tokens": 10 * n}}


def test_writers_dropped_without_close_give_their_descriptors_back(tmp_path: Path) -> None:
    before = _open_descriptors()
    for i in range(40):
        w = RecordingWriter(tmp_path / f"r{i}.cpsession", {"model": "m"})
        w.append(_turn(0))
        del w  # dropped without close()
    assert _open_descriptors() <= before + OTHERS  # it was before + 40


def test_a_dropped_writer_leaves_every_turn_and_no_half_frame(tmp_path: Path) -> None:
    path = tmp_path / "dropped.cpsession"
    w = RecordingWriter(path, {"model": "m"})
    w.append({"k": "blob", "h": "a" * 64, "text": "the system prompt"})
    w.append(_turn(0))
    w.append(_turn(1))
    written = path.stat().st_size
    # Buffered for the next chunk (a turn flushes its chunk; this followed the last turn): not written.
    w.append({"k": "usage", "turn": 1, "usage": {"input_tokens": 7}})
    del w
    gc.collect()
    assert path.stat().st_size == written  # nothing was written on the way out: no footer, no part of a frame
    with RecordingReader.open(path) as r:
        assert r.damage is None  # read as a killed writer's file: the index rebuilt, nothing cut off
        assert r.turn_numbers() == [0, 1]
        assert [e["k"] for e in r.events()] == ["blob", "turn", "turn"]  # the buffered usage is gone
    # The lock went with the descriptor: the file can be appended to again in this same process (flock
    # is per open file: the leaked descriptor kept a second writer out with "being written by another").
    w2 = RecordingWriter.resume(path)
    w2.append(_turn(2))
    w2.close()
    with RecordingReader.open(path) as r:
        assert r.turn_numbers() == [0, 1, 2]


def test_a_closed_writer_collected_never_closes_a_descriptor_it_no_longer_owns(tmp_path: Path) -> None:
    w = RecordingWriter(tmp_path / "closed.cpsession", {"model": "m"})
    w.append(_turn(0))
    w.close()
    fd = os.open(tmp_path / "closed.cpsession", os.O_RDONLY)  # likely the number the writer had
    try:
        del w
        gc.collect()
        assert os.pread(fd, 4, 0)  # still open
    finally:
        os.close(fd)


def test_a_parked_writer_collected_leaves_its_finished_file(tmp_path: Path) -> None:
    path = tmp_path / "parked.cpsession"
    w = RecordingWriter(path, {"model": "m"})
    w.append(_turn(0))
    assert w.park()
    size = path.stat().st_size
    del w
    gc.collect()
    assert path.stat().st_size == size
    with RecordingReader.open(path) as r:
        assert r.turn_numbers() == [0] and r.damage is None
