"""Wrong permissions as a user meets them, for real even when the suite runs as root.

Every command runs in a child process as another user (tests/support/unprivileged.py: nobody when the
suite is root, the suite's own user otherwise) on real files whose owner and mode deny it: a recording it
may not read, a directory it may not write, a runtime directory that is not safely its own. Each must
end with one line that says what was wrong and what to do, a non-zero status, no traceback, and nothing
left behind. The agents of other users and the processes that are not agents are in
test_permissions_probe.py; the proxy's port, upstream and malformed requests in test_permissions_proxy.py.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.unprivileged import IS_ROOT, Sandbox, one_line, sandbox

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
OTHER = ROOT / "demo_sessions" / "scout-openai.cpsession"
TRAJECTORY = (  # a mini-swe-agent trajectory of one call
    b'{"info": {"config": {"model": {"model_name": "deepseek-chat"}}}, "trajectory_format": "mini-swe-agent-1", '
    b'"instance_id": "t", "messages": [{"role": "system", "content": "You fix bugs."}, '
    b'{"role": "user", "content": "Fix it."}, {"role": "assistant", "content": "ls"}]}'
)


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with sandbox() as s:
        yield s


def _whose_denial(line: str, path: Path) -> None:
    """The denial names whose file it is and the way out (the owner shares it, or run as them)."""
    assert "Permission denied: it is owned by " in line and "mode 0000" in line, line
    if IS_ROOT:  # the child is nobody; the file is root's
        assert "owned by root (uid 0)" in line and "you are nobody" in line, line
        assert f"chmod o+r {path}" in line and "sudo -u root cp-inspect" in line, line
    else:
        assert f"it is yours: chmod u+r {path}" in line, line


# ---- a recording that cannot be read ---------------------------------------------------------------

# argv with BAD (the unreadable recording), GOOD (a readable one), OUT (a new file); the status the README
# gives each: diff and forks 2 for any input they cannot use.
READERS = [
    (["replay", "BAD"], 1),
    (["explain", "BAD"], 1),
    (["verify", "BAD"], 1),
    (["find", "BAD", "latch"], 1),
    (["simulate", "BAD", "--window", "32k"], 1),
    (["salvage", "BAD", "-o", "OUT"], 1),
    (["diff", "BAD", "GOOD"], 2),
    (["forks", "BAD"], 2),
]


@pytest.mark.parametrize(("argv", "status"), READERS, ids=[a[0] for a, _ in READERS])
def test_a_recording_that_cannot_be_read_says_whose_it_is_and_what_to_do(
    sb: Sandbox, argv: list[str], status: int
) -> None:
    # It said "cannot open recording X: Permission denied": not whose file, nor what to do about it.
    bad = sb.unreadable("bad.cpsession", DEMO)
    good = sb.readable("good.cpsession", OTHER)
    out = sb.home / "out.cpsession"
    before = sb.files()
    r = sb.cli(*[{"BAD": str(bad), "GOOD": str(good), "OUT": str(out)}.get(a, a) for a in argv])
    assert r.returncode == status, r.stderr
    line = one_line(r.stderr)
    assert line.startswith("cp-inspect: ") and f"cannot open recording {bad}" in line, line
    _whose_denial(line, bad)
    assert r.stdout == b"" and sb.files() == before  # salvage made no OUT, nor its partial file


def test_report_skips_a_recording_it_cannot_read_and_names_the_owner(sb: Sandbox) -> None:
    bad = sb.unreadable("bad.cpsession", DEMO)
    good = sb.readable("good.cpsession", OTHER)
    r = sb.cli("report", str(bad), str(good))
    err = r.stderr.decode()
    assert r.returncode == 0 and "Traceback" not in err, err
    skipped = [line for line in err.splitlines() if f"warning: skipped {bad}" in line]
    assert len(skipped) == 1, err
    _whose_denial(skipped[0], bad)
    assert b"scout-openai" in r.stdout or b"good" in r.stdout, r.stdout
    r = sb.cli("report", str(bad))  # nothing left to report: exit 1
    assert r.returncode == 1 and b"no session could be reported" in r.stderr and b"Traceback" not in r.stderr


class _Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP backend that takes every batch (the SDK needs only a 200)."""

    posts = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).posts += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_export_skips_a_recording_it_cannot_read_and_sends_the_rest(sb: Sandbox) -> None:
    pytest.importorskip("opentelemetry.sdk")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        bad = sb.unreadable("bad.cpsession", DEMO)
        good = sb.readable("good.cpsession", OTHER)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        r = sb.cli("export", str(bad), str(good), "--otlp", url)
        err = r.stderr.decode()
        assert "Traceback" not in err, err
        skipped = [line for line in err.splitlines() if str(bad) in line]
        assert len(skipped) == 1, err
        _whose_denial(skipped[0], bad)
        assert _Collector.posts >= 1  # the readable one went
        _Collector.posts = 0
        r = sb.cli("export", str(bad), "--otlp", url)  # nothing readable: nothing sent, exit 1
        assert r.returncode == 1 and b"Traceback" not in r.stderr, r.stderr
        assert _Collector.posts == 0
    finally:
        server.shutdown()
        server.server_close()


