"""engine/probe/run_queue.py: a thread's run-queue wait, read from /proc (IOLoop._starved's input)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from engine.probe.run_queue import RunQueueWait

pytestmark = pytest.mark.skipif(
    not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat"), reason="no schedstat here"
)


def test_the_wait_of_the_thread_that_opened_it_is_read_until_closed() -> None:
    w = RunQueueWait()
    w.open_here()
    first = w.read()
    assert 0 <= first <= w.read()  # a count so far: it never goes back
    w.close()
    assert w.read() == -1
    w.close()  # twice is harmless


def test_a_thread_that_has_exited_reads_as_none_from_then_on() -> None:
    w = RunQueueWait()
    t = threading.Thread(target=w.open_here)
    t.start()
    t.join()
    # (join returns when the Python thread is done; the kernel's task goes a moment later)
    deadline = time.monotonic() + 10
    while w.read() != -1:
        assert time.monotonic() < deadline, "the exited thread's wait was still read"
        time.sleep(0.01)
    assert w._path is None  # dropped on the first failed read, never read again


def test_it_holds_no_descriptor_between_reads() -> None:
    """A proxy serves up to 16 sessions, each with a probe: a schedstat held open by each was 16 more
    descriptors (tests/capture/test_proxy_hostile.py's bound caught it)."""
    before = len(os.listdir("/proc/self/fd"))
    waits = [RunQueueWait() for _ in range(8)]
    for w in waits:
        w.open_here()
        assert w.read() >= 0
    assert len(os.listdir("/proc/self/fd")) == before
