"""A recording that fails to open gives its descriptor back once.

RecordingReader.open and RecordingWriter.resume closed the descriptor of a file they refused, but the
half-made object kept its number, and its finalizer (which closes a reader or writer dropped without
close()) closed that number again when collected. By then another file of the process may hold it: the
fresh-clone CI saw a recording being written in a later test fail with EBADF mid-write."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from engine.recording.cpsession import RecordingError, RecordingReader, RecordingWriter

# (conftest.young_heap: each gc.collect() here scans only what the test made)
pytestmark = pytest.mark.usefixtures("young_heap")


def _lowest_free() -> int:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    return fd


@pytest.mark.parametrize("how", ["reader", "resume"])
def test_a_refused_file_does_not_close_a_descriptor_it_no_longer_owns(tmp_path: Path, how: str) -> None:
    bad = tmp_path / "bad.cpsession"
    bad.write_bytes(b"this is not a recording, and no footer or frame can be read from it" * 4)
    other = tmp_path / "other.txt"
    other.write_bytes(b"another file of the process")
    gc.collect()
    number = _lowest_free()
    with pytest.raises(RecordingError) as info:  # kept: the half-made object lives in its traceback
        if how == "reader":
            RecordingReader.open(bad)
        else:
            RecordingWriter.resume(bad)
    fd = os.open(other, os.O_RDONLY)
    try:
        assert fd == number  # the number the refused file had (the lowest free), now another file's
        del info
        gc.collect()  # the half-made reader or writer is collected: its finalizer runs
        assert os.pread(fd, 7, 0) == b"another"  # still open: not closed a second time
    finally:
        os.close(fd)
