"""The per-user directory that holds probe sockets, and the probe's error types.

    $XDG_RUNTIME_DIR/contextpipe/      when XDG_RUNTIME_DIR names an existing directory
    /tmp/contextpipe-<uid>/            otherwise

The directory is the access boundary: it is created 0700 and refused when it is owned by someone
else or readable/writable by group or other, because a socket in a directory another user controls
could be replaced by theirs (and we would stream our prompts to them). Each socket is `<pid>.sock`.

A socket file outlives an agent that dies without cleaning up (SIGKILL, os._exit), and its pid is later
someone else's. So the server records which process made it, in the file's mtime: the process's start
time in clock ticks since boot (`/proc/<pid>/stat` field 22), as nanoseconds since the epoch, so a
recorded socket shows a date in the first seconds of 1970. It is set before the socket is renamed into
place and nothing else writes a socket's mtime (connecting touches only its atime). `ps`, `attach` and a
server binding the same pid compare it with the live process's (`same_process`): a different start time
is an earlier process with that pid, whatever now answers to it. Clock ticks, not a wall time: the boot
time Linux derives wall times from moves when the clock is stepped, which would make a live agent's
socket look stale.

The error types live here, not in `client`, because this is the lowest module that both the server
(`endpoint`, `server`) and the client import; `client` re-exports them.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from engine.errors import ContextPipeError

SUBDIR = "contextpipe"
SOCKET_SUFFIX = ".sock"
# sockaddr_un.sun_path is 108 bytes on Linux including the terminating NUL.
MAX_SOCKET_PATH = 107
SERVE_ENV = "CONTEXTPIPE_SERVE"
# The largest value of a pid_t (Linux's pid_max is at most 2**22; this is the type's bound).
PID_MAX = 2**31 - 1
try:
    _CLK_TCK = max(1, os.sysconf("SC_CLK_TCK"))
except (AttributeError, ValueError, OSError):
    _CLK_TCK = 100


class ProbeError(ContextPipeError):
    """Base class for everything the probe (server or client) raises on purpose."""


class NoSuchProcess(ProbeError):
    def __init__(self, pid: int) -> None:
        self.pid = pid
        super().__init__(f"no process with pid {pid} (it may have exited); `cp-inspect ps` lists live agents")


class NotServing(ProbeError):
    def __init__(self, pid: int, socket_path: Path | None = None, detail: str = "", advice: str = "") -> None:
        """`advice` replaces the default "start the agent serving" (e.g. "attach to its child N")."""
        self.pid = pid
        self.socket_path = socket_path
        where = f" (no live socket at {socket_path})" if socket_path is not None else ""
        extra = f"; {detail}" if detail else ""
        todo = advice or f"Start the agent with serve=True or with the environment variable {SERVE_ENV}=1"
        age = None if advice or detail else process_age_s(pid)
        if age is not None and age < JUST_STARTED_S:
            # An agent opens its socket when its Pipeline starts, after its imports (seconds, for some):
            # told only to start serving, a user who attached at once went to change an agent that served.
            todo = (f"It started {age:.0f} s ago: an agent that serves opens its socket once its pipeline "
                    f"starts, so try again in a moment; if it still is not serving, s{todo[1:]}")
        super().__init__(f"process {pid} is not serving the probe{where}{extra}. {todo}")


class ServesConversations(NotServing):
    """A process that serves several conversations, each on its own socket (`cp-inspect proxy`, a served
    fork), asked for one it has no socket of: its own pid (the proxy's printed pid has none) or a
    conversation number it does not serve. Said as the conversations it serves, not as a process that
    does not serve (whose advice, "start the agent with serve=True", sent the user the wrong way)."""

    def __init__(self, pid: int, socket_path: Path, session: int | None, served: list[int]) -> None:
        shown = ", ".join(f"{pid}.{n}" for n in served[:8]) + (", ..." if len(served) > 8 else "")
        which = "each on its own socket" if session is None else f"but none numbered {session}"
        ProbeError.__init__(
            self,
            f"process {pid} serves {len(served)} conversation{'s' if len(served) != 1 else ''} ({shown}), "
            f"{which} (no socket at {socket_path}): give one of them as PID.N, e.g. {pid}.{served[0]} "
            "(`cp-inspect ps` lists them)",
        )
        self.pid, self.socket_path, self.served = pid, socket_path, served


class PermissionDenied(ProbeError, PermissionError):
    """A socket or runtime directory owned by another user, or a peer the server refused."""


class ProtocolMismatch(ProbeError):
    def __init__(self, ours: int, theirs: int | None, side: str = "agent") -> None:
        self.ours = ours
        self.theirs = theirs
        super().__init__(
            f"probe protocol mismatch: this side speaks version {ours}, the {side} speaks version {theirs}; "
            "use a cp-inspect and engine of matching versions"
        )


class ProbeTimeout(ProbeError, TimeoutError):
    def __init__(self, pid: int, seconds: float, what: str = "answer") -> None:
        self.pid = pid
        self.seconds = seconds
        super().__init__(f"process {pid} did not {what} within {seconds:g} s (is it stopped or busy?)")


def default_runtime_dir() -> Path:
    """Where sockets live for this user (not created, not checked)."""
    return runtime_dir_from(os.environ.get("XDG_RUNTIME_DIR", ""))


def agent_runtime_dir(pid: int) -> Path | None:
    """Where process `pid` puts its socket, by the XDG_RUNTIME_DIR it was started with (its
    /proc/<pid>/environ, which only its own user may read); None when that cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    xdg = ""
    for item in env:
        if item.startswith(b"XDG_RUNTIME_DIR="):
            xdg = os.fsdecode(item[len(b"XDG_RUNTIME_DIR=") :])
    return runtime_dir_from(xdg)


def runtime_dir_from(xdg: str) -> Path:
    """The runtime directory for this user given an XDG_RUNTIME_DIR value ("" when unset)."""
    # An XDG_RUNTIME_DIR that does not exist (say, inherited over sudo or into a container) is
    # treated as unset rather than failing: /tmp/contextpipe-<uid> is still private to us. So is a
    # relative one, which the XDG spec says to ignore: it named a different directory from each working
    # directory (an inspector started elsewhere never found the agent), and put the socket in whatever
    # directory the agent ran from (a project's checkout, say). And so is one owned by another user (the
    # spec: it must be the user's own): `sudo -E` keeps the invoking user's, and a root agent made its
    # `contextpipe` there, root's, so that user's own agents were refused it and ran without a probe.
    # And so is one that others may write without the sticky bit (the spec: mode 0700): anyone could
    # rename our `contextpipe` away and put theirs in its place between a check and a bind.
    if xdg and os.path.isabs(xdg):
        try:
            st = os.stat(xdg)
        except OSError:
            pass
        else:
            shared = st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not shared:
                return Path(xdg) / SUBDIR
    return Path("/tmp") / f"contextpipe-{os.getuid()}"


def check_runtime_dir(path: Path) -> None:
    """Raise PermissionDenied unless `path` is a real directory we own with no group/other bits."""
    st = os.lstat(path)  # lstat: a symlink planted by someone else must not be followed
    if not stat.S_ISDIR(st.st_mode):
        raise PermissionDenied(f"probe runtime path {path} is not a directory (a symlink or file is refused)")
    uid = os.getuid()
    if st.st_uid != uid:
        raise PermissionDenied(
            f"probe runtime directory {path} is owned by uid {st.st_uid}, not by you (uid {uid}); "
            # Not "remove it": in /tmp (sticky) only its owner or root can.
            "refusing to use it. Set XDG_RUNTIME_DIR to a directory of your own, or have its owner remove it"
        )
    if st.st_mode & 0o077:
        raise PermissionDenied(
            f"probe runtime directory {path} has mode {stat.S_IMODE(st.st_mode):04o}; it must be 0700 "
            f"(fix with: chmod 700 {path})"
        )


def ensure_runtime_dir(path: Path | None = None) -> Path:
    """Create (0700) or validate the runtime directory and return it. Server side."""
    d = path if path is not None else default_runtime_dir()
    try:
        try:
            # mode is filtered by the umask; 0700 minus any umask bits is never wider than 0700.
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        except FileNotFoundError:
            # The parent is missing (only possible for a caller-supplied path): create parents, each private.
            os.makedirs(d, 0o700, exist_ok=True)
    except OSError as exc:
        # (An XDG_RUNTIME_DIR we may not write, a read-only file system, a parent that is a file.)
        raise ProbeError(
            f"cannot create the probe runtime directory {d}: {exc.strerror or exc}; set XDG_RUNTIME_DIR "
            f"to a directory of your own that you can write, or unset it to use /tmp/contextpipe-{os.getuid()}"
        ) from exc
    check_runtime_dir(d)
    return d


def resolve_runtime_dir(path: Path | None = None) -> Path | None:
    """The runtime directory if it exists (validated), else None. Client side: never creates it."""
    d = path if path is not None else default_runtime_dir()
    try:
        check_runtime_dir(d)
    except FileNotFoundError:
        return None
    return d


def socket_path(pid: int, runtime_dir: Path, session: int | None = None) -> Path:
    """`<pid>.sock`, or `<pid>.<session>.sock` for one of several sessions served by one process (the
    proxy serves each conversation it sees on its own socket)."""
    name = str(pid) if session is None else f"{pid}.{session}"
    return runtime_dir / f"{name}{SOCKET_SUFFIX}"


def _is_number(text: str) -> bool:
    # ASCII digits only: str.isdigit() also accepts "²" (which int() refuses, so a file named "².sock" in
    # the runtime directory crashed `ps`) and other scripts' digits (which name no socket we write).
    return text.isascii() and text.isdigit()


def parse_target(text: str) -> tuple[int, int | None] | None:
    """`PID` or `PID.SESSION` (as `cp-inspect ps` prints them) -> (pid, session); None if neither."""
    head, dot, tail = text.partition(".")
    if not _is_number(head) or (dot and not _is_number(tail)):
        return None
    return int(head), int(tail) if dot else None


def target_name(pid: int, session: int | None) -> str:
    return str(pid) if session is None else f"{pid}.{session}"


def pid_alive(pid: int) -> bool | None:
    """True if a process `pid` exists, False if not, None if it exists but belongs to another user."""
    if pid <= 0 or pid > PID_MAX:
        # Past what a pid_t holds no process can have it (kill() would raise OverflowError: a junk
        # `99999999999999999999.sock` in the runtime directory crashed `ps`, and `attach` of that number too).
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return None
    # A zombie (exited, not yet reaped by its parent) still answers kill(0) but serves nothing.
    fields = proc_stat(pid)  # None: no /proc (or a race with exit): trust kill(0)
    return not (fields and fields[0] == b"Z")


def process_uid(pid: int) -> int | None:
    """The real uid process `pid` runs as (its /proc/<pid>/status, which any user may read); None when
    /proc cannot say. The server serves only its real uid (server.py), so this is whose probe it is."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def other_users_process(pid: int) -> PermissionDenied:
    """The error for a process that is another user's: whether it serves a probe cannot be seen from here
    (its socket is in that user's private directory) and its probe would refuse us anyway."""
    from engine.access import user_name

    uid = process_uid(pid)
    me = user_name(os.getuid())
    if uid is None:
        return PermissionDenied(
            f"process {pid} belongs to another user, not to you, {me}: an agent's probe serves only its "
            "own user; run cp-inspect as that user"
        )
    import pwd  # an error path's own import

    try:
        login = pwd.getpwuid(uid).pw_name
    except KeyError:
        login = f"#{uid}"
    return PermissionDenied(
        f"process {pid} belongs to {user_name(uid)}, not to you, {me}: an agent's probe serves only its "
        f"own user; run cp-inspect as that user (sudo -u {login} cp-inspect ...)"
    )


# A recorded start (ticks as ns, see the module docstring) is below this: 10**17 ns is ~3 years of
# uptime at 1000 ticks/s; a real mtime (a socket from before the record, or on a system without /proc)
# is decades past it.
_RECORD_LIMIT_NS = 10**17


def start_ticks_ns(pid: int) -> int | None:
    """Process `pid`'s start, as recorded in its socket's mtime: clock ticks since boot, in nanoseconds
    (one tick is 10 ms at the usual 100 ticks/s); None when /proc cannot say."""
    fields = proc_stat(pid)
    try:
        ticks = int(fields[19]) if fields else 0  # field 22 of the whole line: starttime
    except (IndexError, ValueError):
        return None
    return ticks * (10**9 // _CLK_TCK) if ticks > 0 else None


# How young a process is still starting (its imports, its pipeline): `cp-inspect demo --no-tui` waits as
# long for its agent's socket before it prints the attach command.
JUST_STARTED_S = 15.0


def process_age_s(pid: int) -> float | None:
    """Seconds since process `pid` started (its /proc start against the boot clock /proc counts from);
    None when /proc or the clock cannot say."""
    start = start_ticks_ns(pid)
    if start is None:
        return None
    try:
        now = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return None
    return max(0.0, (now - start) / 1e9)


def same_process(st: os.stat_result, pid: int) -> bool | None:
    """Whether the socket whose stat is `st` was made by the process that is `pid` now: False when its
    recorded start differs from the live one's (the pid was reused), None when either is unknown (a
    socket from before the record, no /proc: the caller falls back on connecting)."""
    recorded = st.st_mtime_ns
    if not 0 < recorded < _RECORD_LIMIT_NS:
        return None
    live = start_ticks_ns(pid)
    if live is None:
        return None
    if recorded == live:
        return True
    # A file system keeping whole seconds only (ext3, some network ones) truncated what was set.
    return recorded % 10**9 == 0 and recorded == live - live % 10**9


def record_start(path: Path) -> None:
    """Record this process as `path`'s maker (see the module docstring); nothing when /proc cannot say."""
    start = start_ticks_ns(os.getpid())
    if start is not None:
        try:
            os.utime(path, ns=(time.time_ns(), start))
        except OSError:
            pass  # unrecorded: the check falls back on connecting, as before


def proc_stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/`pid`/stat after the command name (state, ppid, ...), or None when it cannot
    be read. The name is in parentheses and may itself hold spaces and parentheses: split after the last
    ')'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return None
