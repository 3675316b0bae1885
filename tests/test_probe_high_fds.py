"""The probe and its clients in a process whose descriptors are numbered past select()'s limit (1024).

An agent holding many files or sockets gives the probe's pipe and sockets high numbers. select.select()
refuses those (ValueError): the client took its socket for closed before reading the hello, and the probe
thread's timed rest returned at once instead of sleeping. engine/probe/readable.py waits with poll().
Run in a child process: the test raises its own descriptor limit and fills the low numbers.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import os, resource, shutil, sys, tempfile, time
    from pathlib import Path
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        print("SKIP hard limit", hard); sys.exit(0)
    resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # what the agent holds

    from engine.probe.readable import readable
    r, w = os.pipe()
    assert r >= 1024, r
    t = time.monotonic(); got = readable([r], 0.2); waited = time.monotonic() - t
    assert got == [] and waited >= 0.19, (got, waited)
    os.write(w, b"x")
    assert readable([r], 5.0) == [r]

    from engine.probe.client import ProbeClient
    from engine.probe.server import ProbeServer
    base = Path(tempfile.mkdtemp(prefix="cpt-", dir="/tmp"))
    journal = [{"k": "turn", "turn": 0, "trace": {"turn": 0, "tier": "Normal"}}]
    hello = {"model": "claude-sonnet-4", "provider": "anthropic", "engine_version": "x"}
    server = ProbeServer(hello, lambda: list(journal), runtime_dir=base / "rt")
    server.start()
    try:
        with ProbeClient.connect(os.getpid(), runtime_dir=base / "rt") as c:
            assert c.fileno() >= 1024, c.fileno()
            assert c.hello["model"] == "claude-sonnet-4"
            assert c.recv(10.0) == journal[0], "no snapshot"
            ev = {"k": "turn", "turn": 1, "trace": {"turn": 1, "tier": "Normal"}}
            journal.append(ev)
            server.publish(ev)
            assert c.recv(10.0) == ev, "no live event"
            assert not c.disconnected
    finally:
        server.close()
        shutil.rmtree(base, ignore_errors=True)
    print("OK")
    """
)


def test_probe_and_client_work_with_descriptors_past_1024() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=REPO, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    if done.stdout.startswith("SKIP"):
        pytest.skip(f"cannot raise the descriptor limit here: {done.stdout.strip()}")
    assert done.returncode == 0 and done.stdout.strip() == "OK", done.stdout + done.stderr
