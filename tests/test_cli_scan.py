"""Every cp-inspect command with bad paths and values (issue 10 items 13, 14, 15, 21): one clear line, a
non-zero exit, never a traceback; the context store refuses foreign SQLite files and reads read-only ones;
`demo --no-tui` serves an attachable agent that dies with its parent (items 11, 12)."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.probe.client import list_agents
from engine.recording.cpsession import RecordingReader
from engine.store import ContextStore
from inspector.cli import app
from tests.support.cli_lines import is_error_line

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad")
    (d / "empty.cpsession").write_bytes(b"")
    (d / "text.cpsession").write_text("not a recording\n")
    (d / "adir").mkdir()
    (d / "existing.cpsession").write_bytes(DEMO.read_bytes())
    (d / "traj.json").write_text("{}")
    return {
        "dir": d / "adir",
        "missing": d / "missing.cpsession",
        "empty": d / "empty.cpsession",
        "text": d / "text.cpsession",
        "existing": d / "existing.cpsession",
        "traj": d / "traj.json",
        "nodir": d / "no" / "such" / "dir" / "x.cpsession",
    }


def _cases(b: dict[str, Path]) -> list[list[str]]:
    demo = str(DEMO)
    cases: list[list[str]] = []
    for cmd in ("verify", "explain", "simulate", "replay", "salvage"):
        for key in ("dir", "missing", "empty", "text"):
            extra = ["-o", str(b["dir"] / "out.cpsession")] if cmd == "salvage" else []
            cases.append([cmd, str(b[key]), *extra])
    for key in ("dir", "missing", "empty"):
        cases.append(["import", "auto", str(b[key]), "-o", str(b["dir"] / "o.cpsession")])
    cases += [
        ["import", "auto", str(b["traj"]), "-o", str(b["existing"])],  # refuses to overwrite
        ["import", "auto", str(b["traj"]), "-o", str(b["dir"])],
        ["import", "auto", str(b["traj"]), "-o", str(b["nodir"])],
        ["explain", demo, "--threshold", "trim=5"],
        ["explain", demo, "--threshold", "trim"],
        ["explain", demo, "--threshold", "bogus=0.5"],
        ["explain", demo, "--threshold", "trim=abc"],
        ["explain", demo, "--threshold", "compact=0.3", "--threshold", "trim=0.9"],
        ["explain", demo, "--gate", "nope=off"],
        ["explain", demo, "--gate", "spill=maybe"],
        ["explain", demo, "--turn", "99999"],
        ["explain", demo, "--format", "xml"],
        ["explain", demo, "--budget", "-5"],
        ["explain", demo, "--provider", "nope", "--budget", "5000"],
        ["replay", demo, "--turn", "99999"],
        ["simulate", demo, "--threshold", "prune=11"],
        ["simulate", demo, "--gate", "x=on"],
        ["salvage", demo, "-o", str(b["existing"])],
        ["demo", "--turns", "0"],
        ["demo", "--no-tui", "--turns", "-3"],
        ["demo", "--record", str(b["existing"])],
        ["demo", "--record", str(b["nodir"])],
        ["demo", "--record", str(b["dir"])],
        ["demo", "--delay", "-1"],
        ["ctx", "get", "--db", str(b["dir"]), "--budget", "1000"],
        ["ctx", "get", "--db", str(b["nodir"]), "--budget", "1000"],
        ["ctx", "get", "--db", str(b["text"]), "--budget", "1000"],
        ["ctx", "add", "--db", str(b["dir"] / "s.sqlite"), ""],
        ["ctx", "add", "--db", str(b["dir"] / "s.sqlite"), "   "],
        ["ctx", "expand", "--db", str(b["dir"] / "e.sqlite"), "99999"],
        ["attach", "999999999"],
        ["explain", "999999999"],
    ]
    return cases


def test_every_command_with_bad_input_says_what_is_wrong(bad: dict[str, Path]) -> None:
    """In-process (fast): every case exits non-zero through a clean exit with a one-line cp-inspect: or
    usage message, never an exception."""
    runner = CliRunner()
    problems = []
    for args in _cases(bad):
        res = runner.invoke(app, args)
        out = res.output
        clean = res.exception is None or isinstance(res.exception, SystemExit)
        said = [ln for ln in out.splitlines() if is_error_line(ln)]
        usage = "Error" in out or "Invalid value" in out or "Usage:" in out
        if res.exit_code == 0 or not clean or "Traceback" in out or not (len(said) == 1 or usage):
            problems.append(f"{args}: exit {res.exit_code}, {res.exception!r}: {out[-300:]}")
    assert not problems, "\n".join(problems)
    assert not (bad["dir"] / "s.sqlite").exists()  # an empty item never created a store


def test_the_real_program_prints_no_traceback(bad: dict[str, Path]) -> None:
    """A few of the cases through the installed entry point (a real process, real stderr)."""
    for args in (
        ["verify", str(bad["dir"])],
        ["explain", str(DEMO), "--threshold", "trim=5"],
        ["import", "auto", str(bad["traj"]), "-o", str(bad["existing"])],
        ["demo", "--turns", "0"],
    ):
        res = subprocess.run(
            [sys.executable, "-m", "inspector.cli", *args], capture_output=True, text=True, timeout=120
        )
        assert res.returncode != 0 and "Traceback" not in res.stderr, (args, res.stderr)
        assert res.stderr.startswith("cp-inspect: ") and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_short_threshold_names_work_everywhere() -> None:
    runner = CliRunner()
    short = runner.invoke(app, ["explain", str(DEMO), "--turn", "20", "--threshold", "trim=0.5", "--format", "json"])
    full = runner.invoke(
        app, ["explain", str(DEMO), "--turn", "20", "--threshold", "trim_schemas=0.5", "--format", "json"]
    )
    assert short.exit_code == 0 and short.output == full.output
    sim = runner.invoke(app, ["simulate", str(DEMO), "--threshold", "compact=0.7", "--json"])
    assert sim.exit_code == 0, sim.output


def test_help_matches_output_and_flags_show_no_type() -> None:
    runner = CliRunner()
    ps_help = runner.invoke(app, ["ps", "--help"]).output
    assert "JSON array" in ps_help and "<bool>" not in ps_help
    out = runner.invoke(app, ["ps", "--json"]).output
    assert out.lstrip().startswith("[")
    for cmd in (["demo"], ["replay"], ["import"], ["ctx", "get"]):
        assert "<bool>" not in runner.invoke(app, [*cmd, "--help"]).output, cmd


def test_replay_turn_out_of_range_is_refused_like_explain() -> None:
    res = CliRunner().invoke(app, ["replay", str(DEMO), "--turn", "99999"])
    assert res.exit_code == 2 and "turn 99999 is not in" in res.output and "turns 0..39" in res.output


def test_import_refuses_to_overwrite_unless_forced(tmp_path: Path, trajectories_dir: Path) -> None:
    traj = next(p for p in sorted(trajectories_dir.glob("mini-swe-agent*/*.json")))
    out = tmp_path / "run.cpsession"
    out.write_bytes(b"keep me")
    res = CliRunner().invoke(app, ["import", "auto", str(traj), "-o", str(out)])
    assert res.exit_code == 2 and "already exists" in res.output and out.read_bytes() == b"keep me"
    res = CliRunner().invoke(app, ["import", "auto", str(traj), "-o", str(out), "--force"])
    assert res.exit_code == 0, res.output
    assert RecordingReader.open(out).turn_count > 0


# ------------------------------------------------------------------------------------------- store
def test_store_refuses_another_programs_sqlite_file(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        c.execute("INSERT INTO users(name) VALUES ('ada')")
    before = other.read_bytes()
    res = CliRunner().invoke(app, ["ctx", "get", "--db", str(other), "--budget", "1000"])
    assert res.exit_code != 0 and "is not a context store" in res.output and "users" in res.output
    assert other.read_bytes() == before  # not one table added, not switched to WAL
    stamped = tmp_path / "app.sqlite"
    with sqlite3.connect(stamped) as c:
        c.execute("PRAGMA application_id = 1234")
    res = CliRunner().invoke(app, ["ctx", "get", "--db", str(stamped), "--budget", "1000"])
    assert res.exit_code != 0 and "another program's SQLite file" in res.output
    # A new store is stamped, and an old store (made before the stamp) is accepted and stamped.
    store = tmp_path / "s.sqlite"
    ContextStore(store).close()
    with sqlite3.connect(store) as c:
        assert c.execute("PRAGMA application_id").fetchone()[0] == 0x43505354
        assert c.execute("PRAGMA user_version").fetchone()[0] >= 2
        c.execute("PRAGMA application_id = 0")
    ContextStore(store).close()
    with sqlite3.connect(store) as c:
        assert c.execute("PRAGMA application_id").fetchone()[0] == 0x43505354


@contextlib.contextmanager
def _read_only(*paths: Path) -> Iterator[None]:
    """Make paths unwritable for real: modes for a normal user; the immutable attribute for root, which
    ignores modes (chattr needs root and a filesystem that supports it)."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, m in modes.items():
                p.chmod(m)
        return
    done = []
    try:
        for p in paths:
            if subprocess.run(["chattr", "+i", str(p)], capture_output=True).returncode != 0:
                pytest.skip("running as root and chattr +i is unavailable: cannot make a file read-only")
            done.append(p)
        yield
    finally:
        for p in done:
            subprocess.run(["chattr", "-i", str(p)], capture_output=True)


