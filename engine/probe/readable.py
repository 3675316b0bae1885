"""Waiting for descriptors to become readable, whatever their numbers.

`select.select()` refuses a descriptor numbered FD_SETSIZE (1024) or above with ValueError. An agent that
holds many files or sockets (a crawler, a test runner, a server with many clients) gives the probe's pipes
and sockets such numbers, and each wait that used select() then failed at once instead of waiting: the
probe's timed rest returned immediately (its I/O thread spun where it should sleep), and a client took its
socket for closed. Past the limit the wait is a `poll()`, which has none. Below it, it stays a select(),
whose descriptor count the kernel shows (/proc/TID/syscall): tests/test_probe_poll.py reads it to prove a
polling reader never waits on the agent's socket, which a poll() (its descriptors behind a pointer) cannot.
"""

from __future__ import annotations

import math
import select
from collections.abc import Sequence

FD_SETSIZE = 1024  # glibc's, and CPython's select module's, on Linux
# Readable, or the peer hung up or the descriptor failed: each of these means "call recv and see".
_READY = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR | select.POLLNVAL


def readable(fds: Sequence[int], timeout: float | None) -> list[int]:
    """The descriptors of `fds` that are readable (or hung up, or failed) within `timeout` seconds
    (None: wait for one; 0: only look)."""
    if all(0 <= fd < FD_SETSIZE for fd in fds):
        return select.select(fds, [], [], timeout)[0]
    p = select.poll()
    for fd in fds:
        p.register(fd, select.POLLIN | select.POLLPRI)
    # Rounded up to poll's whole milliseconds, so a short remainder still waits instead of returning at once.
    ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
    return [fd for fd, ev in p.poll(ms) if ev & _READY]
