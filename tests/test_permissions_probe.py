"""Attaching to what cannot be attached to, with real processes of real users (see test_permissions.py):
another user's agent (each way round), a process that is no agent, a pid that does not exist or exited
between `ps` and `attach`, a stale socket a killed agent left, and a runtime directory that is not safely
the user's own. One line each with what to do, exit 1, and the agent never stopped or slowed."""

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

from tests.support.unprivileged import IS_ROOT, Sandbox, child_uid, one_line, sandbox

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with sandbox() as s:
        yield s


class _Agent:
    """`cp-inspect demo --no-tui` (a serving agent), started as the suite's user or as the child user."""

    def __init__(self, proc: subprocess.Popen[bytes], rt: Path) -> None:
        self.proc = proc
        out = proc.stdout.readline().decode() if proc.stdout else ""
        assert out.startswith("demo agent pid "), out
        self.pid = int(out.split()[3].rstrip(","))
        self.socket = rt / f"{self.pid}.sock"
        deadline = time.monotonic() + 60
        while not self.socket.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the agent never served"
            time.sleep(0.05)

    def ended_well(self) -> None:
        """It ran on to its last turn and exited 0 (no attach attempt stopped or crashed it)."""
        out, _ = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, out.decode(errors="replace")[-800:]
        assert b"turn   7" in out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=30)


ARGS = ["-m", "inspector", "demo", "--no-tui", "--turns", "8", "--delay", "0.4"]


