"""A RecordingReader gives its descriptor back: closed, used as a context manager, or simply dropped.

The full suite's process once passed 1,024 open descriptors (select() in tests/tui/test_terminal_driver.py
raised 'filedescriptor out of range'): a reader holds a bare descriptor, and one dropped without close()
kept it until the process ended. Every helper that read a recording and let the reader go leaked one.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from engine.recording.cpsession import RecordingReader
from engine.sim.simulate_read import load_recording_events

# (conftest.young_heap: each gc.collect() here scans only what the test made)
pytestmark = pytest.mark.usefixtures("young_heap")

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def _open_descriptors() -> int:
    gc.collect()  # what is only waiting for collection is not a leak
    return len(os.listdir("/proc/self/fd"))


# The count is the whole process's: something else of it (another test's thread, a library's first use)
# may open a descriptor meanwhile. A leak is one per reader, tens here: a few others are allowed.
OTHERS = 3


def test_readers_dropped_without_close_give_their_descriptors_back() -> None:
    before = _open_descriptors()
    for _ in range(50):
        r = RecordingReader.open(DEMO)
        assert r.header  # used, then dropped without close()
        del r
    assert _open_descriptors() <= before + OTHERS  # it was before + 50


def test_a_closed_or_dropped_reader_never_closes_a_descriptor_it_no_longer_owns() -> None:
    r = RecordingReader.open(DEMO)
    r.close()
    # The number is free again; the next file opened takes it. Collecting the closed reader must not close
    # that file behind its owner's back.
    fd = os.open(DEMO, os.O_RDONLY)
    try:
        del r
        gc.collect()
        assert os.pread(fd, 4, 0)  # still open
    finally:
        os.close(fd)


def test_loading_a_recordings_events_keeps_no_descriptor() -> None:
    before = _open_descriptors()
    for _ in range(20):
        events, header = load_recording_events(DEMO)
        assert events and header
    assert _open_descriptors() <= before + OTHERS
