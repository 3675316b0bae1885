"""Finding the agents on this machine that serve a probe (`cp-inspect ps`, and `attach`'s advice when a
pid does not serve): each `<pid>[.<session>].sock` in the runtime directory asked for its hello
(`list_agents`, `AgentInfo`), a dead agent's socket removed, one that is not this user's socket left
alone and said why (`SkippedSocket`); how many agents other users run, which this user cannot see
(`other_users_agents`). `engine.probe.client` re-exports these names.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.probe.runtime_dir import (
    SOCKET_SUFFIX,
    NotServing,
    ProbeError,
    default_runtime_dir,
    parse_target,
    pid_alive,
    proc_stat,
    process_uid,
    resolve_runtime_dir,
    same_process,
    target_name,
)


@dataclass(frozen=True)
class AgentInfo:
    """A live agent found on this machine (for `ps` and `attach`): its pid, command, model and socket."""

    pid: int
    command: str
    model: str | None
    provider: str | None
    turns: int | None
    socket_path: Path
    engine_version: str | None = None
    error: str | None = None  # set when the agent is alive but did not answer (busy, stopped)
    session: int | None = None  # one of several sessions one process serves (the proxy's conversations)
    tap_errors: int = 0  # journaling failures of a tapped client (never raised into the agent)
    # A proxy's conversation (engine/capture/proxy/peer.py): "pid N", the local process that made its first
    # call, or "unknown" (None: not a proxy's, or a proxy from before these were sent); and the opening of
    # its first user message, which tells conversations of one agent apart.
    client: str | None = None
    opening: str | None = None
    # That process's pid, as the proxy's hello sends it beside `client` (None where `client` names none):
    # `top` watches it to say the conversation's agent is gone while the proxy serves on.
    client_pid: int | None = None

    @property
    def label(self) -> str:
        """What `ps` and `top` show as the agent: its command; for a proxy's conversation the command of the
        process that made its calls, "unknown agent" when the proxy could not tell (not the proxy's own
        command line, which every conversation shared), after the opening of its first user message."""
        if self.client is None:
            return self.command
        who = "unknown agent" if self.client == "unknown" else self.command
        # The opening first: one agent's conversations share its command, and a narrow column (top's) cuts
        # at its end.
        return f"\u201c{self.opening}\u201d · {who}" if self.opening else who

    @property
    def target(self) -> str:
        """What `cp-inspect attach` takes: `PID`, or `PID.SESSION`."""
        return target_name(self.pid, self.session)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["socket_path"] = str(self.socket_path)
        d["target"] = self.target
        return d


def _proc_cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts = [p.decode("utf-8", "replace") for p in f.read().split(b"\0") if p]
        return shlex.join(parts)
    except OSError:
        return ""


def _remove_stale(path: Path, seen: os.stat_result) -> None:
    """Unlink a dead agent's socket, but only a socket of ours (the directory check already passed), and
    only the very file judged stale (`seen`, its lstat before the judging): an agent that got the dead
    one's pid meanwhile renames its own socket into place, a new file, which must not be removed."""
    try:
        st = os.lstat(path)
        if (
            stat.S_ISSOCK(st.st_mode)
            and st.st_uid == os.getuid()
            and (st.st_dev, st.st_ino) == (seen.st_dev, seen.st_ino)
        ):
            os.unlink(path)
    except OSError:
        pass


def _parent_pid(pid: int) -> int | None:
    """`pid`'s parent from /proc (None when it is gone or unreadable)."""
    fields = proc_stat(pid)
    try:
        return int(fields[1]) if fields else None
    except (IndexError, ValueError):
        return None


def served_sessions(pid: int, runtime_dir: Path) -> list[int]:
    """The conversations process `pid` serves on sockets of their own (`<pid>.<n>.sock`: the proxy's),
    in order; a socket an earlier process with that pid left is not one."""
    prefix, found = f"{pid}.", []
    try:
        names = os.listdir(runtime_dir)
    except OSError:
        return []
    for name in names:
        if not (name.startswith(prefix) and name.endswith(SOCKET_SUFFIX)):
            continue
        n = name[len(prefix) : -len(SOCKET_SUFFIX)]
        if not (n.isascii() and n.isdigit()):
            continue
        try:
            st = os.lstat(runtime_dir / name)
        except OSError:
            continue
        if stat.S_ISSOCK(st.st_mode) and same_process(st, pid) is not False:
            found.append(int(n))
    return sorted(found)


