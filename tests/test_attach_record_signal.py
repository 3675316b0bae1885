"""`cp-inspect attach PID --record FILE` saves what it received when it is stopped by SIGTERM (`kill`, a
supervisor) or SIGHUP (its terminal window closed), as it does on `q`: both ended the process without
running its `finally`, and the recording was lost. Real processes: the demo agent serving its probe, and
the inspector in a pseudo-terminal (Textual needs one)."""

from __future__ import annotations

import os
import pty
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


def _drain(fd: int, seconds: float) -> None:
    """Read the inspector's screen output for `seconds` (a terminal nobody reads would block its writes)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ready = readable([fd], min(left, 0.2))
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                return


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
            _drain(leader, 4.0)  # the inspector draws and follows the agent for a while
            inspector.send_signal(sig)
            end = time.monotonic() + 30
            while inspector.poll() is None and time.monotonic() < end:
                _drain(leader, 0.2)
            inspector.wait(timeout=5)
        finally:
            if inspector.poll() is None:
                inspector.kill()
            os.close(leader)
            agent.terminate()
    assert inspector.returncode == 128 + sig  # (on the old code: -sig, killed with nothing saved)
    events = list(RecordingReader.open(out).events())
    assert len(events) > 10, len(events)
