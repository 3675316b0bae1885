"""The probe's I/O thread: one `selectors` loop that accepts, reads, moves events and sends.

It sleeps (select with no timeout) whenever there is nothing to send: no timer wakes it. Events a
Pipeline call publishes are sent at the call's end on the agent's own thread when that is cheap and
safe (see `agent_send`): this thread is then not woken at all. Otherwise a publish (or that call's
end) that finds it asleep writes one wake-up byte; the loop then waits COALESCE for the rest of the
agent's burst (publishes meanwhile write nothing: the flag is set), sends everything in one go, and
waits again while events keep coming, with the flag still set: while an agent runs turns back to back
it writes no wake-up byte at all, and a pass is one timed select() and one send per client. The burst
ends (the flag is cleared and the loop sleeps until the next publish) at a pass after whose wait's
second half nothing was published (an agent's turn, then its wait on the model: one wake-up byte and
one timed wait a turn), or at a wait that brings nothing. So an agent pays at most one wake-up per
burst, and none while no client is attached.

Whatever clients do, the thread's CPU is capped at CPU_SHARE of the agent's own CPU time while the
agent is busy (a token bucket over the thread's CPU clock: engine.probe.cpu_budget): past that it rests, which
costs only the clients' latency. A pass that has spent its tokens stops early (see _spent), so no
mix of clients makes one pass overdraw the bucket by more than about CPU_BURST. That is the backstop
behind the per-client limits (input budget, accept budget, client cap): the agent shares the GIL
with this thread, so every microsecond spent here is one the agent's thread may wait.

Shutdown: close() asks the thread to stop and waits at most FLUSH_MAX + JOIN_SLACK. The thread
flushes to clients while they keep reading (FLUSH_ON_CLOSE without progress ends it, FLUSH_MAX in all),
then tears everything down itself:
no other thread ever touches the selector, and the only other thread that touches the clients (the
agent's, sending what one of its calls published: see `agent_send`) does so only while it holds the
pass lock, which this thread holds from select() returning until it blocks again (in select(), or in
a rest the CPU budget imposes: between passes), through the flush and the teardown: there is no moment
at which a close can race the loop.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from typing import Any

from engine.probe.client_state import Client
from engine.probe.cpu_budget import CPU_BURST, CpuBudget
from engine.probe.handshake import Handshake
from engine.probe.readable import readable
from engine.probe.run_queue import RunQueueWait

log = logging.getLogger("contextpipe.probe")

# After a wake-up, how long the rest of a burst may accumulate before it is sent. An agent's events
# come in bursts a few milliseconds apart within a turn: one send per burst (or per several turns),
# not per event. A tenth of a second is still below what a person watching the inspector notices.
COALESCE = 0.1
# While the agent is busy, a pass waits for this much of its CPU time (at most MAX_LATENCY); it counts
# as busy while it uses at least BUSY_SHARE of the wall-clock time since the wake-up.
COALESCE_CPU = 0.1
MAX_LATENCY = 0.5
BUSY_SHARE = 0.2
# How long close() keeps sending already-published events (and what lean clients are owed) to clients
# that are reading: FLUSH_ON_CLOSE from the last moment any of them took something, FLUSH_MAX in all. An
# inspector on the elided stream of an agent that never paused is owed most of the journal at exit (it
# fetches in the background only while the agent is quiet): ~2 MB after 800 turns, which a loaded
# machine's inspector took ~1 s to read, so a fixed 0.25 s left its save short. An inspector reads the
# socket in 256 KB gulps and decodes each before the next read, so FLUSH_ON_CLOSE must outlast a gulp.
FLUSH_ON_CLOSE = 0.5
FLUSH_MAX = 2.0
# How often the flush tries to send to a client whose socket is full: the kernel says a Unix socket is
# writable only once its reader has drained it to a quarter, which a steady but slow reader can take
# longer than FLUSH_ON_CLOSE to do, though a send would have gone through long before.
FLUSH_POLL = 0.05
# How much longer close() waits for the thread to finish; if the thread is held up (a slow snapshot
# callable, a starved machine) close() returns anyway and the thread tears down when it gets there.
JOIN_SLACK = 0.5


class IOLoop(CpuBudget, Handshake):
    # Set by ProbeServer.__init__ / start() / close().
    _stopping: bool
    _wake_r: socket.socket | None
    quiet_linger: float  # AgentSend's (see agent_send, "Lingering")

    def _teardown(self) -> None:  # ProbeServer's: closes the clients and the sockets
        raise NotImplementedError

    def _init_loop(self) -> None:
        self._cpu_tokens = CPU_BURST
        self._cpu_at = time.monotonic()
        self._cpu_mark = 0.0
        self._proc_mark = time.process_time()
        self._agent_rate = 1.0  # the agent's smoothed share of a core (busy until shown otherwise)
        # The agent's thread's run-queue wait (see _starved), taken by start() (on that thread); where
        # the kernel has none (read() -1), the budget reads the agent by its CPU alone.
        self._run_queue = RunQueueWait()
        self._sched_wait = 0  # its run-queue wait (ns, schedstat's second field) at the last look
        self._sched_at = 0.0  # when that was (monotonic)
        self._wait_rate = 0.0  # its smoothed run-queue wait, a share of wall time (see _starved)
        self._was_starved = False  # the last look read the agent starved (see _starved)
        self.starved_passes = 0  # passes that read the agent busy by its run-queue wait (diagnostics, tests)
        self._cpu_rate = 0.0  # share of a core the process used during the last coalescing wait
        self._pass_allow = 0.0  # thread CPU clock at which this pass has spent its budget, see _loop
        self._next_client = 0  # where _service starts serving when a pass ran out of budget
        self._round_open = False  # the last pass ran out of budget before serving every client
        self._due: float | None = None  # when the burst being coalesced is sent (None: not in a burst)
        self._wait_at = 0.0
        self._wait_cpu = 0.0
        self._wait_len = COALESCE  # the length of the current (or last) wait
        # A publish handed this burst a paced agent's turn (agent_send, "Lingering"): after a pass that
        # sent something, the next wait is quiet_linger and the burst goes on while each wait brings more.
        self._linger = False
        self.rested = 0.0  # seconds the CPU budget made the thread rest (diagnostics, benchmarks)
        self.wakeups = 0  # passes of the loop (diagnostics, benchmarks)
        # Held by this thread for everything it does but block in select(): the agent's thread sends a
        # call's events itself only when it can take it without waiting (see agent_send), so the two
        # never touch the ring, a client's state or its socket at the same time.
        self._pass_lock = threading.Lock()

    def _run(self) -> None:
        lock = self._pass_lock
        lock.acquire()
        try:
            self._cpu_mark = time.thread_time()
            self._proc_mark = time.process_time()
            self._loop()
            self._flush_on_close()
        except Exception:
            log.exception("probe I/O thread error")
        finally:
            try:
                self._teardown()
            finally:
                lock.release()

    def _loop(self) -> None:
        sel = self._sel
        assert sel is not None
        lock = self._pass_lock
        while not self._stopping:
            try:
                # The timeout is read under the lock: an event the agent publishes after this is sent by
                # its own flush (the lock is free while we block) or wakes us with its byte.
                timeout = self._timeout()
                # Asleep with nothing in progress: the agent's publish may serve the one ring client
                # itself (agent_send._ring_now) until this thread holds the lock again.
                self._ring_one = self._ring_candidate() if timeout is None else None
                lock.release()
                try:
                    ready = sel.select(timeout)
                finally:
                    lock.acquire()
                    self._ring_one = None
                self.wakeups += 1
                # The CPU budget is charged after a pass (_budget), but one pass can do a lot: a
                # snapshot for each of many clients, say. So a pass stops once it has spent its tokens
                # and one burst more: what it left is still ready at the next select(), after the rest
                # that repays it (the selector returns the clients it left first, then the others).
                # A pass in debt (its rests are DEBT_REST at most, less than a slow agent takes to earn
                # a burst back) gets no burst: with one, every pass after a rest capped at 0.5 s spent
                # another burst, and the thread took ~4 ms a second whatever the agent earned it (a
                # history fill behind an agent paced at 0.05 s: 14% of its CPU, not 3%).
                tokens = self._cpu_tokens
                allow = min(tokens, CPU_BURST) + CPU_BURST if tokens >= 0 else 0.0
                self._pass_allow = self._cpu_mark + allow
                woke = accepted = spent = False
                for key, mask in ready:
                    data = key.data
                    if data == "wake":
                        woke = True
                        continue
                    if data == "listen":
                        self._accept()
                        accepted = True
                    else:
                        c: Client = data
                        # Identity, not fd: a client dropped earlier in this batch may have had its fd
                        # reused by one accepted since.
                        if self._clients.get(c.fd) is not c:
                            continue
                        if mask & selectors.EVENT_READ:
                            self._on_readable(c)
                        if mask & selectors.EVENT_WRITE and self._clients.get(c.fd) is c:
                            # With what was published since (taken in order, losses counted, as
                            # _service does): a pass that spends its budget here never reaches _service,
                            # and while a client fills a long history almost every pass did, so its live
                            # events waited in the queue until the fill ended (see queues._fill).
                            self._absorb()
                            self._pump(c)  # leaves WRITE interest registered only if still blocked
                    if self._spent():
                        spent = True
                        break
                if self._stopping:
                    return
                self._start_due()  # (before the burst's wait below, which would spin on a due hello)
                if spent:
                    self._budget()
                    continue
                if woke:
                    # The first event of a burst (or a late byte from a publisher that had lost the
                    # GIL): let the rest of the burst arrive before sending. Publishes meanwhile write
                    # nothing (the flag is set), so this is the burst's only wake-up byte.
                    self._drain_wake()
                    if self._due is None:
                        self._start_wait()
                if self._due is not None:
                    if time.monotonic() < self._due and not accepted and not self._more:
                        continue  # a client's ping or writability: the burst is not due yet
                    self._end_wait()
                moved = self._linger_pass()
                if not moved:
                    moved = self._service()
                if self._more:
                    pass  # a client has more to send: the next select() does not block
                elif (moved and (self._linger or self._flowing())) or self._settle():
                    # Events are flowing: stay in the burst. The flag stays set, so the agent writes no
                    # wake-up byte and this thread reads none: while turns run back to back a pass is
                    # one timed select() and one send per client. Each blocking call is a GIL hand-off
                    # with the agent's thread, what a pass costs most (more than the sending).
                    self._start_wait(self._linger)
                self._budget()
            except Exception:
                # A bug here must not kill the probe thread silently and leave clients hanging forever.
                log.exception("probe I/O loop error")
                self._rest(0.05)

    def _ring_candidate(self) -> Any:  # agent_send's
        raise NotImplementedError

    def _ring_turn(self, c: Any) -> bool:  # agent_send's
        raise NotImplementedError

    def _linger_pass(self) -> int:
        """A lingering burst's pass (see agent_send, "Lingering") for the one quiet ring client in step:
        the turns waiting go into its ring by agent_send's short path (`_ring_turn`), not the general
        fill (`_service`), which cost this thread ~240 us a pass on a paced turn (fold reader, load ~4).
        How many events it took; 0 to leave them to `_service`."""
        n = len(self._pending)
        if not self._linger or not n or self._more:
            return 0
        c = self._ring_candidate()
        if c is None or not self._ring_turn(c):
            return 0
        return n

    def _timeout(self) -> float | None:
        """How long select() may block: forever unless something is due."""
        if self._more or (self._pending and self._due is None):
            return 0.0
        due = self._due
        for d in [self._listen_paused_until] + [c.closing_deadline for c in self._clients.values()]:
            if d is not None and (due is None or d < due):
                due = d
        for c in self._clients.values():
            d = c.hello_due  # (a client whose hello has not come: it is started then, see _start_due)
            if d is not None and (due is None or d < due):
                due = d
        if due is None:
            return None
        return max(0.0, due - time.monotonic())

    def _service(self) -> int:
        """Move published events into the ring and send what every unblocked client may have next.
        Returns how many events were published since the last pass."""
        moved = self._absorb()
        # The shared encodings (keyed by ring positions and head, so never stale) are kept from a pass
        # the CPU budget cut short to the next, if nothing was published meanwhile: the clients it left
        # are where the ones it served were, and encoding their run again is what made a loaded machine
        # cost each client its own. Otherwise they go, so the cache holds at most one round of clients.
        if moved or not self._round_open:
            self._enc_cache.clear()
        self._round_open = False
        self._more = False
        clients = list(self._clients.values())
        n = len(clients)
        if n > 1:
            # Many clients can cost far more than the CPU budget in one pass (see _spent): they are
            # served in turn, from where the last pass stopped, and the rest wait for the next pass.
            start = self._next_client % n
            clients = clients[start:] + clients[:start]
            for i, c in enumerate(clients):
                if not c.want_write:
                    self._pump(c)
                if i + 1 < n and self._spent():
                    self._next_client = start + i + 1
                    self._more = True
                    self._round_open = True
                    break
            else:
                self._next_client = start
        elif n:
            if not clients[0].want_write:
                self._pump(clients[0])
        if not self._round_open:
            self._enc_cache.clear()
        self._release_read()
        if self._recording_stopped is not None and self._nfollowers:
            self._stop_followers()
        self._expire_closing()
        self._resume_listener()
        return moved

    def _spent(self) -> bool:
        """This pass has used its CPU tokens and one burst more (set at the top of each pass)."""
        return time.thread_time() > self._pass_allow

    def _in_debt(self) -> bool:
        """This pass began owing the CPU budget (it was given no burst, see _loop): only what cannot wait."""
        return self._cpu_tokens < 0.0

    def _flowing(self) -> bool:
        """Events were still being published in the second half of the wait that just ended: the burst
        goes on. One published only early in it (a turn, then the agent waits on its model) has ended
        the burst: settling now saves the wait that would find nothing, which was one of the three
        wake-ups each turn of such an agent cost this thread (~100 us of CPU apiece on a shared VM). A
        wrong guess costs one wake-up byte (the next publish finds the flag clear) or one such wait."""
        return time.monotonic() - self._published_at < 0.5 * self._wait_len

    def _settle(self) -> bool:
        """A burst has ended (a pass found nothing new): the next publish must find the flag clear, so it
        wakes us. True if events arrived meanwhile (the flag stays set and the burst goes on).

        Order: clear, re-check. A publish after the re-check sees the flag clear and writes its byte;
        one before it is caught by the re-check. A publisher can also set the flag (and send its byte)
        long after its event was taken, if it lost the GIL in between: the byte then wakes the loop for
        one empty burst, which ends here and clears the flag again (a flag left set would swallow every
        later wake-up).
        """
        if self._pending:
            return True
        self._linger = False  # (before the flag: a publish after it lingers again)
        self._wake_pending = False
        if self._pending:
            self._wake_pending = True
            return True
        return False

    def _start_wait(self, linger: bool = False) -> None:
        """Let the burst accumulate before the next send: COALESCE, or, while the agent is busy (turns
        back to back), until it has used about COALESCE_CPU of CPU, at most MAX_LATENCY.

        Each pass costs the same whatever it sends (on a shared VM every sleep-and-wake of a thread
        costs tens of microseconds of CPU), so passes are spaced by the agent's own CPU time: on a
        loaded machine, where the agent gets a fraction of a core, wall-clock spacing would charge each
        of its turns more. The wait's length comes from the share of a core the process used during the
        previous one. An agent waiting on its model is not busy: its events go out after COALESCE.
        The wait is the loop's own select() (clients are still heard), see _end_wait.
        """
        rate = self._cpu_rate
        wait = COALESCE if rate < BUSY_SHARE else min(MAX_LATENCY, max(COALESCE, COALESCE_CPU / rate))
        if linger:
            # A paced agent's next turns, handed over (see agent_send, "Lingering"): each begins within
            # quiet_linger of the last, so a wait that long finds one, and the burst ends only once the
            # agent pauses longer. (MAX_LATENCY at a 0.5 s pace: a wait now and then found nothing, ended
            # the burst, and the next turn wrote a wake-up byte, 20-30 us of the agent's thread, cold.)
            wait = max(MAX_LATENCY, self.quiet_linger)
        now = time.monotonic()
        self._due = now + wait
        self._wait_len = wait
        self._wait_at = now
        self._wait_cpu = time.process_time()  # the whole process: the agent's threads (and this one)

    def _end_wait(self) -> None:
        wall = time.monotonic() - self._wait_at
        if wall > 0:
            self._cpu_rate = (time.process_time() - self._wait_cpu) / wall
        self._due = None

    def _rest(self, seconds: float) -> None:
        """Sleep without holding the GIL or the pass lock, waking early only to stop. This thread serves
        no client meanwhile; the agent's thread may send its own calls' events (see agent_send), as
        while this thread sleeps in select(): between passes every client's state is settled. While an
        inspector fills a long history the budget makes this thread rest most of the time, and each of
        the agent's turns then woke it (and waited for its next pass) where it can send itself."""
        lock = self._pass_lock
        if any(c.fetch for c in self._clients.values()):
            # A client fills its history (minutes, on a long session): the agent's next call finds the
            # flag clear and sends its events itself, or wakes us (see agent_send). With the flag set
            # they waited for the rest's end, and the next pass. Events waiting now are taken by the
            # pass after the rest as ever (select() does not block while any wait, see _timeout).
            # Otherwise the flag is left as it is: a burst of turns back to back goes on after the
            # rest with no wake-up byte.
            self._wake_pending = False
            self._ring_one = self._ring_candidate()
        lock.release()
        try:
            self._rest_unlocked(seconds)
        finally:
            lock.acquire()
            self._ring_one = None

    def _rest_unlocked(self, seconds: float) -> None:
        r = self._wake_r
        deadline = time.monotonic() + seconds
        while not self._stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if r is None:
                time.sleep(left)
                return
            try:
                ready = readable([r.fileno()], left)
            except (OSError, ValueError):
                return
            if ready:
                # A publish's wake-up byte (the flag is set; _settle re-checks) or close()'s.
                self._drain_wake()

    def _drain_wake(self) -> None:
        r = self._wake_r
        if r is None:
            return
        try:
            # One read almost always empties it (one byte per wake-up); only a full read asks again.
            while len(r.recv(4096)) == 4096:
                pass
        except OSError:  # EAGAIN: already empty
            pass

    def _settle_on_close(self, c: Client) -> bool:
        """Queue what a lean client can no longer fetch once the agent is gone, so an inspector that
        saves the session after the agent exits has it all: the traces of turns it was sent only as
        summaries (`owed`) and, on the elided stream, the journal past what it had. Only once it has
        been sent every live event (turns summarized in the last of them are owed too), and again for
        any the agent journals meanwhile (each pass looks at the journal's length again). True if it
        queued anything."""
        if c.snap_src is not None or c.cursor < self._head:
            return False
        queued = False
        if c.elide:
            try:
                n = len(self._journal())
            except Exception:
                n = 0
            start = max(c.jdone, c.jclose)
            if start < n:
                c.fetch.append((start, n))
                c.jclose = n
                queued = True
        if c.owed:
            c.fetch.extend(sorted(c.owed))
            c.owed.clear()
            queued = True
        return queued

    def _flush_on_close(self) -> None:
        """Give reading clients a short chance to receive what was already published, then stop."""
        now = time.monotonic()
        deadline = now + FLUSH_ON_CLOSE
        end = now + FLUSH_MAX
        sel = self._sel
        if sel is None:
            return
        # No CPU budget here: the agent has stopped working, and the deadline bounds the flush. With the
        # last pass's budget (long spent by now) every fill stopped after one trace or one journal frame,
        # a frame and a send each, and an inspector owed a few hundred traces missed most of them.
        self._pass_allow = float("inf")
        self._cpu_tokens = max(self._cpu_tokens, 0.0)  # (and ranges are answered: see _in_debt)
        # Stop accepting and stop listening for wake-ups: both would only make select() spin here.
        for s in (self._listener, self._wake_r):
            if s is not None:
                try:
                    sel.unregister(s)
                except (KeyError, ValueError):
                    pass
        for c in list(self._clients.values()):
            if c.hello_due is not None:
                c.hello_due = 0.0  # its hello now: the agent is closing (see _start_due)
        self._start_due()
        while time.monotonic() < deadline:
            self._absorb()
            self._more = False
            pending = progress = False
            for c in list(self._clients.values()):
                if c.closing_deadline is None:
                    before = (c.sent_events, len(c.outbuf))
                    self._pump(c)
                    if c.lean and self._settle_on_close(c) and self._clients.get(c.fd) is c:
                        self._pump(c)
                    if self._clients.get(c.fd) is c:
                        pending = pending or bool(c.outbuf)
                        progress = progress or (c.sent_events, len(c.outbuf)) != before
            if not pending and not self._more:
                return
            if progress:  # a client took something: it may have the rest, up to FLUSH_MAX in all
                deadline = min(end, time.monotonic() + FLUSH_ON_CLOSE)
            try:
                ready = sel.select(
                    0 if self._more else max(0.0, min(FLUSH_POLL, deadline - time.monotonic()))
                )
            except OSError:
                return
            for key, mask in ready:
                c = key.data
                if isinstance(c, Client) and mask & selectors.EVENT_READ and self._clients.get(c.fd) is c:
                    self._on_readable(c)  # a client that closes its end is dropped, not waited for
