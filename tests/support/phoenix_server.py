"""Arize Phoenix (the fleet test's real OTLP backend) started early, in a process of its own.

Phoenix takes ~18 s of CPU to start (its imports and its database's migrations): 20 s of wall on a quiet
2-core host, 46-65 s at load 8, all of it spent inside tests/fleet/test_phoenix.py while the suite's own
process waited. Started as soon as collection shows that test will run (tests/conftest.py), it comes up on
the other core while the tests before it run (the capture tests, most of fleet/), and the test finds it
up, or waits only for what is left. The test still gets a Phoenix of its own: a fresh working directory
and ports, nothing sent to it before the test, and a server started by the fixture when none was started
early (the test run alone, or from a list that did not collect it first)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# The test's module, as a collected item's path ends.
TEST_FILE = ("fleet", "test_phoenix.py")


@dataclass
class Phoenix:
    base: str
    proc: subprocess.Popen[bytes]
    home: Path
    log: IO[bytes]

    def wait_up(self, timeout: float = 240.0) -> str | None:
        """Until /healthz answers: None then, else what went wrong (Phoenix's log's end)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(self.base + "/healthz", timeout=2).read()
                return None
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.log.flush()
                    said = (self.home / "phoenix.log").read_text(errors="replace")[-2000:]
                    self.stop()
                    return "Phoenix did not start:\n" + said
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


_early: Phoenix | None = None

# `python -m phoenix.server.main serve`, set to get SIGTERM when the suite's process dies (Linux's
# PR_SET_PDEATHSIG, kept across exec): a server started early outlives no killed test run.
_SERVE = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))
except (AttributeError, OSError):
    pass
os.execv(sys.executable, [sys.executable, "-m", "phoenix.server.main", "serve"])
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start() -> Phoenix:
    """A Phoenix server starting now, in a private working directory on two free loopback ports."""
    home = Path(tempfile.mkdtemp(prefix="cp-phoenix-"))
    port, grpc = _free_port(), _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(home),
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = open(home / "phoenix.log", "wb")  # noqa: SIM115 (closed by stop())
    proc = subprocess.Popen([sys.executable, "-c", _SERVE], env=env, stdout=log, stderr=subprocess.STDOUT)
    return Phoenix(f"http://127.0.0.1:{port}", proc, home, log)


def start_early(paths: list[Path]) -> None:
    """At collection's end: start one when the Phoenix test is among the collected and Phoenix is here."""
    global _early
    if _early is not None or not any(p.parts[-2:] == TEST_FILE for p in paths):
        return
    if importlib.util.find_spec("phoenix") is None:
        return
    _early = start()


def take() -> Phoenix:
    """The server started early (once: the test owns it from here), or one started now."""
    global _early
    got, _early = _early, None
    return got if got is not None else start()


def stop_early() -> None:
    """At the session's end: a server started early that no test took (the test deselected, -x)."""
    global _early
    if _early is not None:
        _early.stop()
        _early = None
