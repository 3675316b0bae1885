"""A thread's wait on CPU run queues so far, read from Linux's /proc schedstat.

A thread that a loaded machine keeps off the CPU uses little CPU though it wants more: its CPU time alone
reads it as idle. The kernel counts the time it spent runnable but waiting for a CPU (schedstat's second
field, in ns). The probe's I/O loop adds that wait to the agent's CPU to tell a starved agent from one
waiting on its model (IOLoop._starved). Opened once, on the thread to be read; read with one pread.
"""

from __future__ import annotations

import os
import threading


class RunQueueWait:
    """The run-queue wait of the thread that called open_here(); -1 from read() where there is none
    (no /proc, or the thread has exited: then the file is closed and never read again)."""

    __slots__ = ("_fd",)

    def __init__(self) -> None:
        self._fd: int | None = None

    def open_here(self) -> None:
        """Open the calling thread's schedstat (nothing where the kernel has none)."""
        try:
            fd = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return
        self._fd = fd

    def read(self) -> int:
        """The thread's wait on run queues so far (ns), or -1 where it cannot be read."""
        fd = self._fd
        if fd is None:
            return -1
        try:
            return int(os.pread(fd, 128, 0).split()[1])
        except (OSError, ValueError, IndexError):
            self.close()
            return -1

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
