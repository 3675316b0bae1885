"""Clients that follow an agent wait on a timer of their own, not on the probe socket (engine.probe.poll),
and a quiet elided client gets one send a turn (engine.probe.elide).

A reader blocked in select()/recv() on the socket makes each of the agent's sends pay for waking it
(on this VM, tens of us of the agent's CPU clock a send). These tests look at where the reading
thread actually waits, from the kernel's side (/proc/self/task/TID/syscall: the system call a blocked
thread is in, and its arguments), while real agents publish to real sockets: a polling ProbeClient and
the inspector's live source sleep, and never wait on the agent's socket. And they count the agent's
send() calls a paced turn: one for a quiet elided client (the calls that publish only elided kinds
send nothing), four for one that is told where the journal ends (every client before).
"""

from __future__ import annotations

import os
import platform
import resource
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.probe.agent_limits import AGENT_WINDOW
from engine.probe.client import ProbeClient
from engine.probe.elide import ELIDED_KINDS, RANGE_MAX
from engine.probe.poll import POLL_MAX, POLL_MIN, PollInterval
from tests.support.probe_agent import connect, one_turn, serving_pipeline, settle, wait_for
from tests.test_probe_lean import _follow, _live

T = 10.0

# x86_64 system call numbers: the waits that could be on a socket, and sleeps.
_SELECTS = {23, 270}  # select, pselect6: arg0 is nfds (one more than the highest descriptor watched)
_POLLS = {7, 271}  # poll, ppoll: arg0 points at the pollfd array, arg1 is its length (read from memory)
_EPOLLS = {232, 281, 441}  # epoll_wait, epoll_pwait(2): the descriptors are not visible here
_RECVS = {45, 47}  # recvfrom, recvmsg: arg0 is the descriptor
_SLEEPS = {35, 230}  # nanosleep, clock_nanosleep
# futex: the thread waiting for the GIL (or a lock) on its way into or out of one of the waits above. A
# loaded machine shows it now and then (a fresh-clone CI run sampled one beside 29 sleeps); it is on no
# descriptor, so the checks of what a thread waits on leave it out.
_LOCKS = {202}


# A wait seen: (system call, its first argument, the descriptors a poll() waited on; None for the rest).
Wait = tuple[int, int, frozenset[int] | None]


def _blocked_on(waits: list[Wait]) -> list[int]:
    """The system calls a thread was seen waiting in, the GIL's and locks' futex waits left out."""
    return [nr for nr, _, _ in waits if nr not in _LOCKS]

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64"
    or not Path(f"/proc/self/task/{threading.get_native_id()}/syscall").exists(),
    reason="reads x86_64 system call numbers from /proc/self/task/TID/syscall",
)


def _polled(mem: int, array: int, count: int) -> frozenset[int] | None:
    """The descriptors in a poll()'s pollfd array (struct pollfd: int fd, short events, short revents),
    read from this process's memory; None if it cannot be read (the poll returned and the memory went)."""
    if not 0 < count <= 65536:
        return None
    try:
        raw = os.pread(mem, 8 * count, array)
    except OSError:
        return None
    if len(raw) != 8 * count:
        return None
    return frozenset(fd for fd, _events, _revents in struct.iter_unpack("ihh", raw))


@pytest.fixture(params=["as_it_is", "past_1024"])
def numbers(request: pytest.FixtureRequest) -> Iterator[str]:
    """The process as it is, and holding descriptors up to past 1024, so the sockets made next are
    numbered where readable() waits with poll(), not select() (a suite's process may hold that many)."""
    if request.param == "as_it_is":
        yield request.param
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = len(os.listdir("/proc/self/fd")) + 1200
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"the descriptor limit ({hard}) does not reach past 1024 here")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1040:
            held.append(os.open(os.devnull, os.O_RDONLY))
        yield request.param
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _waits(tid: int, seconds: float) -> list[Wait]:
    """Each time thread `tid` was seen blocked, sampled for `seconds`: the system call, its first argument
    and, for a poll, the descriptors it waits on. (readable() waits with select() while every descriptor
    is numbered below 1024, and with poll() past that, as in a suite whose process holds more: the
    descriptors a poll waits on are read from its pollfd array, so these checks hold either way.)"""
    seen: list[Wait] = []
    path = Path(f"/proc/self/task/{tid}/syscall")
    mem = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                fields = path.read_text().split()
            except OSError:
                break  # the thread ended
            if fields and fields[0] not in ("running", "-1"):
                nr, a0 = int(fields[0]), int(fields[1], 16)
                fds = _polled(mem, a0, int(fields[2], 16)) if nr in _POLLS else None
                seen.append((nr, a0, fds))
            time.sleep(0.002)
    finally:
        os.close(mem)
    return seen


def _on_socket(waits: list[Wait], fd: int) -> list[Wait]:
    """The waits that could be on descriptor `fd` (a select whose set reaches it, a poll of it or whose
    set could not be read, any epoll, a recv on it)."""
    return [
        (nr, a0, fds)
        for nr, a0, fds in waits
        if (nr in _SELECTS and a0 > fd)
        or (nr in _POLLS and (fds is None or fd in fds))
        or nr in _EPOLLS
        or (nr in _RECVS and a0 == fd)
    ]


