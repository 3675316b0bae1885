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


def test_a_thread_that_has_exited_reads_as_none_and_its_file_is_closed() -> None:
    w = RunQueueWait()
    t = threading.Thread(target=w.open_here)
    t.start()
    t.join()
    # (join returns when the Python thread is done; the kernel's task goes a moment later)
    deadline = time.monotonic() + 10
    while w.read() != -1:
        assert time.monotonic() < deadline, "the exited thread's wait was still read"
        time.sleep(0.01)
    assert w._fd is None  # closed on the first failed read, never read again
