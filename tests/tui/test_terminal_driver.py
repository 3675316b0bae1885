"""The inspector's terminal driver when its terminal goes away, on a real pseudo-terminal.

`cp-inspect run` hung in about one hangup in twenty (tests/capture/test_run_tmux.py, under load): the
kernel's SIGCONT after the SIGHUP made Textual restart application mode on the dead terminal, and a
writer thread that had died on EIO left the app's closing blocked on its full queue. Here an app on
the driver (tests/tui/hangup_child.py) runs on a pty this test holds as its controlling terminal and
keeps drawing after the terminal closes; with Textual's own driver it never exits (first test) and
leaves a second writer thread behind after a SIGCONT (second test)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from engine.probe.readable import readable
from engine.probe.watch import FleetWatcher
from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from inspector.terminal_driver import TerminalDriver
from inspector.top_app import TopApp

ROOT = Path(__file__).resolve().parents[2]
EXIT_WAIT_S = 60.0  # how long a child that should exit at once is given before it counts as hung


class _Terminal:
    """A pty whose slave side is the child's controlling terminal; what the child draws is read (and
    thrown away) all the while, as a terminal does, so the child never blocks on a full pty."""

    def __init__(self, argv: list[str]) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))

        def own_terminal() -> None:
            os.setsid()  # a session of its own, with the pty as its controlling terminal
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            signal.signal(signal.SIGHUP, signal.SIG_DFL)  # (not ignored, even under `nohup`)

        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, preexec_fn=own_terminal, close_fds=True
        )
        os.close(slave)
        self.seen = bytearray()
        self.drawn = threading.Event()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            if not readable([self.master], 0.05):  # poll: the suite's process may hold 1,024+ descriptors
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the child closed its side
                return
            if not chunk:
                return
            self.seen += chunk
            if b"tick " in self.seen:  # the app is up and drawing (its first frame)
                self.drawn.set()

    def close(self) -> None:
        """Close the terminal: the kernel hangs up the child's side (SIGHUP, SIGCONT, EIO on writes)."""
        self._stop.set()
        self._reader.join()
        os.close(self.master)

    def wait_exit(self) -> int | None:
        try:
            return self.proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def _wait_stopped(pid: int) -> None:
    deadline = time.monotonic() + EXIT_WAIT_S
    while Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "T":
        assert time.monotonic() < deadline, "the app never suspended itself"
        time.sleep(0.02)


def _run_child(tmp_path: Path, mode: str) -> tuple[int | None, dict[str, object] | None]:
    result = tmp_path / "result.json"
    term = _Terminal([sys.executable, "-m", "tests.tui.hangup_child", str(result), mode])
    try:
        assert term.drawn.wait(EXIT_WAIT_S), (
            f"the app never drew; the terminal showed: {bytes(term.seen[-400:])!r}"
        )
        if mode == "hangup":
            term.close()
        if mode == "tstp":  # suspended (stopped) by its own SIGTSTP: continue it, as `fg` does
            _wait_stopped(term.proc.pid)
            os.kill(term.proc.pid, signal.SIGCONT)
        code = term.wait_exit()
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
            term.proc.wait()
        if mode != "hangup":
            term.close()
    report = json.loads(result.read_text()) if result.exists() else None
    if report is not None:
        report["alt_screen_entered"] = bytes(term.seen).count(b"\x1b[?1049h")
    return code, report


def test_an_app_whose_terminal_closes_can_still_exit(tmp_path: Path) -> None:
    code, report = _run_child(tmp_path, "hangup")
    assert code is not None, "the app never exited after its terminal closed (blocked writing to it)"
    assert report is not None, f"the app ended (code {code}) without reporting"
    assert report["frames_after"] == 100  # it drew on after the hangup, as asked, then exited
    assert report["terminal_gone"] is True
    assert report["textual_threads"] == [], "Textual threads left running after the app exited"


def test_a_sigcont_without_a_suspend_starts_no_second_writer(tmp_path: Path) -> None:
    code, report = _run_child(tmp_path, "cont")
    assert code == 0 and report is not None, (code, report)
    assert report["frames_after"] == 20
    # Textual's driver restarted application mode on the SIGCONT: a second writer and input thread,
    # the first writer left waiting on its queue for good.
    assert report["textual_threads"] == [], "Textual threads left running after the app exited"
    assert report["terminal_gone"] is False


def test_ctrl_z_still_suspends_and_resumes(tmp_path: Path) -> None:
    """SIGTSTP (Ctrl-Z, or the app's suspend) then SIGCONT (`fg`): application mode is left, then entered
    again, and the app goes on drawing and exits with no thread left."""
    code, report = _run_child(tmp_path, "tstp")
    assert code == 0 and report is not None, (code, report)
    assert report["frames_after"] == 20
    assert report["alt_screen_entered"] == 2  # at start, and again on resuming
    assert report["textual_threads"] == []


def test_the_inspector_apps_run_on_this_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)  # (a driver named there is Textual's choice)
    assert InspectorApp(SyntheticSource(1)).driver_class is TerminalDriver
    assert TopApp(FleetWatcher(tmp_path)).driver_class is TerminalDriver


SIZE_CHILD = """
import os, sys
from inspector.terminal_driver import TerminalDriver
print(*TerminalDriver._get_terminal_size(None), file=sys.stderr)  # (self is not read)
"""


@pytest.mark.parametrize("stdout", ["devnull", "closed", "terminal"])
def test_the_app_is_sized_by_the_terminal_it_draws_on(stdout: str) -> None:
    """`cp-inspect replay FILE > out.log` (or `1<&-`): Textual sized its app by stdout's terminal, and with
    stdout redirected got 80x25 in a 120x40 terminal (the app in its top-left corner, the last screen's
    text beside it). The size is stderr's now, the terminal the app draws on; COLUMNS/LINES still win."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(ROOT)
    out: int | None = {"devnull": subprocess.DEVNULL, "terminal": slave}.get(stdout)
    try:
        for extra, want in (({}, "120 40"), ({"COLUMNS": "100", "LINES": "30"}, "100 30")):
            child = subprocess.run(
                [sys.executable, "-c", SIZE_CHILD],
                stdout=out,
                stderr=slave,
                stdin=subprocess.DEVNULL,
                env={**env, **extra},
                timeout=60,
                preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None,
            )
            assert child.returncode == 0
            said = os.read(master, 1000).decode().split()
            assert " ".join(said[-2:]) == want, (stdout, extra, said)
    finally:
        os.close(master)
        os.close(slave)
