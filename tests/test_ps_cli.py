"""`cp-inspect ps` when the probe's runtime directory is not safely ours: one line that says what is
wrong and how to fix it, exit 1 (it was a PermissionDenied traceback; `attach` and `top` already said it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app


@pytest.mark.parametrize("args", [["ps"], ["ps", "--json"]])
def test_ps_with_a_runtime_directory_open_to_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    args: list[str]) -> None:
    rtdir = tmp_path / "contextpipe"
    rtdir.mkdir()
    os.chmod(rtdir, 0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert f"{rtdir} has mode 0755" in res.output and f"chmod 700 {rtdir}" in res.output
    assert "Traceback" not in res.output


def test_ps_with_an_agent_that_does_not_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stopped agent (SIGSTOP, a debugger): its row said "None None None" and nothing of why; now
    "-" for what it could not say, and that it is not answering."""
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    rt = Path(tempfile.mkdtemp(prefix="cpps-", dir="/tmp"))  # a Unix socket path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    agent = subprocess.Popen([sys.executable, "-m", "inspector.demo_agent", "--serve", "--turns", "400",
                              "--delay", "0.5"], env={**os.environ, "XDG_RUNTIME_DIR": str(rt)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sock = rt / "contextpipe" / f"{agent.pid}.sock"
        give_up = time.monotonic() + 60  # the agent's start-up: seconds on a loaded machine
        while not sock.exists() and time.monotonic() < give_up:
            time.sleep(0.05)
        assert sock.exists()
        agent.send_signal(signal.SIGSTOP)
        res = CliRunner().invoke(app, ["ps"])
        assert res.exit_code == 0, res.output
        row = next(line for line in res.output.splitlines() if line.split()[0] == str(agent.pid))
        assert "None" not in row and row.split()[1:4] == ["-", "-", "-"], row
        assert "[not answering: " in row and "stopped or busy" in row, row
    finally:
        agent.kill()
        agent.wait()
        import shutil

        shutil.rmtree(rt, ignore_errors=True)


def _private_runtime(monkeypatch: pytest.MonkeyPatch) -> Path:
    import tempfile

    rt = Path(tempfile.mkdtemp(prefix="cpps-", dir="/tmp"))  # a Unix socket path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    d = rt / "contextpipe"
    d.mkdir(mode=0o700)
    return d


def _bound(path: Path) -> object:
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen()
    return s


def _dead_pid() -> int:
    import subprocess

    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.mark.skipif(os.getuid() != 0, reason="making a socket another user's needs root")
def test_ps_names_a_socket_owned_by_another_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe socket that is another user's: ps printed only "no live agents", with no hint why, where
    `attach PID` said whose it is. Now one line each on stderr with the owner and the fix; exit 0."""
    import shutil

    d = _private_runtime(monkeypatch)
    live, dead = os.getpid(), _dead_pid()
    socks = [_bound(d / f"{live}.sock"), _bound(d / f"{dead}.sock")]
    try:
        os.chown(d / f"{live}.sock", 65534, 65534)
        os.chown(d / f"{dead}.sock", 65534, 65534)
        res = CliRunner().invoke(app, ["ps"])
        assert res.exit_code == 0, res.output
        err = res.stderr.splitlines()
        assert len(err) == 2, res.stderr
        mine = next(line for line in err if line.startswith(f"ps: skipped {live}: "))
        assert f"{d / f'{live}.sock'} is owned by uid 65534, not by you (uid 0)" in mine
        assert "run cp-inspect as that user" in mine
        gone = next(line for line in err if line.startswith(f"ps: skipped {dead}: "))
        assert f"its process {dead} has exited: remove it: rm {d / f'{dead}.sock'}" in gone
        assert "no live agents that you can attach to (2 skipped, see above)" in res.stdout
        # Neither is removed (not ours to remove) nor connected to; --json stays a bare array.
        assert (d / f"{live}.sock").exists() and (d / f"{dead}.sock").exists()
        res = CliRunner().invoke(app, ["ps", "--json"])
        assert res.exit_code == 0 and res.stdout.strip() == "[]", res.output
        assert len(res.stderr.splitlines()) == 2, res.stderr
    finally:
        for s in socks:
            s.close()  # type: ignore[attr-defined]
        shutil.rmtree(d.parent, ignore_errors=True)


def test_ps_names_an_entry_that_is_not_a_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    """A symlink (or any non-socket) at PID.sock is never followed, and is now named with the fix."""
    import shutil

    d = _private_runtime(monkeypatch)
    target = d.parent / "elsewhere.sock"
    s = _bound(target)
    try:
        (d / f"{os.getpid()}.sock").symlink_to(target)
        (d / f"{os.getppid()}.7.sock").write_text("")
        res = CliRunner().invoke(app, ["ps"])
        assert res.exit_code == 0, res.output
        err = res.stderr.splitlines()
        assert len(err) == 2, res.stderr
        link = next(line for line in err if line.startswith(f"ps: skipped {os.getpid()}: "))
        assert "is a symlink, not a socket" in link and f"rm {d / f'{os.getpid()}.sock'}" in link
        plain = next(line for line in err if line.startswith(f"ps: skipped {os.getppid()}.7: "))
        assert "is a regular file, not a socket" in plain
        assert "no live agents that you can attach to (2 skipped" in res.stdout
    finally:
        s.close()  # type: ignore[attr-defined]
        shutil.rmtree(d.parent, ignore_errors=True)
