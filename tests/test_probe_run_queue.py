"""engine/probe/run_queue.py: a thread's run-queue wait, read from /proc (IOLoop._starved's input)."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

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


def test_runnable_reads_a_running_thread_as_runnable_and_a_blocked_one_not() -> None:
    w = RunQueueWait()
    w.open_here()
    assert w.runnable()  # this thread, running as it reads
    blocked = RunQueueWait()
    opened, stop = threading.Event(), threading.Event()

    def wait() -> None:
        blocked.open_here()
        opened.set()
        stop.wait(30)

    t = threading.Thread(target=wait)
    t.start()
    try:
        assert opened.wait(10)
        deadline = time.monotonic() + 10
        while blocked.runnable():  # (until it is asleep in the wait)
            assert time.monotonic() < deadline, "a thread blocked on an Event read as runnable"
            time.sleep(0.01)
    finally:
        stop.set()
        t.join()
    w.close()
    assert not w.runnable()


class _Lagging(RunQueueWait):
    """The kernel's count as it lags: each look's (wait so far, runnable now) in turn."""

    def __init__(self, looks: list[tuple[float, bool]]) -> None:
        super().__init__()
        self._looks = iter(looks)
        self._now = (0.0, False)

    def next_look(self) -> None:
        self._now = next(self._looks)

    def read(self) -> int:
        return int(self._now[0] * 1e9)

    def runnable(self) -> bool:
        return self._now[1]


def _looks(looks: list[tuple[float, bool]]) -> list[bool]:
    """IOLoop._starved's reading at each look, one second apart (a starved pass's DEBT_REST)."""
    from engine.probe.loop import IOLoop

    wait = _Lagging(looks)
    loop = SimpleNamespace(
        _run_queue=wait, _sched_wait=0, _sched_at=0.0, _wait_rate=0.0, _was_starved=False, starved_passes=0
    )
    read = []
    for i in range(len(looks)):
        wait.next_look()
        read.append(IOLoop._starved(loop, float(i + 1)))  # type: ignore[arg-type]
    return read


def test_a_starved_thread_stays_starved_while_its_wait_has_not_landed() -> None:
    """The kernel adds a run-queue wait to the count when the thread gets a CPU: an agent starved at load
    ~7 waited 1.3 s in one stretch, and the look in the middle of it read 2% waiting (the probe took the
    idle allowance: tests/test_probe_starved.py). After a starved look, a runnable thread is starved."""
    # Starved (95% of the second waiting), then a second whose wait has not landed (2%; runnable), then
    # the wait landing, then the agent waiting on its model (asleep, little wait).
    assert _looks([(0.95, True), (0.97, True), (2.9, False), (2.92, False)]) == [True, True, True, False]


def test_a_polling_thread_runnable_at_a_look_is_not_starved() -> None:
    """A thread that wakes only to poll waits a little at each wake-up on a loaded machine, and a look
    may find it runnable: read as busy it held an inspector's history fill to 3% of its tiny CPU."""
    assert _looks([(0.05, True), (0.1, True), (0.15, False), (0.2, True)]) == [False] * 4
