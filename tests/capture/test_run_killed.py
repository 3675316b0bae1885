"""`cp-inspect run` killed outright (SIGKILL: nothing it can catch) while its agent runs. Its proxy is a
process of its own session (the terminal's Ctrl-C goes to the agent alone), so no signal reached it: it
served on for no one, `cp-inspect ps` and `top` listed its conversation as live for as long as the machine
ran, and the conversation's recording was never closed. Now the proxy stops once run is gone, and closes
the recording."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.capture.conftest import verify_ok
from tests.capture.standin import StandIn

ROOT = Path(__file__).resolve().parents[2]
GIVE_UP_S = 120  # (a hung test fails rather than hangs the suite; the test waits on conditions, not times)


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    s = StandIn().start()
    yield s
    s.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # Reparented, an ended proxy may stay a zombie until its new parent reaps it: not running.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def _turns(recording: Path) -> int:
    """The whole turns the recording holds so far (0 while its first is still being written)."""
    try:
        return verify_ok(recording)
    except Exception:  # (a file being written: no turn yet, or one cut off where the writer is)
        return 0


def _until(what: str, check: object) -> None:
    deadline = time.monotonic() + GIVE_UP_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def test_the_proxy_of_a_killed_run_stops_and_closes_its_recording(
    standin: StandIn, tmp_path: Path, rtdir: Path
) -> None:
    rec = tmp_path / "rec"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_BASE_URL")
    }
    env |= {"XDG_RUNTIME_DIR": str(rtdir), "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inspector.cli",
            "run",
            "--no-tui",
            "--record-dir",
            str(rec),
            "--upstream",
            standin.url,
            "--",
            sys.executable,
            "-m",
            "tests.capture.script_agent",
            "--turns",
            "400",
            "--delay",
            "0.2",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    proxy_pid = None
    try:
        assert run.stderr is not None
        for line in run.stderr:  # "cp-inspect: watch it from another terminal: cp-inspect attach PID.1 ..."
            if m := re.search(r"cp-inspect attach (\d+)\.1", line):
                proxy_pid = int(m.group(1))
                break
        assert proxy_pid is not None, "run did not say its proxy's pid"
        _until("the agent's first calls recorded", lambda: any(rec.glob("*.cpsession")))
        (recording,) = rec.glob("*.cpsession")
        _until("two turns", lambda: _turns(recording) >= 2)
        run.send_signal(signal.SIGKILL)
        run.wait()
        _until("the proxy to stop", lambda: not _alive(proxy_pid))
        said = subprocess.run(
            [sys.executable, "-m", "inspector.cli", "verify", str(recording)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        assert said.returncode == 0 and said.stdout.startswith("ok: "), said
        assert "not closed" not in said.stdout and "damaged" not in said.stdout, said.stdout  # closed
        log = next(rec.glob("proxy-*.log")).read_text()
        assert "proxy stopped (cp-inspect run ended)" in log, log
    finally:
        if run.poll() is None:
            run.kill()
        if proxy_pid is not None and _alive(proxy_pid):
            os.kill(proxy_pid, signal.SIGKILL)
