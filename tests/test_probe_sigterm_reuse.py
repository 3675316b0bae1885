"""An agent ended by SIGTERM, and a socket whose pid now belongs to another process (probeotel23).

SIGTERM with no handler of the agent's own left the socket file behind; `ps` and `attach` then judged it
by whether its pid was alive and something listened, which a reused pid (or a listener inherited by a
child the dead agent forked) defeats. Real agent processes, real sockets, real signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.probe.client import NotServing, ProbeClient, ProbeError, list_agents
from engine.probe.discover import _remove_stale
from engine.probe.runtime_dir import ensure_runtime_dir, socket_path, start_ticks_ns
from engine.probe.server import ProbeServer

ROOT = Path(__file__).resolve().parents[1]
HELLO = {"model": "claude-sonnet-4", "provider": "anthropic", "engine_version": "0.1.0"}

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")


AGENT = r"""
import os, signal, sys, time
from pathlib import Path
from engine.probe.server import ProbeServer

rt, mode, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])

def mine(signum, frame):
    marker.write_text("handled")
    if mode == "returns":
        return
    previous = chained[0]
    if callable(previous):
        previous(signum, frame)  # a chaining handler: the one it replaced does its part
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

chained = [None]
if mode == "returns":
    signal.signal(signal.SIGTERM, mine)  # the agent's own handler, set before the probe starts
server = ProbeServer({"model": "m", "provider": "anthropic"}, list, runtime_dir=Path(rt))
server.start()
if mode == "chains_after":
    chained[0] = signal.signal(signal.SIGTERM, mine)  # set after the probe started
print(server.path, flush=True)
while True:
    time.sleep(0.05)
