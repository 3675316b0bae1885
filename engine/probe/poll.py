"""How a client that follows an agent waits for its events: on its own timer, not on the socket.

A reader blocked in select() or recv() on the probe socket is on that socket's wait queue, and the
agent's send() that finds it there wakes it: on a shared VM the kernel charges that wake-up to the
sender, ~60-170 us of the agent's CPU clock a send against ~11-15 us for a send that only copies into
the socket buffer (BENCHMARKS.md, "Probe overhead on a realistic turn"). An agent that waits on its
model between turns makes a send or more a turn, so a sleeping reader costs it several per cent of a
1-2 ms turn.

So a following client sleeps on a timer of its own (time.sleep, or a wait on another descriptor of its
own process) and then reads the socket without waiting (a zero-timeout select, which registers on no
wait queue, then recv): the agent's send is a plain copy, and the wake-up is the client's timer, paid
by the client's process. The interval adapts: POLL_MIN right after data (a turn's sends come within a
few ms, the next turn soon after on a busy agent), growing by POLL_GROWTH each empty look up to
POLL_MAX while the agent is quiet (waiting on its model), so an idle inspector wakes ~10 times a
second. An event then reaches the client within POLL_MAX (a few frames of a TUI), ~POLL_MIN while
they keep coming.

Waits for an answer the client asked for itself (a fetch, the snapshot after the hello) may still
block on the socket: the agent sends those once, from its I/O thread, not on every turn.
"""

from __future__ import annotations

# The interval right after data arrived: about a frame of a TUI.
POLL_MIN = 0.016
# The longest interval, reached after ~5 empty looks (~0.2 s of quiet): what an idle client costs its
# own process is one timer wake-up this often.
POLL_MAX = 0.1
POLL_GROWTH = 1.5


class PollInterval:
    """The adaptive interval of one polling client: `got()` when data arrived, `idle()` for the sleep
    before the next look when there was none (and grow it)."""

    __slots__ = ("_next", "looks")

    def __init__(self) -> None:
        self._next = POLL_MIN
        self.looks = 0  # empty looks so far (diagnostics, benchmarks)

    def got(self) -> None:
        self._next = POLL_MIN

    def idle(self) -> float:
        nap = self._next
        self._next = min(POLL_MAX, nap * POLL_GROWTH)
        self.looks += 1
        return nap
