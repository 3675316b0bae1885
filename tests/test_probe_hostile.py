"""The probe against careless users and hostile same-uid clients (probe22): junk in the runtime directory,
dead connections piling up in the listener's backlog, an agent ended by SIGTERM. Real sockets, real files,
real agent processes; no timing assertions beyond generous bounds that only a broken probe reaches."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from engine.probe.client import NoSuchProcess, ProbeClient, ProbeError, list_agents
from engine.probe.runtime_dir import default_runtime_dir, ensure_runtime_dir, parse_target, pid_alive
from engine.probe.server import ProbeServer

HELLO = {"model": "claude-sonnet-4", "provider": "anthropic", "engine_version": "0.1.0"}


# ------------------------------------------------------------------ junk names in the runtime directory


@pytest.mark.parametrize("junk", ["99999999999999999999", "2147483648", "²", "1.²"])
def test_ps_skips_junk_names_that_are_no_pid_and_lists_the_agent(rtdir: Path, junk: str) -> None:
    ensure_runtime_dir(rtdir)
    (rtdir / f"{junk}.sock").write_text("junk")
    server = ProbeServer(HELLO, list, runtime_dir=rtdir)
    with server:
        agents = list_agents(rtdir)  # raised OverflowError / ValueError on such a name
    assert [a.pid for a in agents] == [os.getpid()]
    assert (rtdir / f"{junk}.sock").exists()  # not ours to delete: it is no socket


def test_ps_does_not_follow_a_symlink_planted_at_a_socket_name(rtdir: Path) -> None:
    ensure_runtime_dir(rtdir)
    elsewhere = rtdir.parent / "other.sock"
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(str(elsewhere))
    other.listen(4)
    other.settimeout(0.5)
    try:
        (rtdir / f"{os.getppid()}.sock").symlink_to(elsewhere)  # a live pid, not serving
        server = ProbeServer(HELLO, list, runtime_dir=rtdir)
        with server:
            agents = list_agents(rtdir)
        assert [a.pid for a in agents] == [os.getpid()]
        with pytest.raises(TimeoutError):
            other.accept()[0].close()  # ps connected to it (and sent it a hello)
    finally:
        other.close()


def test_attach_to_a_pid_no_process_can_have_says_no_such_process(rtdir: Path) -> None:
    ensure_runtime_dir(rtdir)
    for pid in (2**31, 10**20):
        assert pid_alive(pid) is False
        with pytest.raises(NoSuchProcess, match="no process with pid"):
            ProbeClient.connect(pid, runtime_dir=rtdir)
    assert parse_target("²") is None and parse_target("12.³") is None and parse_target("١٢") is None
    assert parse_target("12.3") == (12, 3)


# ------------------------------------------------------------------ dead connections in the backlog


def _fill_backlog_and_close(path: Path, attempts: int = 300) -> int:
    """Connect until the listener's backlog is full, then close every connection: what a connect/close
    churn (or a crashed script's connections) leaves behind. Returns how many got in."""
    socks = []
    for _ in range(attempts):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(str(path))
        except OSError:  # EAGAIN: the backlog is full
            s.close()
            continue
        socks.append(s)
    for s in socks:
        s.close()
    return len(socks)


def test_dead_connections_in_the_backlog_do_not_lock_out_an_honest_client(rtdir: Path) -> None:
    journal = [{"k": "turn", "turn": 0, "trace": {}}]
    server = ProbeServer(HELLO, lambda: journal, runtime_dir=rtdir)
    with server:
        assert _fill_backlog_and_close(server.path) > 60
        # The backlog now holds ~64 connections whose clients are gone. Each took an accept token, so
        # the agent admitted them at the budget's rate (~7 s for the lot) and this client, queued
        # behind them, timed out with "did not send its hello within 3 s".
        with ProbeClient.connect(os.getpid(), runtime_dir=rtdir, timeout=3.0) as c:
            assert c.hello["turns"] == 1
        # A second wave finds the budget as the first left it: the dead cost none of it.
        assert _fill_backlog_and_close(server.path) > 60
        with ProbeClient.connect(os.getpid(), runtime_dir=rtdir, timeout=3.0) as c:
            assert c.hello["turns"] == 1


def test_an_attach_past_the_client_limit_is_told_so_promptly_behind_a_full_backlog(rtdir: Path) -> None:
    journal = [{"k": "turn", "turn": 0, "trace": {}}]
    server = ProbeServer(HELLO, lambda: journal, runtime_dir=rtdir, max_clients=2)
    held: list[socket.socket] = []
    with server:
        try:
            for _ in range(2):
                held.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
                held[-1].connect(str(server.path))
            # Connections kept open behind the two served: each is refused for the limit. Refusals were
            # charged to the accept budget, so they drained at its rate, and this attach, queued behind
            # them, ran out its 3 s waiting for a hello instead of being told why it is not served.
            for _ in range(300):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.setblocking(False)
                try:
                    s.connect(str(server.path))
                except OSError:
                    s.close()
                    continue
                held.append(s)
            assert len(held) > 60
            with pytest.raises(ProbeError, match=r"already serves 2 probe clients \(the limit"):
                ProbeClient.connect(os.getpid(), runtime_dir=rtdir, timeout=3.0)
        finally:
            for s in held:
                s.close()


def test_a_one_client_cap_is_named_in_words_that_read_right(rtdir: Path) -> None:
    """An agent that serves one client (its limit) says so of the second: "1 probe client", not "1 probe
    clients"."""
    journal = [{"k": "turn", "turn": 0, "trace": {}}]
    server = ProbeServer(HELLO, lambda: journal, runtime_dir=rtdir, max_clients=1)
    with server:
        first = ProbeClient.connect(os.getpid(), runtime_dir=rtdir, timeout=3.0)
        try:
            with pytest.raises(ProbeError, match=r"already serves 1 probe client \(the limit"):
                ProbeClient.connect(os.getpid(), runtime_dir=rtdir, timeout=3.0)
        finally:
            first.close()


# ------------------------------------------------------------------ memory


# The client of the test below, in its own process as an inspector is: in the agent's process its decoding
# counted as the agent's CPU, and the probe's CPU budget (engine.probe.cpu_budget: CPU_SHARE of a busy
# agent's CPU) held the sends to a trickle that depended on the host (a quiet one delivered 342-492 of
# the 500 events in 20 s, a loaded one all of them).
_COUNTING_CLIENT = """
import sys, time
from pathlib import Path
from engine.probe.client import ProbeClient
pid, rtdir, n = int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
with ProbeClient.connect(pid, runtime_dir=rtdir) as client:
    print("attached", flush=True)
    got, deadline = 0, time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        if client.recv(1.0) is not None:
            got += 1
print(got, flush=True)
"""


def test_events_every_client_has_been_sent_are_not_kept_by_the_probe(rtdir: Path) -> None:
    # The journal keeps its last 4,096 events in memory and moves older ones to disk; the probe kept the
    # last `queue_limit` (10,000 by default) in its ring while any client was attached, however fast it
    # read. Here the journal keeps none: what the probe holds is all that is held.
    server = ProbeServer(HELLO, list, runtime_dir=rtdir, queue_limit=2000)
    n, size = 500, 20_000
    with server:
        reader = subprocess.Popen(
            [sys.executable, "-c", _COUNTING_CLIENT, str(os.getpid()), str(rtdir), str(n)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        try:
            assert reader.stdout is not None
            assert reader.stdout.readline().strip() == "attached"
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                for i in range(n):
                    server.publish({"k": "note", "i": i, "text": f"{i:08d}" * (size // 8)})
                out, _ = reader.communicate(timeout=180)
                assert int(out.strip()) == n
                held = 0
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:  # (the I/O thread lets go right after its send)
                    held = tracemalloc.get_traced_memory()[0] - base
                    if held < n * size // 10:
                        break
                    time.sleep(0.05)
            finally:
                tracemalloc.stop()
        finally:
            if reader.poll() is None:
                reader.kill()
                reader.wait()
    assert held < n * size // 10, f"the probe still holds {held} bytes of the {n * size} it sent"


# ------------------------------------------------------------------ where the runtime directory is


def test_a_relative_xdg_runtime_dir_is_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Relative, it named another directory from each working directory: an agent started in its checkout
    # put its socket there, and an inspector started anywhere else did not find it.
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "run")
    assert default_runtime_dir() == Path("/tmp") / f"contextpipe-{os.getuid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    assert default_runtime_dir() == tmp_path / "run" / "contextpipe"


SERVING_AGENT = """
import sys
from engine.probe.server import ProbeServer
server = ProbeServer({"model": "m", "provider": "anthropic"}, lambda: [{"k": "turn", "turn": 0, "trace": {}}])
server.start()
print(server.path, flush=True)
sys.stdin.read()
server.close()
"""


def test_attach_finds_an_agent_started_with_another_xdg_runtime_dir(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    # The agent runs with one XDG_RUNTIME_DIR (a desktop session's, a service's), the inspector with
    # another or none (an ssh login): attach looked only in its own and said the agent was not serving.
    agents, mine = rtdir.parent / "agent-xdg", rtdir.parent / "my-xdg"
    agents.mkdir(mode=0o700)
    mine.mkdir(mode=0o700)
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "XDG_RUNTIME_DIR": str(agents),
    }
    agent = subprocess.Popen(
        [sys.executable, "-c", SERVING_AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert agent.stdout is not None
        assert Path(agent.stdout.readline().strip()).parent == agents / "contextpipe"
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(mine))
        with ProbeClient.connect(agent.pid, timeout=10.0) as c:
            assert c.hello["pid"] == agent.pid and c.hello["turns"] == 1
    finally:
        agent.communicate("", timeout=30)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a directory owned by another uid")
def test_an_xdg_runtime_dir_of_another_user_is_not_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # `sudo -E` keeps the invoking user's XDG_RUNTIME_DIR: a root agent made its `contextpipe` there,
    # owned by root, and every later agent of that user was refused it (and ran without its probe).
    theirs = tmp_path / "run-user-65534"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(theirs))
    assert (
        default_runtime_dir() == Path("/tmp") / f"contextpipe-{os.getuid()}"
    )  # the agent's and the client's


def test_a_runtime_dir_that_cannot_be_created_says_what_to_do(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    server = ProbeServer(HELLO, list, runtime_dir=blocker / "contextpipe")
    with pytest.raises(ProbeError, match=r"cannot create the probe runtime directory .*XDG_RUNTIME_DIR"):
        server.start()  # was a bare NotADirectoryError
    server.close()


# ------------------------------------------------------------------ the agent's side on exit


def _worker_agent(rtdir: str, ready: Any, go: Any) -> None:
    """An agent in a multiprocessing worker: serves, publishes after its inspector attached, and returns
    without closing anything (as a worker's target does)."""
    journal: list[dict[str, Any]] = [{"k": "session", "n": 0}]
    server = ProbeServer(HELLO, lambda: journal, runtime_dir=Path(rtdir))
    server.start()
    ready.put(str(server.path))
    go.wait(10)
    for i in range(1, 31):
        ev = {"k": "turn", "turn": i, "trace": {}}
        journal.append(ev)
        server.publish(ev)


def test_an_agent_in_a_multiprocessing_worker_flushes_and_removes_its_socket(rtdir: Path) -> None:
    # The worker ends with os._exit() (the fork start method): no atexit hook runs. Its inspector got the
    # snapshot and none of the thirty events, which were still waiting in the I/O thread, and the socket
    # file was left behind.
    ctx = multiprocessing.get_context("fork")
    ready, go = ctx.Queue(), ctx.Event()
    worker = ctx.Process(target=_worker_agent, args=(str(rtdir), ready, go))
    worker.start()
    try:
        path = Path(ready.get(timeout=10))
        with ProbeClient.connect_path(path, worker.pid or 0, 10.0) as c:
            go.set()
            got = list(c.events())
        worker.join(10)
        assert worker.exitcode == 0
        assert [e.get("turn") for e in got] == [None, *range(1, 31)]
        assert not path.exists()
    finally:
        if worker.is_alive():
            worker.kill()
            worker.join()


def test_a_newcomer_at_the_limit_is_served_when_the_clients_holding_it_are_gone(rtdir: Path) -> None:
    """The fresh-clone CI's 'already serves 32 probe clients' (83d7ce0), made deterministic: the clients
    holding every slot close, and a newcomer connects, while the I/O thread is held off (here by holding
    its pass lock; in the CI by load, and a pass in CPU debt that handled the listener first). Its next
    pass met the listener before the closed clients' EOFs, and refused the newcomer for slots held by
    nobody. Now a newcomer at the limit first frees the slots of clients already gone (admission.py)."""
    journal = [{"k": "turn", "turn": 0, "trace": {}}]
    server = ProbeServer(HELLO, lambda: journal, runtime_dir=rtdir, max_clients=2)
    with server:
        holders = []
        for _ in range(2):
            holders.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            holders[-1].connect(str(server.path))
        give_up = time.monotonic() + 30
        while len(server._clients) < 2 and time.monotonic() < give_up:
            time.sleep(0.01)
        assert len(server._clients) == 2
        newcomer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        early = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with server._pass_lock:  # no pass runs until the slots' holders are gone and the newcomer waits
            # A connection first, so the I/O thread wakes for the listener alone and waits for this lock
            # with its pass already chosen (the order the CI's loaded pass met them in). The pause only
            # orders the events: if the thread wakes later, it also sees the EOFs, and passes either way.
            early.connect(str(server.path))
            early.close()
            time.sleep(0.2)
            for s in holders:
                s.close()
            newcomer.connect(str(server.path))
        try:
            newcomer.settimeout(10)
            said = newcomer.recv(4096)
        finally:
            newcomer.close()
        assert b"too_many_clients" not in said and b"hello" in said, said