"""


def _agent(rtdir: Path, mode: str, marker: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(rtdir), mode, str(marker)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    path = Path(proc.stdout.readline().strip())
    assert path.name == f"{proc.pid}.sock", path
    return proc, path


def test_sigterm_with_no_handler_removes_the_socket_and_still_kills_by_sigterm(rtdir: Path, tmp_path: Path) -> None:
    proc, path = _agent(rtdir, "default", tmp_path / "marker")
    try:
        assert path.exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == -signal.SIGTERM  # died by the signal, as with no handler at all
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not path.exists()  # was left behind for ps and attach to judge
    assert not (tmp_path / "marker").exists()


def test_a_handler_set_after_the_probe_that_chains_still_gets_the_socket_removed(rtdir: Path, tmp_path: Path) -> None:
    proc, path = _agent(rtdir, "chains_after", tmp_path / "marker")
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "marker").read_text() == "handled"  # the agent's handler ran
    assert not path.exists()


def test_a_handler_the_agent_set_before_keeps_it_and_its_probe_running(rtdir: Path, tmp_path: Path) -> None:
    proc, path = _agent(rtdir, "returns", tmp_path / "marker")
    try:
        proc.send_signal(signal.SIGTERM)
        # Wait for the text, not the file: write_text creates the file before it writes, and a read in
        # between got '' (seen in a loaded run).
        marker = tmp_path / "marker"
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text() == "handled") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.read_text() == "handled"
        time.sleep(0.2)
        assert proc.poll() is None  # its handler returned: it lives on, and so does its probe
        with ProbeClient.connect(proc.pid, runtime_dir=rtdir, timeout=5) as c:
            assert c.hello["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()


def _planted(rtdir: Path, pid: int) -> tuple[socket.socket, Path]:
    """A socket at `<pid>.sock` made by an earlier process (its recorded start is this test process's,
    not `pid`'s) whose listener lives on, as in a child the dead agent forked: connections are queued,
    never answered."""
    ensure_runtime_dir(rtdir)
    path = socket_path(pid, rtdir)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    start = start_ticks_ns(os.getpid())
    assert start is not None and start != start_ticks_ns(pid)
    os.utime(path, ns=(time.time_ns(), start))  # what the dead agent's bind recorded
    return listener, path


@pytest.fixture
def other() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is no agent: the one the dead agent's pid now names."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(0.05)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_ps_drops_a_socket_whose_pid_now_names_another_process(rtdir: Path, other: subprocess.Popen[bytes]) -> None:
    listener, path = _planted(rtdir, other.pid)
    try:
        agents = list_agents(rtdir, timeout=10.0)
        # It was listed with an error (its hello never came) after a whole timeout, on every `ps`: now
        # the socket is dropped for its recorded start before anything connects to it, so the listener
        # (which never answers) has no connection waiting.
        assert [a.pid for a in agents] == []
        assert not path.exists()
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    finally:
        listener.close()


def test_attach_to_a_reused_pid_says_the_socket_is_an_earlier_process_s(
    rtdir: Path, other: subprocess.Popen[bytes]
) -> None:
    listener, path = _planted(rtdir, other.pid)
    try:
        with pytest.raises(NotServing, match="earlier process with this pid"):
            ProbeClient.connect(other.pid, runtime_dir=rtdir, timeout=1.0)  # was a ProbeTimeout after 1 s
    finally:
        listener.close()


def test_an_agent_given_a_reused_pid_replaces_the_earlier_process_s_socket(rtdir: Path) -> None:
    # This process is the agent now; the socket at its pid was made by an earlier process (recorded
    # start 1 tick in), whose listener a child of it still holds. The agent refused to serve at all.
    ensure_runtime_dir(rtdir)
    path = socket_path(os.getpid(), rtdir)
    held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    held.bind(str(path))
    held.listen(8)
    os.utime(path, ns=(time.time_ns(), 10**7))
    try:
        server = ProbeServer(HELLO, list, runtime_dir=rtdir)
        with server:
            with ProbeClient.connect(os.getpid(), runtime_dir=rtdir, timeout=5) as c:
                assert c.hello["pid"] == os.getpid()
            assert [a.pid for a in list_agents(rtdir)] == [os.getpid()]  # its own record matches
    finally:
        held.close()


def test_a_second_server_in_the_same_process_is_still_refused(rtdir: Path) -> None:
    with ProbeServer(HELLO, list, runtime_dir=rtdir):
        with pytest.raises(ProbeError, match="already serving"):
            ProbeServer(HELLO, list, runtime_dir=rtdir).start()


def test_ps_removes_only_the_file_it_judged_stale(rtdir: Path) -> None:
    # Between ps's look at a dead agent's socket and its unlink, an agent that got the pid renames its
    # own socket into place: that new file must stay.
    ensure_runtime_dir(rtdir)
    path = rtdir / "4242.sock"
    old = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old.bind(str(path))
    seen = os.lstat(path)
    new = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    new.bind(str(rtdir / ".4242.new"))
    os.rename(rtdir / ".4242.new", path)
    try:
        _remove_stale(path, seen)
        assert path.exists()
        _remove_stale(path, os.lstat(path))
        assert not path.exists()
    finally:
        old.close()
        new.close()


# The main thread in one long call into C that does not look for signals (here builtins.sum over a range:
# no bytecode runs until it returns), as an agent in a C extension's computation is.
IN_C = r"""
import sys, time
from pathlib import Path
from engine.probe.server import ProbeServer

server = ProbeServer({"model": "m", "provider": "anthropic"}, list, runtime_dir=Path(sys.argv[1]))
server.start()
per = float("inf")
for _ in range(5):  # the fastest of five: a run slowed by a loaded machine made n small, and the "long"
    t = time.perf_counter(); sum(range(10**6)); per = min(per, time.perf_counter() - t)  # call short
n = int(10**6 * float(sys.argv[2]) / max(per, 1e-6))  # at least about that many seconds in C
print(server.path, flush=True)
sum(range(n))
print("returned", flush=True)
time.sleep(30)
"""


def _agent_in_c(rtdir: Path, seconds: float) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", IN_C, str(rtdir), str(seconds)], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    path = Path(proc.stdout.readline().strip())
    assert path.name == f"{proc.pid}.sock", path
    # The path is printed just before the call: a SIGTERM sent between the two ran its handler at once (the
    # agent died by SIGTERM at 0.5 s; seen under load). The call has begun once the agent has spent CPU
    # time after the print (everything else in it is idle): 0.2 s of it.
    try:
        start = _cpu_ticks(proc.pid)
        deadline = time.monotonic() + 30
        while _cpu_ticks(proc.pid) - start < 0.2 * os.sysconf("SC_CLK_TCK"):
            assert time.monotonic() < deadline, "the agent did not start its long call"
            time.sleep(0.02)
    except BaseException:  # (the caller's finally is not yet in force: no agent left behind)
        proc.kill()
        proc.wait()
        raise
    return proc, path


def _cpu_ticks(pid: int) -> int:
    """The process's user + system CPU time in clock ticks (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_sigterm_during_a_long_c_call_waits_for_it_then_removes_the_socket(rtdir: Path) -> None:
    """What the probe's docs say (server._remove_sockets_on_sigterm): Python runs a signal's handler
    between bytecodes, so SIGTERM's, which removes the socket, waits for the main thread to leave C; until
    then the agent goes on and its socket stays. Then it removes the socket and dies by SIGTERM, as with no
    handler. (Whether the probe answers meanwhile depends on the call: builtins.sum holds the GIL, so the
    probe's thread waits too; a hello sent during it was answered or not by which thread got the GIL first
    when the call returned, the handler's or the probe's: flaky, so not checked.)"""
    proc, path = _agent_in_c(rtdir, 4.0)
    try:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert proc.poll() is None and path.exists(), "the handler waits for the C call to return"
        assert proc.wait(60) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not path.exists()


def test_an_agent_killed_before_its_sigterm_handler_ran_leaves_a_socket_ps_and_attach_judge_stale(
    rtdir: Path,
) -> None:
    """A supervisor's SIGTERM, then SIGKILL after its grace period, while the agent is still in C: no
    handler and no atexit ran, so the file stays; the next `ps` drops and removes it, `attach` says so."""
    proc, path = _agent_in_c(rtdir, 20.0)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    proc.kill()
    assert proc.wait(10) == -signal.SIGKILL
    assert path.exists(), "nothing removed it"
    with pytest.raises(ProbeError, match=f"no process with pid {proc.pid}"):
        ProbeClient.connect(proc.pid, runtime_dir=rtdir, timeout=1.0)
    assert [a.pid for a in list_agents(rtdir, timeout=1.0)] == []
    assert not path.exists(), "ps removed the stale socket"