def _thread(target: Callable[[], None]) -> tuple[threading.Thread, int]:
    ident: list[int] = []
    ready = threading.Event()

    def run() -> None:
        ident.append(threading.get_native_id())
        ready.set()
        target()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    assert ready.wait(T)
    return th, ident[0]


def test_poll_interval_is_short_after_data_and_backs_off_to_a_bound() -> None:
    p = PollInterval()
    naps = [p.idle() for _ in range(20)]
    assert naps[0] == POLL_MIN and naps == sorted(naps) and naps[-1] == POLL_MAX
    p.got()
    assert p.idle() == POLL_MIN


def test_a_polling_client_waits_on_its_own_timer_never_on_the_agents_socket(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, numbers: str
) -> None:
    """recv(timeout) keeps its contract (the next event, or None once the timeout passes) while the
    thread sleeps between looks; a blocking client (the default) waits in select() on the socket."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    try:
        polling = connect(pipe, lean=True, elide=True, poll=True)
        blocking = connect(pipe, lean=True, elide=True)
        fd_of = {"polling": polling.fileno(), "blocking": blocking.fileno()}  # (while both are open)
        assert numbers != "past_1024" or min(fd_of.values()) > 1024  # (readable() polls there)
        settle(pipe.probe, 2)
        got: dict[str, list[Any]] = {"polling": [], "blocking": []}
        threads = {}
        for name, c in (("polling", polling), ("blocking", blocking)):
            threads[name] = _thread(lambda c=c, out=got[name]: out.append(c.recv(timeout=T)))
        waits = {name: _waits(tid, 0.6) for name, (_, tid) in threads.items()}
        one_turn(pipe, 0)  # the agent's turn: its `turn` event reaches both
        for name, (th, _) in threads.items():
            th.join(T)
            assert not th.is_alive()
            assert got[name][0] is not None and got[name][0]["k"] == "turn"
        # Nothing to read: None, once the timeout has passed, for both.
        t0 = time.monotonic()
        assert polling.recv(timeout=0.3) is None and time.monotonic() - t0 >= 0.3
    finally:
        pipe.close()
    polled, blocked = _blocked_on(waits["polling"]), _blocked_on(waits["blocking"])
    assert polled and all(nr in _SLEEPS for nr in polled), waits["polling"]
    assert not _on_socket(waits["polling"], fd_of["polling"])
    # The old way, for contrast: waiting on the socket itself (a select, or a poll past 1024 descriptors).
    on_socket = _on_socket(waits["blocking"], fd_of["blocking"])
    assert blocked and len(on_socket) == len(blocked), waits["blocking"]


def test_the_live_source_follows_without_waiting_on_the_agents_socket(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, numbers: str
) -> None:
    """The inspector's reader thread (LiveSource.follow) between turns of a paced agent: asleep on its
    own timer and its fetchers' wake-up, never on the probe socket; each turn still reaches it."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    try:
        src = _live(pipe)
        fd = src.client.fileno()
        assert src._wake_r.fileno() < fd  # so a select that watches only the wake-up stops below it
        assert numbers != "past_1024" or src._wake_r.fileno() > 1024  # (readable() polls there)
        out: list[dict[str, Any]] = []
        th = _follow(src, 3, out)
        reader = th.native_id
        assert reader is not None
        waits: list[Wait] = []
        for t in range(4):
            one_turn(pipe, t)
            waits += _waits(reader, AGENT_WINDOW * 3)  # the model call
        th.join(T)
        assert [tr["turn"] for tr in out] == [0, 1, 2, 3]
    finally:
        pipe.close()
    assert waits, "the reader was never seen waiting"
    assert not _on_socket(waits, fd), waits


