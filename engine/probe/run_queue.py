"""A thread's wait on CPU run queues so far, read from Linux's /proc schedstat.

A thread that a loaded machine keeps off the CPU uses little CPU though it wants more: its CPU time alone
reads it as idle. The kernel counts the time it spent runnable but waiting for a CPU (schedstat's second
field, in ns). The probe's I/O loop adds that wait to the agent's CPU to tell a starved agent from one
waiting on its model (IOLoop._starved). The path is taken on the thread to be read; each read opens it:
reads are rare (only in a pass past the busy share while the agent's CPU reads idle), and a descriptor
held for the probe's life was one more per served session in a proxy (tests/capture/test_proxy_hostile's
descriptor bound).

The wait is added to schedstat only when the thread gets a CPU: a thread waiting on a run queue now shows
none of that wait until it runs (an agent starved on a loaded machine waited 1.3 s in one stretch, and a
look in the middle read 2% of the time waiting). runnable() tells that case: the thread's state is R.
"""

from __future__ import annotations

import os
import threading


class RunQueueWait:
    """The run-queue wait of the thread that called open_here(); -1 from read() where there is none
    (no /proc, or the thread has exited: then it is never read again)."""

    __slots__ = ("_path",)

    def __init__(self) -> None:
        self._path: str | None = None

    def open_here(self) -> None:
        """Take the calling thread's schedstat (nothing where the kernel has none)."""
        try:
            path = f"/proc/self/task/{threading.get_native_id()}/schedstat"
        except AttributeError:
            return
        self._path = path
        self.read()  # drops the path where it cannot be read

    def read(self) -> int:
        """The thread's wait on run queues so far (ns), or -1 where it cannot be read."""
        path = self._path
        if path is None:
            return -1
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._path = None
            return -1
        try:
            return int(os.pread(fd, 128, 0).split()[1])
        except (OSError, ValueError, IndexError):
            self._path = None
            return -1
        finally:
            os.close(fd)

    def runnable(self) -> bool:
        """Whether the thread is running or waiting on a run queue right now (its /proc stat's state R);
        False where that cannot be read."""
        path = self._path
        if path is None:
            return False
        try:
            fd = os.open(path[: -len("schedstat")] + "stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            # "TID (comm) S ...": the name may hold spaces and parentheses, the state follows the last ')'.
            return os.pread(fd, 512, 0).rpartition(b")")[2].split()[:1] == [b"R"]
        except OSError:
            return False
        finally:
            os.close(fd)

    def close(self) -> None:
        self._path = None