def _serving_descendants_hint(pid: int, runtime_dir: Path) -> str:
    """A hint for attaching to a launcher (a shell, `uv run`, `cp-inspect demo`) whose agent runs in a
    child process: the processes below `pid` that do serve the probe, or "" when none does."""
    found = []
    try:
        names = os.listdir(runtime_dir)
    except OSError:
        return ""
    for name in names:
        stem = name[: -len(SOCKET_SUFFIX)] if name.endswith(SOCKET_SUFFIX) else ""
        if not stem.isdigit():
            continue  # (a proxy session's socket, or anything else)
        child = up = int(stem)
        for _ in range(64):  # a bounded walk up the tree: pid 1 or a vanished parent ends it sooner
            parent = _parent_pid(up)
            if parent is None or parent <= 1:
                break
            if parent == pid:
                found.append(child)
                break
            up = parent
    if not found:
        return ""
    found.sort()
    pids = ", ".join(map(str, found))
    return f"Its child process {pids} does: `cp-inspect attach {found[0]}`"


@dataclass(frozen=True)
class SkippedSocket:
    """A `<target>.sock` in the runtime directory that `list_agents` would not connect to, and why."""

    target: str
    socket_path: Path
    reason: str  # says what is wrong and what to do, e.g. "... owned by uid 1001, not by you (uid 1000); ..."

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "socket_path": str(self.socket_path), "reason": self.reason}


def _refusal(path: Path, st: os.stat_result, pid: int) -> str | None:
    """Why `path` (lstat `st`) is not a probe socket a client of this user may connect to, or None if it is."""
    if not stat.S_ISSOCK(st.st_mode):
        kind = (
            "a symlink"
            if stat.S_ISLNK(st.st_mode)
            else "a directory"
            if stat.S_ISDIR(st.st_mode)
            else "a regular file"
            if stat.S_ISREG(st.st_mode)
            else "not a socket"
        )
        # Connecting follows a symlink: one planted at `<pid>.sock` would have a client send its hello to
        # whatever socket it names. An agent never makes anything but a socket there.
        return (
            f"{path} is {kind}, not a socket (an agent only ever binds a socket there); "
            f"remove it if you did not put it there: rm {shlex.quote(str(path))}"
        )
    if st.st_uid != os.getuid():
        fix = (
            f"its process {pid} has exited: remove it: rm {shlex.quote(str(path))}"
            if pid_alive(pid) is False
            else f"only uid {st.st_uid} can attach to it: run cp-inspect as that user"
        )
        return f"{path} is owned by uid {st.st_uid}, not by you (uid {os.getuid()}); {fix}"
    return None