def _own_agent(xdg: Path) -> _Agent:
    tmp = xdg.parent / "suite-tmp"  # its recording, removed with the sandbox
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(xdg), "TMPDIR": str(tmp)}
    env.pop("COLUMNS", None)
    proc = subprocess.Popen(
        [sys.executable, *ARGS],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    return _Agent(proc, xdg / "contextpipe")


def _cli_as_suite(*args: str, xdg: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(xdg)}
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "inspector", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def _child_agent(sb: Sandbox) -> tuple[_Agent, Path]:
    """The demo agent run as the child user (serving in a runtime directory of its own), and an empty
    private runtime directory for the suite (root) to look in."""
    xdg = sb.dir("xdg", writable=True)
    proc = sb.popen(
        [sys.executable, *ARGS],
        env={"XDG_RUNTIME_DIR": str(xdg)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    agent = _Agent(proc, xdg / "contextpipe")
    mine = sb.base / "root-rt"
    mine.mkdir(mode=0o700)
    return agent, mine


@pytest.mark.skipif(
    not IS_ROOT, reason="another user's agent needs a second user: the suite runs as root only"
)
def test_attaching_to_another_users_agent_names_its_user_and_how(sb: Sandbox) -> None:
    theirs = sb.dir("theirs", writable=False)  # the agent's (root's) XDG_RUNTIME_DIR
    mine = sb.dir("mine", writable=True)  # the inspector's (nobody's)
    agent = _own_agent(theirs)
    try:
        for args in (
            ["attach", str(agent.pid)],
            ["explain", str(agent.pid)],
            ["find", str(agent.pid), "latch"],
        ):
            r = sb.cli(*args, env={"XDG_RUNTIME_DIR": str(mine)})
            assert r.returncode == 1, r.stderr
            line = one_line(r.stderr)
            assert f"process {agent.pid} belongs to root (uid 0), not to you, nobody" in line, line
            assert "run cp-inspect as that user (sudo -u root cp-inspect ...)" in line, line
        r = sb.cli("ps", env={"XDG_RUNTIME_DIR": str(mine)})
        assert r.returncode == 0 and str(agent.pid).encode() not in r.stdout, r.stdout
        agent.ended_well()
    finally:
        agent.stop()


@pytest.mark.skipif(
    not IS_ROOT, reason="another user's agent needs a second user: the suite runs as root only"
)
def test_root_attaching_to_another_users_agent_is_not_told_to_start_serving(sb: Sandbox) -> None:
    # Root may signal any process, so kill(0) did not say it was another user's: attach looked in root's
    # own runtime directory and said "process N is not serving the probe. Start the agent with
    # serve=True", of an agent that was serving (to its own user only, as the server allows).
    agent, mine = _child_agent(sb)
    try:
        r = _cli_as_suite("attach", str(agent.pid), xdg=mine)
        assert r.returncode == 1, r.stderr
        line = one_line(r.stderr)
        assert (
            f"process {agent.pid} belongs to nobody (uid {child_uid()}), not to you, root (uid 0)" in line
        ), line
        assert "(sudo -u nobody cp-inspect ...)" in line and "not serving" not in line, line
        agent.ended_well()
    finally:
        agent.stop()


def test_attaching_to_a_process_that_is_not_an_agent(sb: Sandbox) -> None:
    xdg = sb.dir("xdg", writable=True)
    sleeper = sb.popen(["sleep", "60"])  # the child user's own process, serving nothing
    try:
        r = sb.cli("attach", str(sleeper.pid), env={"XDG_RUNTIME_DIR": str(xdg)})
        assert r.returncode == 1, r.stderr
        line = one_line(r.stderr)
        assert f"process {sleeper.pid} is not serving the probe" in line and "CONTEXTPIPE_SERVE=1" in line, (
            line
        )
        assert sleeper.poll() is None  # not signalled, not stopped
    finally:
        sleeper.kill()
        sleeper.wait()
    if os.stat("/proc/1").st_uid != child_uid():  # pid 1, another user's: whose, and how
        r = sb.cli("attach", "1", env={"XDG_RUNTIME_DIR": str(xdg)})
        assert r.returncode == 1 and "process 1 belongs to " in one_line(r.stderr), r.stderr


def test_a_pid_that_does_not_exist_or_exited_after_ps(sb: Sandbox) -> None:
    xdg = sb.dir("xdg", writable=True)
    env = {"XDG_RUNTIME_DIR": str(xdg)}
    proc = sb.popen([sys.executable, *ARGS], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    agent = _Agent(proc, xdg / "contextpipe")
    try:
        r = sb.cli("ps", "--json", env=env)
        assert r.returncode == 0 and f'"pid": {agent.pid}'.encode() in r.stdout, r.stdout
        os.kill(agent.pid, signal.SIGKILL)  # between ps and attach; its socket stays behind
        deadline = time.monotonic() + 30
        while os.path.exists(f"/proc/{agent.pid}") and _state(agent.pid) != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert agent.socket.exists()
        r = sb.cli("attach", str(agent.pid), env=env)
        assert r.returncode == 1, r.stderr
        line = one_line(r.stderr)
        assert (
            f"no process with pid {agent.pid} (it may have exited); `cp-inspect ps` lists live agents" in line
        )
        r = sb.cli("ps", env=env)  # the stale socket is cleaned by ps
        assert r.returncode == 0 and b"Traceback" not in r.stderr and not agent.socket.exists(), r.stderr
    finally:
        agent.stop()
    r = sb.cli("attach", str(2**31 - 2), env=env)  # never a pid here
    assert r.returncode == 1 and "no process with pid" in one_line(r.stderr)
    r = sb.cli("attach", "12ab", env=env)
    assert r.returncode == 2 and "is not a pid" in one_line(r.stderr)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _unsafe_runtime_dir(sb: Sandbox, how: str) -> tuple[Path, Path, str]:
    """(XDG_RUNTIME_DIR, its contextpipe directory made unsafe as `how` says, what the refusal says)."""
    if how == "another user's" and not IS_ROOT:
        pytest.skip("a directory owned by another user needs root to make")
    xdg = sb.dir("xdg", writable=True)
    rt = xdg / "contextpipe"
    rt.mkdir()
    if how == "another user's":
        rt.chmod(0o755)  # root's: the child may read it but not own it
        return (
            xdg,
            rt,
            (
                f"is owned by uid {os.getuid()}, not by you (uid {child_uid()}); refusing to use it. Set "
                "XDG_RUNTIME_DIR to a directory of your own, or have its owner remove it"
            ),
        )
    os.chown(rt, child_uid(), -1)
    rt.chmod(0o770 if how == "group-writable" else 0o777)
    return xdg, rt, f"has mode {rt.stat().st_mode & 0o777:04o}; it must be 0700 (fix with: chmod 700 {rt})"


@pytest.mark.parametrize("how", ["another user's", "group-writable", "world-writable"])
def test_a_runtime_directory_that_is_not_safely_ours_is_refused_and_the_agent_runs_on(
    sb: Sandbox, how: str
) -> None:
    xdg, rt, says = _unsafe_runtime_dir(sb, how)
    env = {"XDG_RUNTIME_DIR": str(xdg)}
    for args in (["ps"], ["attach", str(os.getpid())]):
        r = sb.cli(*args, env=env)
        assert r.returncode == 1, r.stderr
        line = one_line(r.stderr)
        assert f"probe runtime directory {rt} {says}" in line, line
    # An agent told to serve runs on without its probe, and says why once; it puts nothing in there.
    r = sb.cli("demo", "--no-tui", "--turns", "3", "--delay", "0", env=env, timeout=120)
    assert r.returncode == 0 and b"turn   2" in r.stdout, r.stderr
    warn = [line for line in r.stderr.decode().splitlines() if line]
    assert len(warn) == 1 and "the live probe is disabled, the agent runs on without it" in warn[0], warn
    assert list(rt.iterdir()) == []


@pytest.mark.parametrize(
    ("mode", "used"), [(0o700, True), (0o755, True), (0o1777, True), (0o777, False), (0o770, False)]
)
def test_an_xdg_runtime_dir_others_may_write_is_not_used(tmp_path: Path, mode: int, used: bool) -> None:
    # The probe's own `contextpipe` directory was checked (ours, 0700), but not the XDG_RUNTIME_DIR it is
    # in: in a directory others may write without the sticky bit, anyone can rename ours away and put
    # theirs in its place. The XDG spec requires that directory to be the user's alone; one that is not
    # is treated as unset (as one owned by another user already was): /tmp/contextpipe-<uid>.
    from engine.probe.runtime_dir import SUBDIR, runtime_dir_from

    xdg = tmp_path / "xdg"
    xdg.mkdir()
    xdg.chmod(mode)
    expected = xdg / SUBDIR if used else Path("/tmp") / f"contextpipe-{os.getuid()}"
    assert runtime_dir_from(str(xdg)) == expected


@pytest.mark.parametrize("how", ["another user's", "world-writable"])
def test_the_demo_refuses_a_runtime_directory_it_cannot_attach_through_before_starting(
    sb: Sandbox, how: str
) -> None:
    # The demo's inspector attaches through the probe: with a runtime directory the probe refuses, the
    # whole agent ran without one, then the demo said "the agent (pid N) exited with code 0" above the
    # agent's own warning. Now the probe's reason, before anything starts (no recording made).
    xdg, rt, says = _unsafe_runtime_dir(sb, how)
    rec = sb.home / "demo.cpsession"
    leader, follower = os.openpty()  # the demo's UI needs a terminal on stdin
    try:
        r = sb.run(
            [sys.executable, "-m", "inspector", "demo", "--turns", "3", "--delay", "0", "--record", str(rec)],
            env={"XDG_RUNTIME_DIR": str(xdg), "TERM": "xterm"},
            stdin=follower,
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert r.returncode == 1, r.stderr
    line = one_line(r.stderr)
    assert line.startswith(f"cp-inspect: probe runtime directory {rt} {says}"), line
    assert not rec.exists() and list(rt.iterdir()) == []


@pytest.mark.skipif(not IS_ROOT, reason="making a socket another user's needs root")
def test_attach_to_a_socket_another_user_owns_in_our_directory_says_what_to_do(sb: Sandbox) -> None:
    # It said "probe socket P is owned by uid 65534, not by you", and nothing to do; ps said the fix.
    xdg = sb.base / "rt"
    xdg.mkdir(mode=0o700)
    rt = xdg / "contextpipe"
    rt.mkdir(mode=0o700)
    live = subprocess.Popen(["sleep", "60"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    socks = []
    try:
        for pid in (live.pid, gone.pid):
            s = socket.socket(socket.AF_UNIX)
            s.bind(str(rt / f"{pid}.sock"))
            s.listen()
            socks.append(s)
            os.chown(rt / f"{pid}.sock", child_uid(), -1)
        r = _cli_as_suite("attach", str(live.pid), xdg=xdg)
        assert r.returncode == 1, r.stderr
        line = one_line(r.stderr)
        assert (
            f"probe socket {rt / f'{live.pid}.sock'} is owned by uid {child_uid()}, not by you (uid 0)"
            in line
        )
        assert f"only uid {child_uid()} can attach to it: run cp-inspect as that user" in line, line
        assert live.poll() is None
    finally:
        for s in socks:
            s.close()
        live.kill()
        live.wait()
    r = _cli_as_suite("attach", str(gone.pid), xdg=xdg)  # its process gone: no process, as for any pid
    assert r.returncode == 1 and f"no process with pid {gone.pid}" in one_line(r.stderr)


@pytest.mark.skipif(
    not IS_ROOT, reason="another user's agent needs a second user: the suite runs as root only"
)
def test_ps_says_how_many_agents_of_other_users_it_cannot_show(sb: Sandbox) -> None:
    """ps as one user said nothing of another user's agent (in that user's private runtime directory,
    its probe serving only its own user): "no live agents" beside it. Now one warning line on stderr,
    whose agents and how to see them, both ways round (an agent of root's, ps as nobody; an agent of
    nobody's, ps as root). Other agents running on the host may add to the counts, never remove."""
    import re

    theirs = sb.dir("theirs", writable=False)
    mine = sb.dir("mine", writable=True)
    agent = _own_agent(theirs)
    try:
        r = sb.cli("ps", env={"XDG_RUNTIME_DIR": str(mine)})
        assert r.returncode == 0 and str(agent.pid).encode() not in r.stdout, r.stdout
        line = one_line(r.stderr)
        assert re.fullmatch(
            r"cp-inspect: warning: \d+ agents? of other users not shown \(.*root \(uid 0\): \d+.*\): a probe "
            r"serves only its own user; run cp-inspect as that user \(sudo -u \w+ cp-inspect ps\)",
            line,
        ), line
        r = sb.cli("ps", "--json", env={"XDG_RUNTIME_DIR": str(mine)})
        assert r.returncode == 0 and r.stdout.strip() == b"[]", r.stdout  # stdout stays what a script parses
        assert "root (uid 0): " in one_line(r.stderr)
    finally:
        agent.stop()

    agent, own = _child_agent(sb)
    try:
        r = _cli_as_suite("ps", xdg=own)
        assert r.returncode == 0 and str(agent.pid).encode() not in r.stdout, r.stdout
        line = next(x for x in r.stderr.decode().splitlines() if "of other users not shown" in x)
        assert f"nobody (uid {child_uid()}): " in line and line.startswith("cp-inspect: warning: "), line
    finally:
        agent.stop()
