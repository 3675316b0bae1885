"""A crash inside the inspector's app ends the command with a failure. Textual catches the exception,
restores the terminal and prints the traceback, then returns from run() with return_code 1; the commands
only called run(), so `cp-inspect replay` (and attach, demo, top) exited 0 after a crash and a script or
CI job saw success. Real process in a pseudo-terminal (Textual needs one); the crash is injected by
replacing the app's on_mount before the real entry point runs, as any bug in a panel would raise."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.probe.readable import readable
from inspector.app_exit import run_app

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"

_CRASHING_ENTRY = """
import sys
import inspector.app as app_module
from inspector.entry import main
from inspector.cli import app as typer_app

def on_mount(self):
    raise RuntimeError("injected panel bug")

app_module.InspectorApp.on_mount = on_mount
entry = sys.argv[1]
sys.argv = ["cp-inspect", *sys.argv[2:]]
main() if entry == "plain" else typer_app()
"""


def _run_in_pty(args: list[str], seconds: float = 60) -> tuple[int, str]:
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_ENTRY, *args],
        stdin=follower, stdout=follower, stderr=follower, cwd=ROOT, env=env,
    )  # fmt: skip
    os.close(follower)
    out = bytearray()
    end = time.monotonic() + seconds
    try:
        while proc.poll() is None and time.monotonic() < end:
            ready = readable([leader], 0.2)
            if ready:
                try:
                    out += os.read(leader, 65536)
                except OSError:
                    break
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    return proc.returncode, out.decode("utf-8", "replace")


@pytest.mark.skipif(not DEMO.exists(), reason="demo_sessions/scout-anthropic.cpsession is missing")
@pytest.mark.parametrize("path", ["plain", "typer"])
def test_replay_that_crashes_exits_1(path: str) -> None:
    # "plain" is the console script's fast path (entry.run_plain_command, no typer); "typer" the command.
    code, screen = _run_in_pty([path, "replay", str(DEMO)])
    assert "injected panel bug" in screen  # it did crash, and Textual showed why
    assert code == 1, code  # (on the old commands: 0)


def test_run_app_returns_the_apps_result_when_it_ends_cleanly() -> None:
    from textual.app import App

    class Quits(App[str]):
        def on_mount(self) -> None:
            self.exit("picked")

    assert run_app(Quits(), headless=True) == "picked"


def test_run_app_exits_with_the_apps_error_code() -> None:
    from textual.app import App

    class Fails(App[None]):
        def on_mount(self) -> None:
            self.exit(return_code=3)

    with pytest.raises(SystemExit) as info:
        run_app(Fails(), headless=True)
    assert info.value.code == 3
