"""The probe I/O thread's CPU budget (`CpuBudget`, a part of engine.probe.loop.IOLoop): a token bucket
charged with the thread's own CPU after each pass and refilled by the agent's, so the probe never takes
more than CPU_SHARE of what the agent uses while it is busy (IDLE_SHARE of wall time while it waits on
its model), resting when the bucket runs dry; an agent merely starved by a loaded machine, read by its
run-queue wait (engine.probe.run_queue), still counts as busy.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from engine.probe.run_queue import RunQueueWait

# The thread's CPU budget (see IOLoop._budget): CPU_SHARE of the agent's own CPU time while it is busy
# (bursts of CPU_BURST seconds), IDLE_SHARE of wall time while it uses less than IDLE_RATE of a core
# (waiting on its model, say; an agent that is merely starved by a loaded machine still counts as busy:
# its thread waiting on a CPU's run queue STARVED_WAIT of the time, see IOLoop._starved).
CPU_SHARE = 0.03
CPU_BURST = 0.002
IDLE_SHARE = 0.2
IDLE_BURST = 0.005
IDLE_RATE = 0.02
# An agent whose thread waits on a CPU's run queue this share of wall time or more is starved, not idle
# (see IOLoop._starved). A thread that only wakes to poll (a sleep(0.01) loop) waited 3.5-11% of wall
# time at load 6-10 on the sessions' 2-core host; one starved under IDLE_RATE while it has work, ~60-80%.
STARVED_WAIT = 0.25
RATE_WINDOW = 0.5
# The longest the CPU budget makes the thread rest before a pass (close() interrupts it anyway): a client
# it serves may wait that long for its live events while a history fill is repaid (see _budget).
DEBT_REST = 1.0


class CpuBudget:
    """IOLoop's CPU budget (its state is set up by IOLoop._init_loop)."""

    _stopping: bool
    _cpu_tokens: float
    _cpu_at: float
    _cpu_mark: float
    _proc_mark: float
    _agent_rate: float
    _run_queue: RunQueueWait
    _sched_wait: int
    _sched_at: float
    _wait_rate: float
    _was_starved: bool
    starved_passes: int
    rested: float

    if TYPE_CHECKING:

        def _rest(self, seconds: float) -> None: ...

    def _budget(self) -> None:
        """Charge this pass's CPU to the bucket; rest when it is empty.

        While the agent is busy the bucket fills at CPU_SHARE of the CPU the agent's own threads used
        (not of wall time: on a loaded machine the agent gets a fraction of a core, and a wall-clock
        share would weigh that much more on each of its turns), holding at most CPU_BURST from one pass
        to the next. What the agent's CPU earned since the last pass is spendable by this pass whole,
        before the cap: a pass sends everything published since the last one (up to MAX_LATENCY of
        turns), and capping first made any pass over more than ~2 ms of work rest (a sleep and a
        wake-up, ~150 us of this thread's CPU on a shared VM, and the live view's latency) although it
        had used less than its share. The long-run bound is the same: CPU_SHARE of the agent's CPU plus
        one CPU_BURST. While the agent is idle (waiting on its model, say), the probe cannot slow it,
        and the bucket fills at IDLE_SHARE of wall time (so an inspector attaching to a long session
        still gets its snapshot promptly), holding at most IDLE_BURST (capped before the refill there:
        a wall-clock refill over a long sleep would otherwise allow any pass); the burst cap drops back
        as soon as the agent is busy.
        """
        tokens, rate, _ = self._refill()
        # Rest until the debt is repaid, by what the agent's threads used meanwhile (measured after
        # each rest, and the next rest sized by the rate the agent used in it: the smoothed rate holds
        # a busy moment's peak, so the first is too short behind a paced agent), or DEBT_REST in all,
        # so a client that this thread serves waits no longer than that for its live events. One rest
        # and then a pass (which began in debt, so did almost nothing but cost a wake-up) made passes
        # so frequent behind an agent paced by its model that their overhead took what it earned.
        waited = 0.0
        while tokens < 0 and not self._stopping and waited < DEBT_REST:
            # (Every rest costs a wake-up, ~90 us of this thread's CPU on a shared VM, charged too: as few
            # as may be, so a quarter longer than the rate says.)
            pause = min(1.25 * -tokens / rate, DEBT_REST - waited)
            self.rested += pause
            waited += pause
            self._rest(pause)
            tokens, _, rate = self._refill()

    def _refill(self) -> tuple[float, float, float]:
        """The bucket charged with this thread's CPU since the last charge and refilled by the agent's
        (see _budget): the tokens, and the rate (a second of wall time) they refill at, by the agent's
        smoothed share of a core and by its share since the last charge."""
        now_cpu = time.thread_time()
        used = now_cpu - self._cpu_mark
        self._cpu_mark = now_cpu
        proc = time.process_time()
        others = max(0.0, proc - self._proc_mark - used)  # the agent's threads since the last pass
        self._proc_mark = proc
        now = time.monotonic()
        wall = now - self._cpu_at
        self._cpu_at = now
        # The agent's share of a core: it rises at once (the first pass in which the agent ran ends any
        # idle allowance) and decays over about RATE_WINDOW (over a single pass the agent reads as idle
        # whenever this thread had just held the GIL, which is when the budget matters most).
        inst = others / wall if wall > 0 else 0.0
        if wall > 0:
            if inst >= self._agent_rate:
                self._agent_rate = inst
            else:
                self._agent_rate += min(1.0, wall / RATE_WINDOW) * (inst - self._agent_rate)
        busy = min(CPU_BURST, self._cpu_tokens) + CPU_SHARE * others - used
        # (Whether a CPU-idle agent is starved matters only to a pass the busy share would not cover.)
        idle = self._agent_rate < IDLE_RATE and (busy >= 0 or not self._starved(now))
        if idle:
            tokens = min(IDLE_BURST, self._cpu_tokens + IDLE_SHARE * wall) - used
            rate = lately = IDLE_SHARE
        else:
            tokens = busy
            rate = CPU_SHARE * self._agent_rate
            lately = CPU_SHARE * max(inst, IDLE_RATE)
        self._cpu_tokens = tokens
        return tokens, max(rate, 1e-6), lately

    def _open_schedstat(self) -> None:
        """Open the calling thread's run-queue wait (start() calls it on the agent's thread, the one that
        made the probe). Read by the I/O thread only when the agent's CPU reads as idle (_starved)."""
        self._run_queue.open_here()
        self._sched_at = time.monotonic()
        self._sched_wait = self._run_queue.read()

    def _close_schedstat(self) -> None:
        self._run_queue.close()

    def _starved(self, now: float) -> bool:
        """Whether the agent's thread, which used under IDLE_RATE of a core lately, waited on a CPU's run
        queue for STARVED_WAIT of the wall time or more: it has work and a loaded machine starves it, so
        it is busy, not waiting on its model, and the probe keeps to CPU_SHARE of what it gets. Read as
        idle, such an agent gave the probe IDLE_SHARE of wall time (tests/test_probe_fill_share.py at
        load ~10: an agent starved under 2% of a core, the probe's history fill took 13% of its CPU).
        Not any wait at all: a thread that wakes only to poll waits a little at each wake-up on a
        loaded machine, and read as busy it held an inspector's history fill to 3% of its tiny CPU
        (27 s against 2 s at load 6: tests/test_probe_attach_long.py's agent polls every 10 ms).

        The wait share is a time-weighted average over about RATE_WINDOW of the waits between looks,
        each counted whole: this thread looks mostly while the agent's thread is not runnable (a
        starved agent that holds the GIL, descheduled, holds this thread off too), so one look's
        window alone read a starved agent as idle in most passes. A look opens and reads /proc, ~5 us
        of this thread's CPU (warm, the sessions' host; no descriptor is held: run_queue.py), only in a pass that went past the busy
        share while the agent's CPU reads as idle (a paced agent's passes, well within it, never
        look).

        The kernel adds a wait to the count only once the thread gets a CPU (run_queue.py): an agent
        starved in one long stretch (1.3 s at load ~7) read 1-3% waiting in the looks made during it, the
        wait landing whole at the next look after it ran, and the probe took the idle allowance in
        between (tests/test_probe_starved.py: 28-64 ms against 6.6 allowed). So an agent read starved at
        the last look stays starved while its thread is runnable (waiting on a run queue, or running: busy
        either way). Only after a starved look: a thread that only polls is runnable at a share of looks
        like its wait's (3.5-11% at load 6-10), and each read as busy costs a fill up to DEBT_REST."""
        waited = self._run_queue.read()
        if waited < 0:
            return False
        span = now - self._sched_at
        inst = (waited - self._sched_wait) / (span * 1e9) if span > 0 else 0.0
        self._sched_wait, self._sched_at = waited, now
        self._wait_rate += min(1.0, span / RATE_WINDOW) * (inst - self._wait_rate)
        starved = self._wait_rate >= STARVED_WAIT or (self._was_starved and self._run_queue.runnable())
        self._was_starved = starved
        if starved:
            self.starved_passes += 1
        return starved
