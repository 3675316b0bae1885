"""`cp-inspect ps` when the probe's runtime directory is not safely ours: one line that says what is
wrong and how to fix it, exit 1 (it was a PermissionDenied traceback; `attach` and `top` already said it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app
from tests.served_demo import served_demo


@pytest.fixture(autouse=True)
def _no_other_users(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other users' agents on this host (another suite's child running as nobody) are not these tests'
    business: their count has tests of its own (test_permissions_probe.py, test_ps_other_users below)."""
    from engine.probe import client

    monkeypatch.setattr(client, "other_users_agents", lambda runtime_dir=None: {})


@pytest.mark.parametrize("args", [["ps"], ["ps", "--json"]])
def test_ps_with_a_runtime_directory_open_to_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
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
    import tempfile

    rt = Path(tempfile.mkdtemp(prefix="cpps-", dir="/tmp"))  # a Unix socket path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    agent = served_demo(rt, 400, 0.5)
    try:
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
        mine = next(line for line in err if line.startswith(f"cp-inspect: warning: skipped {live}: "))
        assert f"{d / f'{live}.sock'} is owned by uid 65534, not by you (uid 0)" in mine
        assert "run cp-inspect as that user" in mine
        gone = next(line for line in err if line.startswith(f"cp-inspect: warning: skipped {dead}: "))
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
        link = next(line for line in err if line.startswith(f"cp-inspect: warning: skipped {os.getpid()}: "))
        assert "is a symlink, not a socket" in link and f"rm {d / f'{os.getpid()}.sock'}" in link
        plain = next(
            line for line in err if line.startswith(f"cp-inspect: warning: skipped {os.getppid()}.7: ")
        )
        assert "is a regular file, not a socket" in plain
        assert "no live agents that you can attach to (2 skipped" in res.stdout
    finally:
        s.close()  # type: ignore[attr-defined]
        shutil.rmtree(d.parent, ignore_errors=True)


def _agents(command: str) -> list[object]:
    from engine.probe.client import AgentInfo

    return [
        AgentInfo(
            pid=4242,
            command=command,
            model="claude-sonnet-4-5-20250929",
            provider="anthropic",
            turns=12,
            socket_path=Path("/nonexistent/4242.sock"),
            session=1,
        ),
        AgentInfo(
            pid=4343,
            command="python agent.py",
            model="gpt-4o",
            provider="openai",
            turns=3,
            socket_path=Path("/nonexistent/4343.sock"),
        ),
    ]


LONG_COMMAND = (
    "python -m my_agent --config configs/a-rather-long-config-name.yaml --task "
    "'fix the flaky test in tests/test_probe.py' --max-steps 40"
)


def test_ps_shows_the_whole_command_to_a_script_and_keeps_columns_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Piped (not a terminal), the COMMAND column is whole: it was cut at 60 characters with no mark
    ("... --task 'fix the flaky" read as the command). A model longer than the old fixed 22-character
    column ran into its provider ("claude-sonnet-4-5-20250929anthropic")."""
    import engine.probe.client as client

    monkeypatch.setattr(client, "list_agents", lambda skipped=None: _agents(LONG_COMMAND))
    res = CliRunner().invoke(app, ["ps"])
    assert res.exit_code == 0, res.output
    head, first, second = res.stdout.splitlines()
    assert first.endswith(LONG_COMMAND), first
    assert first.split()[:4] == ["4242.1", "claude-sonnet-4-5-20250929", "anthropic", "12"], first
    assert second.split()[:4] == ["4343", "gpt-4o", "openai", "3"], second
    # the columns line up: each header starts where its values do
    for name, value in (("PROVIDER", "anthropic"), ("TURNS", "12"), ("COMMAND", "python")):
        assert head.index(name) <= first.index(value) < head.index(name) + len(name) + 1, (head, first)


def _drained(fd: int) -> str:
    """All a pty's master side holds now (one read can return part of it)."""
    import select

    got = b""
    while select.select([fd], [], [], 0.5)[0]:
        got += os.read(fd, 65536)
    return got.decode()


