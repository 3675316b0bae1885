"""The hand-off thread: a paced agent's turn sent by a thread of the probe's own, woken by a lock.

publish()'s straight path (agent_send: `_ring_now` for an elided reader, `_fold_now` for a fold client)
encodes the turn and writes it into the one ring client's ring on the agent's thread, cold after the
model call: ~60-100 us a paced turn, 4.5-5.2% of a 1-2 ms turn (issue 15.4 asks <= 1%). Handing the
turn to the I/O thread instead costs a wake-up, and what a wake-up costs depends on the primitive. Cold,
0.5 s after the last (the agent's thread's clock around the wake and the 2 ms sleep after it, which is
where the woken thread takes the GIL, less that sleep alone; the woken thread's clock per wake; two runs
at load ~5-6, benchmarks/bench_wakeup.py):

    primitive                                   waker             woken thread
    socketpair byte (the I/O thread's select)   +25.8, +29.4 us   48.8, 47.4 us
    pipe byte                                   +23.6, +17.7      50.2, 39.8
    eventfd                                     +23.5, +12.8      47.5, 39.2
    threading.Condition notify                  +36.8, +29.7      35.9, 25.0
    threading.Lock released, a thread blocked   +2.5, +3.4        19.8, 24.5

A Lock released for a thread blocked in acquire() is one futex wake, with no file, no selector and no
Python-level lock around it; a woken select() goes through the selector's epoll and the loop's pass.
So the I/O thread keeps its select() (clients, the listener, its own wake-up byte) and this thread,
blocked on `_kick`, does one thing: when publish() hands it a turn (while the I/O thread sleeps and has
named the one ring client, `_ring_one`: the straight path's case), it takes the pass lock and runs the
straight path the agent's thread ran (`_fold_now`, `_ring_now`), or, for any other shape, `_send_now`
(which sends what it can and wakes the I/O thread for the rest, as from the agent's thread). The agent's
thread appends the event (a reference, as publish always did) and releases the lock: O(1).

What stays the same: the events, their order and, for a paced agent, the frames (the same functions make
them, under the same pass lock; only this thread or the agent's takes from the queue's head while the
lock is held); latency (the turn is written as soon as this thread has the GIL: at once when the agent
next blocks, within the interpreter's switch interval otherwise); the drop policy (the queue is the
same bounded deque: a thread that falls behind loses the oldest events, counted, as the I/O thread
does); clients (this thread writes only into a ring, shared memory, never a socket: a slow or hostile
client never makes it, or the agent, wait). The thread is started when the I/O thread first names a ring
client (an agent nobody attaches to never has it) and ends with the server.

Not the default (`handoff` off unless set), measured in one process (benchmarks/bench_probe.py, load
6-8): the probe's part of the agent's thread falls by ~40 us a paced turn (`--flush-ab 0.5 --rounds 4
--turns 8 --flush-modes agent,agent-sender`: 85.5 -> 46.5 us, 5.06% -> 2.74%; an earlier run 94.6 ->
58.3), still over the 1% asked, since what is left is publish()'s own calls, one an event; and the
process pays more than it saves: this thread's wake and its GIL hand-off with the agent's thread, cold,
put ~117-128 us a turn on it, against the ~40 taken off the agent's (the two threads' sum +100 us a
turn in the second run; `--twin foldsender`, a fold reader: +30.0 us a turn [95% +16.4, +39.1] = 1.023).
And an agent whose turns come back to back, never releasing the GIL between them, has the thread
take several turns a pass (the older ones summarized on the lean stream, as the I/O thread's bursts
do), where the agent's own thread sends each turn whole; and since the thread runs only once the agent
releases the GIL, events the agent published after the turn by then send it by the general path
(`--publish-split --split-sender`: `_ring_now` 0.31 calls a turn, the straight path 106 us wall there).
"""

from __future__ import annotations

import threading
from typing import Any

from engine.probe.agent_send import AgentSend

# Whether publish() hands the straight path's turn to the hand-off thread (see "Not the default" above;
# False: the agent's thread sends it, as before).
HANDOFF = False


class Handoff(AgentSend):
    def _init_handoff(self) -> None:
        # Set it (and call `_start_handoff`, or let the I/O thread start it when it next names a ring
        # client) to hand the straight path's turns off; bench_probe's A/B of the two.
        self.handoff = HANDOFF
        # Released by publish() for each turn handed off, acquired by the hand-off thread: a binary
        # semaphore (a release while it is already released is a turn the coming pass takes as well).
        self._kick = threading.Lock()
        self._kick.acquire()
        self._kicks = 0  # turns handed off (the thread skips a wake that finds none new)
        self._handoff_thread: threading.Thread | None = None
        self.handoff_passes = 0  # passes the hand-off thread ran (diagnostics, tests, benchmarks)

    def _hand_off(self) -> None:
        """publish()'s part: wake the hand-off thread for what waits in the queue. Never blocks."""
        self._kicks += 1
        try:
            self._kick.release()
        except RuntimeError:
            pass  # released already: the thread has not taken the last one yet, and takes this turn too

    def _start_handoff(self) -> None:
        """Start the hand-off thread (the I/O thread's, when it first names a ring client)."""
        if self._handoff_thread is not None or self._stopping:
            return
        name = f"contextpipe-probe-send-{self.pid}" + ("" if self.session is None else f".{self.session}")
        t = threading.Thread(target=self._handoff_run, name=name, daemon=True)
        self._handoff_thread = t
        t.start()

    def _stop_handoff(self, timeout: float) -> None:
        t = self._handoff_thread
        if t is None:
            return
        self._kicks += 1
        try:
            self._kick.release()
        except RuntimeError:
            pass
        if t is not threading.current_thread():
            t.join(timeout)

    def _handoff_run(self) -> None:
        kick = self._kick
        done = 0
        while True:
            kick.acquire()
            if self._stopping:
                return
            kicks = self._kicks
            if kicks == done:
                continue  # (a turn a pass already took)
            done = kicks
            self.handoff_passes += 1
            try:
                self._handoff_pass()
            except Exception:
                self.publish_errors += 1

    def _handoff_pass(self) -> None:
        """What publish() did on the agent's thread for an event worth sending while every client is
        quiet: the one ring client's straight path, else the general send (`_send_now`)."""
        pending = self._pending
        if not pending:
            return  # (sent meanwhile: by a pass of the I/O thread, say)
        c = self._ring_one
        if c is not None:
            if c.fold:
                if self._fold_now(c):
                    return
            else:
                last: Any = pending[-1]
                event, frame = last if type(last) is tuple else (last, None)
                if type(event) is dict and event.get("k") not in self._defer_kinds:
                    if self._ring_now(event, frame):
                        return
        self._send_now()

    # Set by ProbeServer.
    pid: int
    session: int | None

    def _ring_candidate(self) -> Any:
        c = super()._ring_candidate()
        if c is not None and self.handoff and self._handoff_thread is None:
            self._start_handoff()
        return c
