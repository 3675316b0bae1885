"""`cp-inspect attach PID --record FILE` saves what it received when it is stopped by SIGTERM (`kill`, a
supervisor) or SIGHUP (its terminal window closed), as it does on `q`: both ended the process without
running its `finally`, and the recording was lost. Real processes: the demo agent serving its probe, and
the inspector in a pseudo-terminal (Textual needs one)."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.probe.readable import readable
from engine.probe.runtime_dir import agent_runtime_dir, default_runtime_dir, socket_path
from engine.recording.cpsession import RecordingReader

from .conftest import demo_agent

ROOT = Path(__file__).resolve().parents[1]


# The status line of the inspector's frame, its escape sequences taken out: "● LIVE pid 16610  turn 11
# (12/12)  following newest": the turns received are the second number.
ESCAPES = re.compile(rb"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z])")
LIVE_STATUS = re.compile(rb"LIVE pid \d+ +turn \d+ \((\d+)/\d+\)")


def _until_following(fd: int, turns: int, seconds: float = 120) -> None:
    """Read the inspector's screen output until its status line says it is live with at least `turns`
    turns received: its handlers are installed and the recording has something to hold. (A fixed 4 s
    of drawing was not enough on a loaded host: the inspector's first frame came after 5 s and the
    signal found it starting, with no handler yet or nothing received: 7 of 8 failed on one core beside
    two busy loops.)"""
    end = time.monotonic() + seconds
    screen = b""
    while True:
        left = end - time.monotonic()
        assert left > 0, f"the inspector never showed {turns} turns live: {ESCAPES.sub(b'', screen)[-2000:]!r}"
        if readable([fd], min(left, 0.2)):
            try:
                screen += os.read(fd, 65536)
            except OSError as exc:
                raise AssertionError(f"the inspector's terminal closed: {exc}") from exc
            shown = [int(n) for n in LIVE_STATUS.findall(ESCAPES.sub(b"", screen))]
            if shown and max(shown) >= turns:
                return
            screen = screen[-65536:]  # (the status is redrawn: what came before it is not needed)


def _until_exit(proc: subprocess.Popen[bytes], fd: int, seconds: float = 60) -> bytes:
    """Read the inspector's screen output (a terminal nobody reads would block its writes) until it
    exits, or for `seconds`: what it drew, its escape sequences taken out."""
    end = time.monotonic() + seconds
    screen = b""
    while (left := end - time.monotonic()) > 0:
        exited = proc.poll() is not None
        if readable([fd], min(left, 0.2)):
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal (it is exiting) and all it wrote was read
                try:
                    proc.wait(timeout=max(end - time.monotonic(), 1))
                except subprocess.TimeoutExpired:
                    pass
                break
            screen += data
            if data:
                continue
        if exited:  # and nothing more to read (what it wrote last, a traceback, comes just before)
            break
    return ESCAPES.sub(b"", screen)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_attach_record_saves_on_termination(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "attached.cpsession"
    with demo_agent(tmp_path, turns=400, delay=0.05) as agent:
        # Until the agent serves its probe (its socket is there), not a fixed 1.5 s.
        sock = socket_path(agent.pid, agent_runtime_dir(agent.pid) or default_runtime_dir())
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert agent.poll() is None and time.monotonic() < deadline, f"no probe socket at {sock}"
            time.sleep(0.02)
        leader, follower = pty.openpty()
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
        inspector = subprocess.Popen(
            [sys.executable, "-m", "inspector.cli", "attach", str(agent.pid), "--record", str(out)],
            stdin=follower, stdout=follower, stderr=follower, cwd=ROOT, env=env,  # Textual draws on stderr
        )  # fmt: skip
        os.close(follower)
        try:
            _until_following(leader, turns=3)  # the inspector draws and follows the agent
            inspector.send_signal(sig)
            screen = _until_exit(inspector, leader)
            assert inspector.poll() is not None, f"still running 60 s after {sig.name}"
        finally:
            if inspector.poll() is None:
                inspector.kill()
            os.close(leader)
            agent.terminate()
    assert inspector.returncode == 128 + sig  # (on the old code: -sig, killed with nothing saved)
    # The app ended as `q` ends it: its shutdown crashed on a SystemExit raised mid-loop by the handler
    # (NoMatches for a panel already gone, its traceback on the screen: 5 of 18 on one loaded core).
    assert b"Traceback" not in screen, screen[-3000:].decode("utf-8", "replace")
    events = list(RecordingReader.open(out).events())
    assert len(events) > 10, len(events)