def list_agents(
    runtime_dir: Path | None = None, timeout: float = 1.0, skipped: list[SkippedSocket] | None = None
) -> list[AgentInfo]:
    """Live agents serving a probe for this user, by pid. Removes stale sockets as it goes.

    A socket is stale when its pid is dead, when the process with its pid is not the one that made it
    (the start time recorded at bind differs: see runtime_dir), or when nothing listens on it (the
    server renames its socket into place only once listening, so a refused connection cannot be a
    server that is starting).
    An entry named like a socket that is not one, or not this user's, is neither connected to nor
    removed; `skipped`, if given, gets one SkippedSocket for each, saying why (`ps` prints them: it said
    only "no live agents" where `attach` explains the refusal).
    Raises PermissionDenied if the runtime directory is not safely ours.
    """
    # (Here, not at the top: engine.probe.client imports this module for its re-exports.)
    from engine.probe.client import ProbeClient

    d = resolve_runtime_dir(runtime_dir)
    if d is None:
        return []
    out: list[AgentInfo] = []
    for entry in sorted(d.iterdir(), key=lambda p: p.name):
        name = entry.name
        parsed = parse_target(name[: -len(SOCKET_SUFFIX)]) if name.endswith(SOCKET_SUFFIX) else None
        if parsed is None:
            continue
        pid, session = parsed
        try:
            st = os.lstat(entry)  # before the pid is looked at: see _remove_stale
        except OSError:
            continue
        refusal = _refusal(entry, st, pid)
        if refusal is not None:
            # Only a socket of ours, as attach checks: connecting follows a symlink, and one planted at
            # `<pid>.sock` had ps connect (and send its hello) to whatever socket it named.
            if skipped is not None:
                skipped.append(SkippedSocket(target_name(pid, session), entry, refusal))
            continue
        if pid_alive(pid) is False or same_process(st, pid) is False:
            _remove_stale(entry, st)
            continue
        try:
            client = ProbeClient.connect_path(entry, pid, timeout)
        except NotServing:
            _remove_stale(entry, st)
            continue
        except ProbeError as exc:
            out.append(
                AgentInfo(pid, _proc_cmdline(pid), None, None, None, entry, error=str(exc), session=session)
            )
            continue
        except OSError as exc:
            out.append(
                AgentInfo(pid, _proc_cmdline(pid), None, None, None, entry, error=str(exc), session=session)
            )
            continue
        with client:
            h = client.hello
        argv = h.get("argv")
        command = shlex.join(str(a) for a in argv) if isinstance(argv, list) else _proc_cmdline(pid)
        turns = h.get("turns")
        out.append(
            AgentInfo(
                pid=pid,
                command=command,
                model=_opt_str(h.get("model")),
                provider=_opt_str(h.get("provider")),
                turns=turns if isinstance(turns, int) else None,
                socket_path=entry,
                engine_version=_opt_str(h.get("engine_version")),
                tap_errors=te if isinstance(te := h.get("tap_errors"), int) else 0,
                session=session,
                client=_opt_str(h.get("client")) if isinstance(h.get("client"), str) else None,
                opening=h.get("opening") if isinstance(h.get("opening"), str) else None,
                client_pid=cp if type(cp := h.get("client_pid")) is int else None,
            )
        )
    return out


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


# The name an agent binds its probe socket under before renaming it into place (engine/probe/endpoint.py:
# `.<pid>.<6 hex>`); the kernel keeps the bound name, so /proc/net/unix shows it, not `<pid>.sock`.
_BOUND_NAME = re.compile(r"\.(\d+)\.[0-9a-f]{6}")
_ACCEPTCON = 0x10000  # /proc/net/unix Flags: a listening socket (__SO_ACCEPTCON)


def other_users_agents(
    runtime_dir: Path | None = None, table: Path = Path("/proc/net/unix")
) -> dict[int, int]:
    """How many probe sockets other users' agents serve, by uid (-1: a user /proc does not name), which
    `list_agents` cannot see: each user's sockets are in that user's private runtime directory.

    What this user may know honestly: /proc/net/unix (readable by anyone) lists every bound Unix socket
    of this network namespace with the name it was bound under, and a listening one whose name is the
    probe's bind name (`.<pid>.<hex>`, outside our runtime directory) is an agent's probe; whose it is,
    from its pid's /proc status (readable by anyone; with /proc mounted hidepid, kill(0) still says "not
    yours"). Its directory, command and turns stay unknown, and its probe would refuse us anyway (a
    server serves only its own real uid). Sockets in our own directory are list_agents' (skipped ones
    are said there). {} when /proc cannot say."""
    try:
        text = table.read_text(errors="replace")
    except OSError:
        return {}
    ours = runtime_dir if runtime_dir is not None else default_runtime_dir()
    me = os.getuid()
    seen: set[str] = set()
    out: dict[int, int] = {}
    for line in text.splitlines()[1:]:
        fields = line.split(None, 7)
        if len(fields) < 8:
            continue  # (an unbound socket: no path)
        try:
            flags, inode = int(fields[3], 16), fields[6]
        except ValueError:
            continue
        path = Path(fields[7])
        m = _BOUND_NAME.fullmatch(path.name)
        if not flags & _ACCEPTCON or m is None or inode in seen or path.parent == ours:
            continue
        seen.add(inode)
        pid = int(m.group(1))
        uid = process_uid(pid)
        if uid is None:
            if pid_alive(pid) is not None:
                continue  # gone, or ours
            uid = -1
        if uid != me:
            out[uid] = out.get(uid, 0) + 1
    return out