def test_a_recording_in_a_directory_that_cannot_be_entered_names_the_directory(sb: Sandbox) -> None:
    locked = sb.base / "locked"  # the suite's, so that a suite that is not root can fill it
    locked.mkdir()
    inside = locked / "run.cpsession"
    inside.write_bytes(DEMO.read_bytes())
    inside.chmod(0o644)
    locked.chmod(0o700 if IS_ROOT else 0o000)  # root's 0700 keeps nobody out; a user's 000 keeps the user out
    try:
        r = sb.cli("verify", str(inside))
    finally:
        locked.chmod(0o755)
    assert r.returncode == 1, r.stderr
    line = one_line(r.stderr)
    assert f"Permission denied: directory {locked}" in line and "cannot be entered by you" in line, line
    assert f"chmod o+x {locked}" in line, line


# ---- an output path that cannot be written ---------------------------------------------------------

# argv with GOOD, RO (a directory the child may not write); the status; what the line says.
WRITERS = [
    (["salvage", "GOOD", "-o", "RO/s.cpsession"], 2, "-o RO/s.cpsession: cannot create a file in RO"),
    (["import", "auto", "TRAJ", "-o", "RO/i.cpsession"], 2, "-o RO/i.cpsession: cannot create a file in RO"),
    (["report", "GOOD", "--svg", "RO/c.svg"], 2, "--svg RO/c.svg: cannot create a file in RO"),
    (["attach", "1", "--record", "RO/a.cpsession"], 2, "--record RO/a.cpsession: cannot create a file in RO"),
    (
        ["demo", "--no-tui", "--turns", "2", "--delay", "0", "--record", "RO/d.cpsession"],
        2,
        "--record RO/d.cpsession: cannot create a file in RO",
    ),
    (
        ["run", "--no-tui", "--record-dir", "RO", "--", "true"],
        2,
        "cannot write in the record directory RO (Permission denied): give --record-dir a directory you can",
    ),
    (
        ["run", "--no-tui", "--record-dir", "RO/sub", "--", "true"],
        2,
        "cannot create the record directory RO/sub: Permission denied",
    ),
    (
        ["proxy", "--port", "0", "--record-dir", "RO"],
        1,
        "cannot write in the record directory RO (Permission denied)",
    ),
    (["ctx", "import", "GOOD", "--db", "RO/c.sqlite"], 1, "directory RO is not writable"),
    (["ctx", "add", "--db", "RO/c.sqlite", "hello"], 1, "directory RO is not writable"),
]


@pytest.mark.parametrize(("argv", "status", "says"), WRITERS, ids=[" ".join(a[:2]) for a, _, _ in WRITERS])
def test_an_output_that_cannot_be_written_is_said_before_any_work(
    sb: Sandbox, argv: list[str], status: int, says: str
) -> None:
    # demo --record: its agent died with a RecordingError traceback and the demo said "recording kept at"
    # a file it never wrote; run --record-dir of a directory that exists: a PermissionError traceback
    # from its proxy log; proxy --record-dir: it listened, and failed each conversation's recording.
    ro = sb.dir("ro", writable=False)
    good = sb.readable("good.cpsession", DEMO)
    traj = sb.readable("t.json", TRAJECTORY)
    names = {"GOOD": str(good), "TRAJ": str(traj), "RO": str(ro)}
    args = [names.get(a, a.replace("RO/", f"{ro}/")) for a in argv]
    before = sb.files()
    r = sb.cli(*args, timeout=60)
    assert r.returncode == status, r.stderr
    line = one_line(r.stderr)
    assert line.startswith("cp-inspect: ") and says.replace("RO", str(ro)) in line, line
    assert sb.files() == before


def test_adding_to_a_store_that_is_not_ours_to_write_says_so_and_reading_it_works(sb: Sandbox) -> None:
    from engine.store import ContextStore

    d = sb.base / "store"
    d.mkdir()
    db = d / "theirs.sqlite"
    with ContextStore(db) as s:
        s.add("the parser drops trailing commas", "user")
    db.chmod(0o444)  # readable, not writable, by the child (root's, or the user's own read-only file)
    d.chmod(0o555)
    before = {p: p.stat().st_mtime_ns for p in sb.base.rglob("*")}
    r = sb.cli("ctx", "add", "--db", str(db), "more")
    assert r.returncode == 1, r.stderr
    line = one_line(r.stderr)
    assert f"{db} is read-only" in line and "reading it (ctx get, ctx expand) works" in line, line
    r = sb.cli("ctx", "get", "--db", str(db), "--budget", "100")
    assert r.returncode == 0 and b"trailing commas" in r.stdout, r.stderr
    assert {p: p.stat().st_mtime_ns for p in sb.base.rglob("*")} == before
    db.chmod(0o000)
    r = sb.cli("ctx", "get", "--db", str(db), "--budget", "100")
    assert r.returncode == 1, r.stderr
    line = one_line(r.stderr)
    assert f"cannot read {db}: Permission denied: it is owned by" in line, line


def test_run_leaves_no_state_directory_behind(sb: Sandbox) -> None:
    # Every `run` left its cp-run-* directory (the proxy's state file) in the temporary directory.
    tmp = sb.dir("tmp", writable=True)
    r = sb.cli(
        "run", "--no-tui", "--record-dir", str(sb.home / "rec"), "--", "true", env={"TMPDIR": str(tmp)}
    )
    assert r.returncode == 0, r.stderr
    assert list(tmp.iterdir()) == []


def test_the_child_really_is_denied() -> None:
    """The helper itself: as root, the child really is another user (else every test above is vacuous)."""
    with sandbox() as s:
        r = s.run([sys.executable, "-c", "import os; print(os.getuid())"])
        assert r.returncode == 0, r.stderr
        uid = int(r.stdout)
        assert (uid != 0) if IS_ROOT else (uid == os.getuid())
        secret = s.unreadable("secret", b"x")
        r = s.run([sys.executable, "-c", f"open({str(secret)!r}).read()"])
        assert r.returncode != 0 and b"PermissionError" in r.stderr


def test_another_users_live_store_in_a_directory_we_may_not_write_reads_and_refuses_writes(
    sb: Sandbox,
) -> None:
    """A store another user's agent holds open (its -wal and -shm beside it) in a directory we may not
    write: reading needs no write access and gets every item; a write is one line and changes nothing."""
    from engine.store import ContextStore

    d = sb.base / "store"
    d.mkdir()
    db = d / "c.sqlite"
    with ContextStore(db) as live:
        ids = [live.add(f"note {i}: the parser drops trailing commas", "user") for i in range(5)]
        assert {p.name for p in d.iterdir()} == {"c.sqlite", "c.sqlite-wal", "c.sqlite-shm"}
        for p in d.iterdir():
            p.chmod(0o444)  # the writer's descriptors stay open for writing
        d.chmod(0o555)
        before = {p.name: p.read_bytes() for p in d.iterdir()}
        r = sb.cli("ctx", "get", "--db", str(db), "--budget", "2000")
        assert r.returncode == 0 and all(f"note {i}:".encode() in r.stdout for i in range(5)), r.stderr
        r = sb.cli("ctx", "expand", "--db", str(db), str(ids[2]))
        assert r.returncode == 0 and b"note 2:" in r.stdout, r.stderr
        r = sb.cli("ctx", "import", str(sb.readable("g.cpsession", OTHER)), "--db", str(db))
        assert r.returncode == 1, r.stderr
        line = one_line(r.stderr)
        assert "nothing imported" in line and f"{db} is read-only" in line, line
        assert {p.name: p.read_bytes() for p in d.iterdir()} == before
        assert live.add("the agent goes on writing", "user") > ids[-1]


# ---- output that cannot be written: `> FILE` on a full disk ------------------------------------------

