"""`cp-inspect run`'s proxy stops when run is gone (tests/capture/test_run_killed.py), and that holds when
run ended before its proxy was ready: the proxy read its parent's pid only once it was serving, after its
imports and the server's start (~1 s on a loaded host), so a run killed in that time left a proxy whose
parent was already another process, and it served on for no one. run names its pid (a hidden --run-pid)
and the proxy stops when its parent is not that process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.capture.standin import StandIn

ROOT = Path(__file__).resolve().parents[2]
GIVE_UP_S = 120  # (a hung test fails rather than hangs the suite; it waits on conditions, not times)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # (an ended proxy may stay a zombie until its new parent reaps it)
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def _until(what: str, check: object) -> None:
    deadline = time.monotonic() + GIVE_UP_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def test_a_proxy_whose_run_ended_before_it_was_ready_stops(tmp_path: Path, rtdir: Path) -> None:
    state, log, rec = tmp_path / "proxy.json", tmp_path / "proxy.log", tmp_path / "rec"
    # The run: a process that starts its proxy as run starts it, then ends at once (as one killed then).
    starter = (
        "import os, subprocess, sys\n"
        f"with open({str(log)!r}, 'wb') as log:\n"
        "    px = subprocess.Popen([sys.executable, '-m', 'inspector.cli', 'proxy', '--port', '0',\n"
        f"        '--record-dir', {str(rec)!r}, '--state-file', {str(state)!r}, '--run-pid', str(os.getpid())],\n"
        "        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)\n"
        "print(px.pid)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pid = int(subprocess.run([sys.executable, "-c", starter], env=env, capture_output=True, text=True).stdout)
    try:
        _until("the proxy to stop", lambda: not _alive(pid))
        said = log.read_text()
        assert "proxy stopped (cp-inspect run ended)" in said, said
        assert "url" in json.loads(state.read_text())  # (it had started serving: it stopped by itself)
    finally:
        if _alive(pid):
            os.kill(pid, 9)


def test_run_names_its_pid_to_its_proxy(tmp_path: Path, rtdir: Path) -> None:
    standin = StandIn().start()
    agent = [sys.executable, "-c", "import time; time.sleep(3)"]  # (ends by itself: run then stops its proxy)
    cmd = [sys.executable, "-m", "inspector.cli", "run", "--no-tui", "--record-dir", str(tmp_path / "rec")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(
        [*cmd, "--upstream", standin.url, "--", *agent],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert run.stderr is not None
        proxy = None
        for line in run.stderr:  # "cp-inspect: watch it from another terminal: cp-inspect attach PID.1 ..."
            if "cp-inspect attach " in line:
                proxy = int(line.split("cp-inspect attach ", 1)[1].split(".", 1)[0])
                break
        assert proxy is not None, "run did not say its proxy's pid"
        argv = Path(f"/proc/{proxy}/cmdline").read_bytes().split(b"\0")
        at = argv.index(b"--run-pid")
        assert argv[at + 1] == str(run.pid).encode()
        assert run.wait(GIVE_UP_S) == 0
    finally:
        if run.poll() is None:
            run.kill()
        standin.stop()
