"""The demo agent serving its probe in a child process, for tests that attach to a real agent."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def served_demo(rt: Path, turns: int, delay: float) -> subprocess.Popen[bytes]:
    """`inspector.demo_agent --serve` with XDG_RUNTIME_DIR `rt`, once its socket is there (the caller
    kills and waits for it)."""
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inspector.demo_agent",
            "--serve",
            "--turns",
            str(turns),
            "--delay",
            str(delay),
        ],
        env={**os.environ, "XDG_RUNTIME_DIR": str(rt)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sock = rt / "contextpipe" / f"{agent.pid}.sock"
    give_up = time.monotonic() + 60  # the agent's start-up: seconds on a loaded machine
    while not sock.exists() and time.monotonic() < give_up and agent.poll() is None:
        time.sleep(0.02)
    if not sock.exists():
        agent.kill()
        agent.wait()
        raise AssertionError(f"the demo agent did not serve {sock} (exit {agent.returncode})")
    return agent