@pytest.mark.parametrize("what", ["file", "directory"])
def test_get_and_expand_work_on_a_read_only_store(tmp_path: Path, what: str) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    db = d / "s.sqlite"
    store = ContextStore(db)
    ids = [store.add(f"note {i}: the parser drops trailing commas in {i}.py", "user") for i in range(5)]
    store.close()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)  # a clean close leaves none; be sure
    runner = CliRunner()
    with _read_only(db if what == "file" else d):
        get = runner.invoke(app, ["ctx", "get", "--db", str(db), "--budget", "2000"])
        assert get.exit_code == 0, get.output
        assert "note 4" in get.output
        exp = runner.invoke(app, ["ctx", "expand", "--db", str(db), str(ids[2])])
        assert exp.exit_code == 0 and "note 2" in exp.output, exp.output
        add = runner.invoke(app, ["ctx", "add", "--db", str(db), "more"])
        assert add.exit_code != 0 and "read-only" in add.output, add.output
    again = runner.invoke(app, ["ctx", "add", "--db", str(db), "note 5: writable again"])
    assert again.exit_code == 0, again.output  # unchanged by the read-only session, and writable again
    assert runner.invoke(app, ["ctx", "get", "--db", str(db), "--budget", "2000"]).output.count("note ") == 6


# -------------------------------------------------------------------------------------------- demo
def _wait_for(pred, timeout: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its new parent) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_headless_demo_is_attachable_and_dies_with_its_parent(tmp_path: Path, sig: signal.Signals) -> None:
    rec = tmp_path / "demo.cpsession"
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector.cli", "demo", "--no-tui", "--turns", "500", "--delay", "0.3",
         "--record", str(rec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert f"recording to {rec}" in first, first
        agent = int(first.split("demo agent pid ", 1)[1].split(",")[0])
        line = proc.stdout.readline()
        assert "attach" in line and str(agent) in line
        # Said once the agent serves its probe: `cp-inspect attach PID` run at once said the demo's agent "is
        # not serving the probe ... start the agent with serve=True", and `ps` listed none.
        assert any(a.pid == agent for a in list_agents()), "the demo said how to attach before its agent served"
        res = CliRunner().invoke(app, ["explain", str(agent), "--format", "json"])  # attachable from elsewhere
        assert res.exit_code in (0, 1), res.output
        turns = [proc.stdout.readline() for _ in range(2)]
        assert all(t.startswith("turn ") for t in turns), turns
        argv = Path(f"/proc/{agent}/cmdline").read_bytes().split(b"\0")
        assert argv[argv.index(b"--delay") + 1] == b"0.3"  # --delay honoured, not forced to 0
        os.kill(proc.pid, sig)
        proc.wait(30)
        assert _wait_for(lambda: not _alive(agent), 30), f"agent {agent} outlived cp-inspect demo ({sig.name})"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert RecordingReader.open(rec).turn_count >= 2  # the recording is kept, readable
