"""The demo agent serving its probe in a child process, for tests that attach to a real agent."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def served_demo(rt: Path, turns: int, delay: float, record: Path | None = None) -> subprocess.Popen[bytes]:
    """`inspector.demo_agent --serve` with XDG_RUNTIME_DIR `rt` (and `--record record`), once its socket
    (and its recording) is there; the caller kills and waits for it."""
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
            *(["--record", str(record)] if record is not None else []),
        ],
        env={**os.environ, "XDG_RUNTIME_DIR": str(rt)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sock = rt / "contextpipe" / f"{agent.pid}.sock"

    def serving() -> bool:
        return sock.exists() and (record is None or record.exists())

    give_up = time.monotonic() + 60  # the agent's start-up: seconds on a loaded machine
    while not serving() and time.monotonic() < give_up and agent.poll() is None:
        time.sleep(0.02)
    if not serving():
        agent.kill()
        agent.wait()
        raise AssertionError(f"the demo agent did not serve {sock} (recording {record}; exit {agent.returncode})")
    return agent