def test_ps_fits_the_command_to_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the command takes the columns left, cut with an ellipsis: at 100 columns the line
    ends at the edge (it was cut at 60 characters whatever the width); at 200 it is whole."""
    import fcntl
    import io
    import struct
    import sys
    import termios

    import engine.probe.client as client
    from inspector.cli_ps import ps

    monkeypatch.setattr(client, "list_agents", lambda skipped=None: _agents(LONG_COMMAND))
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    for cols in (100, 200):
        master, slave = os.openpty()
        try:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
            out = io.TextIOWrapper(io.FileIO(slave, "w", closefd=False), encoding="utf-8", newline="")
            monkeypatch.setattr(sys, "stdout", out)
            monkeypatch.setattr(sys, "__stdout__", out)
            ps()
            out.flush()
            monkeypatch.undo()
            monkeypatch.setattr(client, "list_agents", lambda skipped=None: _agents(LONG_COMMAND))
            text = _drained(master)
        finally:
            os.close(master)
            os.close(slave)
        lines = text.replace("\r\n", "\n").splitlines()
        row = next(line for line in lines if line.lstrip().startswith("4242.1"))
        if cols == 100:
            assert len(row) == 100 and row.endswith("…"), row
            assert "--config configs/" in row
        else:
            assert row.endswith(LONG_COMMAND), row


def test_other_users_agents_reads_the_probes_bound_names(tmp_path: Path) -> None:
    """/proc/net/unix as the kernel writes it: only a listening socket bound under the probe's name
    (`.<pid>.<hex>`), once per inode, outside our own runtime directory, of a live process not ours."""
    import subprocess

    from engine.probe.discover import other_users_agents

    # Another user's live process: pid 1 (root's) for a suite not run as root, else a sleep run as nobody.
    sleeper = (
        subprocess.Popen(["sleep", "60"], user=65534, group=65534, extra_groups=[])
        if os.getuid() == 0
        else None
    )
    try:
        theirs, uid = (sleeper.pid, 65534) if sleeper is not None else (1, 0)
        ours = tmp_path / "mine" / "contextpipe"
        rows = [
            ("00010000", "01", "101", f"/tmp/x/contextpipe/.{theirs}.a1b2c3"),
            ("00010000", "01", "101", f"/tmp/x/contextpipe/.{theirs}.a1b2c3"),  # the same inode again
            ("00000000", "03", "102", f"/tmp/x/contextpipe/.{theirs}.a1b2c3"),  # accepted, not listening
            ("00010000", "01", "103", f"/run/user/9/contextpipe/.{theirs}.0f0f0f"),  # a second one
            (
                "00010000",
                "01",
                "104",
                f"{ours}/.{theirs}.d4e5f6",
            ),  # in our own directory: list_agents' to say
            ("00010000", "01", "105", f"/tmp/x/contextpipe/{theirs}.sock"),  # not the bind name
            ("00010000", "01", "106", f"/tmp/x/contextpipe/.{os.getpid()}.abcdef"),  # ours
            ("00010000", "01", "107", "/tmp/x/contextpipe/.4194304.abcdef"),  # past any pid: gone
        ]
        table = tmp_path / "unix"
        table.write_text(
            "Num       RefCount Protocol Flags    Type St Inode Path\n"
            + "".join(
                f"0000000000000000: 00000002 00000000 {f} 0001 {st} {ino} {p}\n" for f, st, ino, p in rows
            )
            + "0000000000000000: 00000002 00000000 00010000 0001 01 108\n"  # unbound: no path
        )
        assert other_users_agents(ours, table) == {uid: 2}
        assert other_users_agents(ours, tmp_path / "absent") == {}
    finally:
        if sleeper is not None:
            sleeper.kill()
            sleeper.wait()
