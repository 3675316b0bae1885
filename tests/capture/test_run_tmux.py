"""`cp-inspect run` with the TUI, in a real terminal (tmux), used as a person would: an agent that holds
two conversations (a main one, then a sub-agent's) through the proxy to the stand-in. The inspector
opens on the first session, announces the second, `o` lists both, Enter opens the sub-agent's, q comes
back to the list, q leaves; the agent's exit code comes back and both sessions are recorded."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.capture.conftest import verify_ok
from tests.capture.standin import StandIn

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux to drive a real terminal")


def _tmux(sock: Path, *args: str) -> list[str]:
    """A tmux command line for the test's own tmux server (socket `sock`, no user config). On the machine's
    shared default server two things failed under load, neither the run's fault: the server exits when its
    last session ends, and another user's session ending as this one was created took this one along ("no
    server running" while the test waited: 3 runs in 36, two loops at once); and a server this test had
    started carries the test's command line (record dir, python), so when another user's session kept it
    alive it counted as a process left behind (and was then killed, with everyone's sessions)."""
    return ["tmux", "-S", str(sock), "-f", "/dev/null", *args]


def _pane(sock: Path, name: str) -> str:
    return subprocess.run(
        _tmux(sock, "capture-pane", "-p", "-t", name), capture_output=True, text=True, timeout=30
    ).stdout


def _rows(screen: str) -> list[str]:
    """The session list's rows (`PID.N  model ...`), as on screen."""
    return [line for line in screen.splitlines() if re.match(r"\s*\d+\.\d+\s", line)]


def _wait_for(sock: Path, name: str, text: str, timeout: float = 180.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        screen = _pane(sock, name)
        if text in screen:
            return screen
        assert time.monotonic() < deadline, f"{text!r} never appeared; the screen:\n{screen}"
        time.sleep(0.3)


def _end_tmux(sock: Path, name: str) -> None:
    """Close the test's terminal (its processes get SIGHUP), then its tmux server."""
    subprocess.run(_tmux(sock, "kill-session", "-t", name), capture_output=True)
    subprocess.run(_tmux(sock, "kill-server"), capture_output=True)


def _start_run(sock: Path, name: str, rec: Path, rtdir: Path, standin: StandIn, agent: str, then: str) -> None:
    """`cp-inspect run -- AGENT` in a new 120x40 tmux session, `then` run in its shell afterwards.

    COLUMNS and LINES are unset: under pytest the process environment the tmux server copies can carry
    COLUMNS=80 LINES=24 (seen on this machine, though os.environ has neither), and Textual takes them
    over the pane's real size: the inspector drew 80x24 in the 120x40 pane."""
    shell = (
        f"cd {ROOT} && env -u OPENAI_BASE_URL -u OPENAI_API_BASE -u ANTHROPIC_BASE_URL -u COLUMNS -u LINES "
        f"XDG_RUNTIME_DIR={rtdir} PYTHONPATH={ROOT} {sys.executable} -m inspector.cli run "
        f"--record-dir {rec} --upstream {standin.url} -- {agent}; {then}"
    )
    subprocess.run(_tmux(sock, "new-session", "-d", "-s", name, "-x", "120", "-y", "40", shell), check=True)


def test_run_tui_in_tmux_shows_every_session(standin: StandIn, tmp_path: Path, rtdir: Path) -> None:
    name = f"cprun-{uuid.uuid4().hex[:8]}"
    rec = tmp_path / "rec"
    sock = rtdir / "tmux"  # (a short path: Unix socket paths are limited)
    agent = f"{sys.executable} -m tests.capture.script_agent --turns 5 --delay 1.0 --conversations 2 --exit 3"
    _start_run(sock, name, rec, rtdir, standin, agent, "echo EXIT=$?; sleep 300")
    try:
        screen = _wait_for(sock, name, "You are a script agent.")  # the first session, in the inspector
        # The key is in the footer: waited for, since KeysFooter lays its keys out after the first frame
        # (it measures them all shown, then hides what does not fit), so on a loaded machine the pane can
        # be read between the session's first frame and the footer's.
        screen = _wait_for(sock, name, "o Session", timeout=30.0)
        screen = _wait_for(sock, name, "press o to list")  # the sub-agent's session, announced
        subprocess.run(_tmux(sock, "send-keys", "-t", name, "o"), check=True)
        _wait_for(sock, name, "PID        MODEL")  # the run's session list
        deadline = time.monotonic() + 60
        while len(rows := _rows(_pane(sock, name))) < 2:
            assert time.monotonic() < deadline, _pane(sock, name)
            time.sleep(0.3)
        assert sorted(r.split()[0].split(".")[1] for r in rows) == ["1", "2"], rows
        # Put the cursor on session 2 by its place in an order that no longer changes. The list is
        # sorted by cost and its cursor stays on the session it was on when the order changes (as
        # designed): the sub-agent's calls overtake the first session's while it runs, so the
        # highlighted row was not always the top one (the test opened session 1 and waited for
        # "sub-agent 1" in vain whenever it read the list after that change, as on a loaded machine).
        # Sorted by PID (`s` four times from cost) the order is fixed; C-Home puts the cursor on top.
        for _ in range(4):
            subprocess.run(_tmux(sock, "send-keys", "-t", name, "s"), check=True)
        _wait_for(sock, name, "sort PID")
        subprocess.run(_tmux(sock, "send-keys", "-t", name, "C-Home"), check=True)
        rows = _rows(_wait_for(sock, name, "sort PID"))
        targets = [r.split()[0] for r in rows]
        target = next(t for t in targets if t.endswith(".2"))
        for _ in range(targets.index(target)):
            subprocess.run(_tmux(sock, "send-keys", "-t", name, "Down"), check=True)
        subprocess.run(_tmux(sock, "send-keys", "-t", name, "Enter"), check=True)
        _wait_for(sock, name, "You are sub-agent 1.")
        subprocess.run(_tmux(sock, "send-keys", "-t", name, "q"), check=True)
        # back on the list: its header (the session's target alone is on the inspector's status line too,
        # 'pid PID.2', so waiting for it sent the last q before the list was up)
        _wait_for(sock, name, "PID        MODEL")
        subprocess.run(_tmux(sock, "send-keys", "-t", name, "q"), check=True)
        screen = _wait_for(sock, name, "EXIT=", timeout=240)
        assert "EXIT=3" in screen, screen
    finally:
        _end_tmux(sock, name)
    files = sorted(rec.glob("*.cpsession"))
    assert len(files) == 2 and [verify_ok(f) for f in files] == [5, 5]


def _processes_with(marker: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line holds `marker`."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(ln for ln in (proc / "status").read_text().splitlines() if ln.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if marker in cmd and "python" in cmd and " Z " not in f" {state.split(':')[1].strip()} ":
            pids.append(int(proc.name))
    return pids


def test_run_leaves_nothing_behind_when_its_terminal_goes_away(
    standin: StandIn, tmp_path: Path, rtdir: Path
) -> None:
    """Closing the terminal (SIGHUP) while the inspector is open stops the agent, the TUI and the proxy:
    nothing is left running (an app on a dead terminal used to spin a core forever), and what was
    recorded so far verifies."""
    name = f"cphup-{uuid.uuid4().hex[:8]}"
    rec = tmp_path / "rec"
    sock = rtdir / "tmux"  # (a short path: Unix socket paths are limited)
    agent = f"{sys.executable} -m tests.capture.script_agent --turns 60 --delay 1.0"
    _start_run(sock, name, rec, rtdir, standin, agent, "sleep 300")
    try:
        _wait_for(sock, name, "You are a script agent.")
        assert _processes_with(str(rec)), "run and proxy should be running while the inspector shows"
    finally:
        _end_tmux(sock, name)
    deadline = time.monotonic() + 60
    while (left := _processes_with(str(rec))) and time.monotonic() < deadline:
        time.sleep(0.3)
    for pid in left:  # do not leave them spinning on this machine either way
        subprocess.run(["kill", "-9", str(pid)], capture_output=True)
    assert not left, f"still running after the terminal closed: pids {left}"
    files = sorted(rec.glob("*.cpsession"))
    assert len(files) == 1 and verify_ok(files[0]) >= 1


def test_run_ends_whole_on_sigterm_with_the_inspector_open(
    standin: StandIn, tmp_path: Path, rtdir: Path
) -> None:
    """`kill <pid of cp-inspect run>` while the inspector shows: the agent gets the signal, the inspector
    closes and gives the terminal back (the shell prompt, not the alternate screen), the proxy stops,
    the exit code says SIGTERM, and what was recorded verifies. (An inspector that stayed open after
    the agent had gone needed a second kill, and a run whose terminal was already gone spun on.)"""
    name = f"cpterm-{uuid.uuid4().hex[:8]}"
    rec = tmp_path / "rec"
    sock = rtdir / "tmux"  # (a short path: Unix socket paths are limited)
    agent = f"{sys.executable} -m tests.capture.script_agent --turns 60 --delay 1.0"
    _start_run(sock, name, rec, rtdir, standin, agent, "echo EXIT=$?; sleep 300")
    left: list[int] = []
    try:
        _wait_for(sock, name, "You are a script agent.")
        runs = [p for p in _processes_with(str(rec)) if _argv(p)[1:4] == [b"-m", b"inspector.cli", b"run"]]
        assert len(runs) == 1, runs
        subprocess.run(["kill", "-TERM", str(runs[0])], check=True)
        screen = _wait_for(sock, name, "EXIT=", timeout=120)
        assert "EXIT=143" in screen, screen
        alt = subprocess.run(
            _tmux(sock, "display-message", "-p", "-t", name, "#{alternate_on}"), capture_output=True, text=True
        ).stdout.strip()
        assert alt == "0", "the inspector left the terminal in its alternate screen"
        deadline = time.monotonic() + 60
        while (left := _pythons_with(str(rec))) and time.monotonic() < deadline:
            time.sleep(0.3)
        what = [(p, b" ".join(_argv(p)[:4])) for p in left]
    finally:
        _end_tmux(sock, name)
        for pid in _processes_with(str(rec)):  # never leave them running on this machine
            subprocess.run(["kill", "-9", str(pid)], capture_output=True)
    assert not left, f"still running after SIGTERM: {what}"
    files = sorted(rec.glob("*.cpsession"))
    assert len(files) == 1 and verify_ok(files[0]) >= 1


def _pythons_with(marker: str) -> list[int]:
    """The run's own processes (run, proxy, agent), not the tmux server and shell that started it and
    outlive it here (the pane's shell sleeps on)."""
    return [p for p in _processes_with(marker) if b"python" in (_argv(p) or [b""])[0]]


def _argv(pid: int) -> list[bytes]:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []
