"""Opening a recording for a command, and the error exit every command shares, without importing typer.

`cp-inspect replay FILE` is run without typer (entry.py): typer and the other commands' modules were
60-80 ms of CPU before a long recording's first frame. These two helpers are what `replay` needs of the
command-line plumbing, so they import typer only on the way out, to print and exit exactly as the
typer commands do (cli_common.py re-exports them for those).

What every command writes to stderr, one convention (the lines a person reads beside the output, which
stays on stdout for a script):
- every line starts with `cp-inspect: `, so it is told apart from the agent's output, a pipe's other
  commands or the recording's text;
- an error, after which the command stops (exit 1, or 2 for a wrong argument): `cp-inspect: MESSAGE`
  (`fail`): what is wrong and what to do;
- a warning, after which the command goes on (a file skipped, a recording cut off, an option ignored):
  `cp-inspect: warning: MESSAGE` (`warn`);
- what a running command says it is doing or where things are (the proxy's address, a page's place,
  the evaluation's progress): `cp-inspect: MESSAGE`; the exit status tells it from an error.
Typer's own usage errors (`Usage: ...` and its box) and Ctrl-C's `Aborted!` are click's, left as they are.
Lines of a report on stdout (`note: ...` in verify, simulate, import) are the report's, not these.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from engine.recording.cpsession import RecordingReader


def fail(message: str, code: int = 1) -> NoReturn:
    """Print a message a person can act on (prefixed like every error of this program) and exit."""
    import typer  # only on the way out (see the module's docstring)

    typer.secho(f"cp-inspect: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Say something is wrong or left out while the command goes on (see the module's docstring)."""
    import typer

    typer.secho(f"cp-inspect: warning: {message}", fg=typer.colors.YELLOW, err=True)


def warn_plain(message: str) -> None:
    """`warn`'s line, uncoloured, without importing typer: for the paths that do not (attach on a pid, and
    explain's and find's reading a live agent, say why its recording is not read while they go on)."""
    import sys

    sys.stderr.write(f"cp-inspect: warning: {message}\n")


def about(path: Path, exc: Exception) -> str:
    """`exc`'s message naming `path` once: a RecordingError already starts with it."""
    text = str(exc)
    return text if text.startswith(str(path)) else f"{path}: {text}"


def demo_hint(given: str | Path) -> str:
    """What to add to "no such file" for a path under demo_sessions/ given from another folder (each command's
    --help example names the demo recordings from the repository's top folder): the path that is there."""
    if not str(given).startswith("demo_sessions"):
        return ""
    import glob  # on the way out only

    top = Path(__file__).resolve().parent.parent
    there = top / given
    if Path.cwd().resolve() == top or not glob.glob(str(there)):
        return ""  # from the top folder (the name is wrong), or not one of the demo recordings
    return f" in {Path.cwd()}: the --help examples run from {top}; from here, give {there}"


def missing(path: str | Path, what: str = "file") -> str:
    """"no such file: PATH", with where the demo recordings are when PATH meant one of them, and what `-`
    (stdin, to many programs) is not here."""
    if str(path) == "-":
        return f"no such {what}: - (recordings are read from a file, not from stdin: give its path)"
    return f"no such {what}: {path}{demo_hint(path)}{_pid_hint(path)}"


def _pid_hint(path: str | Path) -> str:
    """For a name that is a pid (`replay 1234`: the agent's pid, meant to be watched), what watches it;
    for a live agent that records, its recording too: `simulate 1234` or `verify 1234` read a file, and
    the hint sent the person to watch the agent when what they wanted was the file it writes."""
    from engine.probe.runtime_dir import parse_target  # on the way out only

    parsed = parse_target(str(path))
    if parsed is None:
        return ""
    serving, recording = _agent_recording(*parsed)
    if recording is not None:
        return f" (agent {path} records to {recording}: give that file; `cp-inspect attach {path}` watches it)"
    if serving:
        return (f" (agent {path} is live and records nothing: `cp-inspect attach {path}` watches it, and s "
                "there saves its turns to a file)")
    return f" (an agent's pid? `cp-inspect attach {path}` watches it)"


def _agent_recording(pid: int, session: int | None) -> tuple[bool, str | None]:
    """Whether live agent `pid` (its `session`) answers on its probe, and the recording it writes, asked
    of it (None when it records nothing); (False, None) when it serves none or does not answer within a
    second."""
    from engine.errors import ContextPipeError
    from engine.probe.runtime_dir import resolve_runtime_dir, socket_path
    from engine.recording.cpsession import RecordingReader

    try:
        d = resolve_runtime_dir(None)
        if d is None or not socket_path(pid, d, session).exists():  # (nothing serves there: not asked)
            return False, None
        from inspector.sources.live_recording import open_recorded

        got, _ = open_recorded(pid, session, timeout=1.0)
    except (ContextPipeError, OSError):
        return False, None
    got.close()
    return True, str(got.path) if isinstance(got, RecordingReader) else None


def not_a_pid(given: str) -> str:
    """`attach`'s error for something that is not PID or PID.SESSION; for a file there (a recording given
    to `attach`), what opens it."""
    text = f"{given!r} is not a pid: give PID or PID.SESSION as `cp-inspect ps` lists them"
    try:
        is_file = Path(given).is_file()
    except OSError:  # (a name too long for the system, a directory we may not enter)
        is_file = False
    return text + (f"; to step through the recording {given}: cp-inspect replay {given}" if is_file else "")


def trajectory_hint(path: Path) -> str | None:
    """For a file that is text starting like JSON (a trajectory or proxy log given where a recording
    goes), or a SQLite database (a context store), what to do, instead of the frame reader's 'frame
    length 2065850658 exceeds the limit'."""
    if not path.is_file():
        return None  # a FIFO would block this open until something writes to it (the reader refuses it)
    head = file_head(path)
    if head is None:
        return None
    if head.startswith(SQLITE_MAGIC):
        return (
            f"{path} is a SQLite database (a context store?), not a .cpsession recording: "
            f"`cp-inspect ctx get --db {path} --budget 12k` reads a store"
        )
    if not starts_json(head):
        return None
    return (
        f"{path} is JSON, not a .cpsession recording: if it is an agent's trajectory or a proxy log, "
        f"import it first: cp-inspect import auto {path} -o run.cpsession"
    )


# The first 16 bytes of every SQLite database file (the context store is one).
SQLITE_MAGIC = b"SQLite format 3\x00"


def file_head(path: Path) -> bytes | None:
    """A file's first 64 bytes, enough to tell what it is (None when it cannot be read: the caller's own
    open says why). Not for a FIFO: the open waits for a writer (check is_file() first where one may come)."""
    try:
        with path.open("rb") as f:
            return f.read(64)
    except OSError:
        return None


def starts_a_recording(head: bytes) -> bool:
    """Whether a file's first bytes (file_head) are a .cpsession recording's header frame."""
    return b"@header" in head and b"cpsession" in head


def starts_json(head: bytes) -> bool:
    """Whether a file's first bytes start JSON (a trajectory or a proxy log), past a BOM and white space."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"{", b"["))


def salvage_advice(path: object) -> str:
    """What to run for a recording damaged after its whole turns (cut off by a killed writer, or its
    footer damaged): said by `verify` and by the inspector's damage toast alike."""
    return f"to keep them as a closed recording that reads without the warning: cp-inspect salvage {path} -o FIXED.cpsession"


def open_recording(path: Path, *, salvage: bool = False, warn_damage: bool = True) -> RecordingReader:
    """`path` opened (a clear error, exit 1, when it cannot be); damage found as it opens is warned of
    unless `warn_damage` is False (salvage says it in its own report)."""
    # Imported here: every cp-inspect command imports this module, and --help must stay cheap.
    from engine.recording.cpsession import RecordingError, RecordingReader

    try:
        if not path.exists():  # in a directory we may not enter: PermissionError, not False
            fail(missing(path))
        if path.is_dir():
            fail(f"{path} is a directory: give the path of a .cpsession recording file")
        r = RecordingReader.open(path, salvage=salvage)
    except RecordingError as exc:
        fail(trajectory_hint(path) or str(exc))
    except PermissionError:
        from engine.access import denied  # on the way out only

        fail(f"cannot read {path}: {denied(path)}")
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    if r.damage is not None and warn_damage:
        # Named: `simulate a b c` warned "last frame at offset 127 is incomplete" of one of three files.
        warn(r.damage.message if r.damage.message.startswith(str(path)) else f"{path}: {r.damage.message}")
    return r