FULL_OUTPUT = [
    ["simulate", "DEMO", "--window", "32k", "--json"],
    ["report", "DEMO", "--json"],
    ["explain", "DEMO", "--json"],
    ["find", "DEMO", "latch"],
    ["verify", "DEMO"],
    ["ps", "--json"],
]


def _into(target: Path, argv: list[str], tmp_path: Path, limit: int | None = None) -> str:
    """The one stderr line of `python -m ARGV...` with stdout written to `target`, the file size limited
    to `limit` bytes if given; it must exit 1."""
    import resource

    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(tmp_path)}
    env.pop("COLUMNS", None)
    with target.open("wb") as out:
        r = subprocess.run(
            [sys.executable, "-m", *argv],
            stdout=out,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=tmp_path,
            timeout=120,
            preexec_fn=None
            if limit is None
            else lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
        )
    assert r.returncode == 1, r.stderr
    return one_line(r.stderr)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full (every write to it fails ENOSPC)")
@pytest.mark.parametrize("argv", FULL_OUTPUT, ids=[a[0] for a in FULL_OUTPUT])
def test_output_to_a_full_disk_is_one_line_not_a_traceback(tmp_path: Path, argv: list[str]) -> None:
    # `simulate ... --json > run.json` on a full disk ended with an OSError traceback from print/echo.
    line = _into(Path("/dev/full"), ["inspector", *[str(DEMO) if a == "DEMO" else a for a in argv]], tmp_path)
    assert line == (
        "cp-inspect: cannot write the output to /dev/full: No space left on device; what it holds is "
        "incomplete (free some space, or write it elsewhere)"
    ), line


def test_output_to_a_file_past_its_size_limit_is_one_line(tmp_path: Path) -> None:
    # The same through the typer path (`python -m inspector.cli`), to a real file a size limit stops at 1 KiB.
    out = tmp_path / "run.json"
    line = _into(out, ["inspector.cli", "simulate", str(DEMO), "--window", "32k", "--json"], tmp_path, 1024)
    assert line.startswith(f"cp-inspect: cannot write the output to {out}: File too large; what it holds"), (
        line
    )
    assert out.stat().st_size <= 1024


# ---- a trajectory that cannot be read: import, ctx import, eval --------------------------------------

IMPORTERS = [
    (["import", "auto", "TRAJ", "-o", "OUT"], "cannot read TRAJ: "),
    (["import", "auto", "TRAJ", "--list"], "cannot read TRAJ: "),
    (["ctx", "import", "BAD", "--db", "DB"], "cannot open recording BAD: "),
]


@pytest.mark.parametrize(("argv", "says"), IMPORTERS, ids=[" ".join(a[:3]) for a, _ in IMPORTERS])
def test_an_unreadable_trajectory_or_recording_to_import_says_whose_it_is(
    sb: Sandbox, argv: list[str], says: str
) -> None:
    # import said "cannot read X: Permission denied", no more.
    names = {
        "TRAJ": str(sb.unreadable("t.json", TRAJECTORY)),
        "BAD": str(sb.unreadable("bad.cpsession", DEMO)),
        "OUT": str(sb.home / "out.cpsession"),
        "DB": str(sb.home / "c.sqlite"),
    }
    before = sb.files()
    r = sb.cli(*[names.get(a, a) for a in argv])
    assert r.returncode == 1, r.stderr
    line = one_line(r.stderr)
    path = Path(names["TRAJ" if "TRAJ" in says else "BAD"])
    assert line.startswith("cp-inspect: " + says.replace("TRAJ", str(path)).replace("BAD", str(path))), line
    _whose_denial(line, path)
    assert sb.files() == before  # no OUT, no store


def test_eval_names_the_owner_of_a_trajectory_it_cannot_read(sb: Sandbox) -> None:
    # It said "t.json: skipped: [Errno 13] Permission denied: '/tmp/.../t.json'".
    d = sb.base / "trajectories"
    d.mkdir()
    t = d / "t.json"
    t.write_bytes(TRAJECTORY)
    t.chmod(0o000)
    r = sb.cli("eval", "--trajectories", str(d))
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err and "[Errno" not in err, err
    last = err.strip().splitlines()[-1]
    assert "no trajectory under" in last and "t.json: Permission denied: it is owned by" in last, last
    _whose_denial(last, t)
