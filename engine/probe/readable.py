"""Waiting for descriptors to become readable, whatever their numbers.

`select.select()` refuses a descriptor numbered FD_SETSIZE (1024) or above with ValueError. An agent that
holds many files or sockets (a crawler, a test runner, a server with many clients) gives the probe's pipes
and sockets such numbers, and each wait that used select() then failed at once instead of waiting: the
probe's timed rest returned immediately (its I/O thread spun where it should sleep), and a client took its
socket for closed. `poll()` has no such limit, and waits the same way.
"""

from __future__ import annotations

import math
import select
from collections.abc import Sequence

# Readable, or the peer hung up or the descriptor failed: each of these means "call recv and see".
_READY = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR | select.POLLNVAL


def readable(fds: Sequence[int], timeout: float | None) -> list[int]:
    """The descriptors of `fds` that are readable (or hung up, or failed) within `timeout` seconds
    (None: wait for one; 0: only look). Rounded up to whole milliseconds, poll's unit, so a short
    remainder still waits instead of returning at once."""
    p = select.poll()
    for fd in fds:
        p.register(fd, select.POLLIN | select.POLLPRI)
    ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
    return [fd for fd, ev in p.poll(ms) if ev & _READY]