def test_a_quiet_elided_client_costs_the_agent_one_send_a_turn_and_still_learns_the_journals_end(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """A paced agent's turn is four Pipeline calls; three publish only elided kinds. A client told where
    the journal ends (quiet=False, as every client was) is sent a batch at each: four send() calls a
    turn. A quiet one (what ProbeClient asks for by default) gets the turn's one batch with an event:
    one. It receives the same events at the same positions, and a range fetch past them says how long
    the journal is."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    writes: dict[bool, int] = {}
    got: dict[bool, list[tuple[dict[str, Any], int | None]]] = {}
    try:
        for quiet in (False, True):
            c = connect(pipe, lean=True, elide=True, quiet=quiet)
            assert c.quiet is quiet
            settle(probe, 1)
            n0 = len(pipe.journal.events)
            w0, f0, p0, s0 = probe.agent_writes, probe.agent_fallbacks, probe.wakeups, probe.agent_sends
            got[quiet] = []
            for t in range(5):
                one_turn(pipe, 10 * quiet + t)
                got[quiet].append(c.recv_at(T))  # the turn's one kept event
                time.sleep(AGENT_WINDOW)  # the model call
            writes[quiet] = probe.agent_writes - w0
            # The calls that published only elided kinds left them waiting for the turn's event: to a
            # quiet client (the Pipeline's calls then not bracketed: see agent_send) one send a turn.
            assert probe.agent_sends - s0 == (5 if quiet else 20)
            assert probe.agent_fallbacks == f0 and probe.wakeups == p0  # all sent by the agent's thread
            journal = list(pipe.journal.events)
            assert got[quiet] == [
                (e, i) for i, e in enumerate(journal) if i >= n0 and e["k"] not in ELIDED_KINDS
            ]
            if quiet:
                assert c.journal_end < len(journal)  # not told by the stream...
                last = got[quiet][-1][1]
                assert last is not None
                c.fetch_journal(last + 1, last + 1 + RANGE_MAX)
                ans = c.recv(T)
                assert ans is not None and ans["k"] == "journal"
                assert ans["size"] == len(journal)  # ...but by a range answer
                assert ans["events"] == journal[last + 1 :]
            else:
                wait_for(
                    lambda c=c: c.recv(0.05) is None and c.journal_end == len(pipe.journal.events), "no end"
                )
            c.close()
            settle(probe, 0)
    finally:
        pipe.close()
    assert writes == {False: 20, True: 5}


@pytest.mark.parametrize("fold", [False, True])
def test_a_quiet_live_source_backfills_the_whole_journal_while_the_agent_waits(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, fold: bool
) -> None:
    """The live source is not told where the journal ends, so once the agent is quiet it asks for the
    range past what it has: its events become the agent's whole journal with the agent still running
    (a save then needs nothing more from it). On the elided stream that is most of the journal; on the
    fold stream (engine.probe.elide.fold_out) only the events after the last turn closed, which wait in
    the agent's queue for the next turn's close."""
    from inspector.sources.live import LiveSource

    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    try:
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=0.2, fold=fold)
        assert src._folding == fold
        assert src.client.quiet and src.client.poll is not None
        out: list[dict[str, Any]] = []
        th = _follow(src, 10**9, out)
        for t in range(3):
            one_turn(pipe, t)
            time.sleep(AGENT_WINDOW)
        wait_for(lambda: len(out) == 3 and src._jpos == len(pipe.journal.events), "the backfill did not finish")
        assert src.fetched_events > 0 or fold
        journal = list(pipe.journal.events)  # (reading builds the agent's turns: after the view has them)
        assert [e for e in src.events if e["k"] != "turn"] == [e for e in journal if e["k"] != "turn"]
    finally:
        pipe.close()
    th.join(T)


def test_events_a_quiet_client_was_not_sent_reach_a_client_that_attaches_later_once(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """The agent's thread leaves a call's elided events waiting while only quiet clients are attached.
    A client of the whole stream attaching then gets them in its snapshot and not again live, and from
    then on every call's events are sent (no more waiting: it is not quiet)."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        quiet = connect(pipe, lean=True, elide=True)
        settle(probe, 1)
        one_turn(pipe, 0)
        assert quiet.recv(T)["k"] == "turn"  # type: ignore[index]
        assert probe._pending  # the turn's last calls' events wait (all elided)
        whole = ProbeClient.connect(os.getpid(), timeout=T, runtime_dir=probe.path.parent)
        snap = [whole.recv(T) for _ in range(whole.hello["snapshot"])]
        assert snap == list(pipe.journal.events)
        d0 = probe.agent_deferred
        n0 = len(pipe.journal.events)
        one_turn(pipe, 1)
        journal = list(pipe.journal.events)
        live = [whole.recv(T) for _ in range(len(journal) - n0)]
        assert live == journal[n0:]
        assert whole.recv(0.3) is None  # nothing twice
        assert probe.agent_deferred == d0
        ev, at = quiet.recv_at(T)
        assert (
            at == next(i for i in range(n0, len(journal)) if journal[i]["k"] == "turn") and ev == journal[at]
        )
    finally:
        pipe.close()


def test_elided_events_wait_for_a_later_flush_only_up_to_a_bound(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """A long run of calls that publish only elided kinds is not left waiting without end: past
    DEFER_EVENTS the flush moves them into the ring (sending the quiet client nothing), and the next
    turn arrives at its journal position."""
    from engine.probe import agent_send, server

    monkeypatch.setattr(agent_send, "DEFER_EVENTS", 8)
    monkeypatch.setattr(server, "DEFER_EVENTS", 8)  # (publish's own bound, for calls not bracketed)
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        c = connect(pipe, lean=True, elide=True)
        settle(probe, 1)
        w0 = probe.agent_writes
        for i in range(12):
            pipe.record_usage({"input_tokens": 10 + i, "output_tokens": 1})
        assert len(probe._pending) <= 8 + 1
        assert probe.agent_writes == w0  # moved, nothing sent
        one_turn(pipe, 0)
        journal = list(pipe.journal.events)
        ev, at = c.recv_at(T)
        assert at is not None and ev == journal[at] and journal[at]["k"] == "turn"
    finally:
        pipe.close()
