"""The probe's socket file: binding `<runtime_dir>/<pid>.sock`, replacing a stale one, peer uids, closing.

Plain functions over sockets and paths; the server (`probe`) decides when to call them.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import stat
import struct
from pathlib import Path

from engine.probe.runtime_dir import (
    MAX_SOCKET_PATH,
    PermissionDenied,
    ProbeError,
    ensure_runtime_dir,
    record_start,
    same_process,
    socket_path,
)

log = logging.getLogger("contextpipe.probe")

_UCRED = struct.Struct("3i")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}


def bind_listener(
    pid: int, runtime_dir: Path | None, session: int | None = None
) -> tuple[socket.socket, Path, tuple[int, int]]:
    """A listening socket at `<pid>.sock` (or `<pid>.<session>.sock`), with its path and (st_dev, st_ino).
    Raises ProbeError/PermissionDenied."""
    d = ensure_runtime_dir(runtime_dir)
    path = socket_path(pid, d, session)
    tmp = d / f".{pid}.{secrets.token_hex(3)}"
    for p in (path, tmp):
        if len(os.fsencode(p)) > MAX_SOCKET_PATH:
            raise ProbeError(
                f"probe socket path {p} is longer than {MAX_SOCKET_PATH} bytes (a Unix socket limit); "
                "use a shorter runtime directory (XDG_RUNTIME_DIR)"
            )
    remove_stale(path, pid)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # Bind under a temporary name and rename into place once listening: a socket at <pid>.sock
        # then always accepts, so "connection refused" there reliably means stale.
        listener.bind(os.fsdecode(tmp))
        os.chmod(tmp, 0o600)
        if pid == os.getpid():  # (a server named for another pid, as tests make, records nothing)
            record_start(tmp)  # which process made it, for the stale checks (see runtime_dir)
        listener.listen(64)
        os.rename(tmp, path)
    except BaseException:
        listener.close()
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    st = os.stat(path)
    listener.setblocking(False)
    return listener, path, (st.st_dev, st.st_ino)


def remove_stale(path: Path, pid: int) -> None:
    """Remove a socket left at `path` by a dead process; refuse anything else that is there."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ProbeError(f"{path} exists and is not a socket; remove it to let the probe start")
    if st.st_uid != os.getuid():
        raise PermissionDenied(f"probe socket {path} is owned by uid {st.st_uid}; refusing to replace it")
    if same_process(st, pid) is False:
        # An earlier process with our pid made it. Not asked whether it listens: a child it forked may
        # still hold its listener open (accepting into a backlog nobody reads), and the refusal below
        # kept this agent from serving at all.
        log.info("removing stale probe socket %s (left by an earlier process with pid %d)", path, pid)
        unlink_if_ours(path, (st.st_dev, st.st_ino))
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(os.fsdecode(path))
    except (ConnectionRefusedError, FileNotFoundError):
        # Nobody listens: a previous process with our pid died without cleaning up.
        log.info("removing stale probe socket %s", path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    except OSError:
        pass  # unknown state: fall through and refuse rather than steal a live socket
    finally:
        probe.close()
    raise ProbeError(f"a probe is already serving at {path} (is a second ProbeServer running in pid {pid}?)")


def unlink_if_ours(path: Path, inode: tuple[int, int]) -> None:
    """Unlink `path` only if it is still the socket file we created (same device and inode)."""
    try:
        st = os.stat(path)
        if (st.st_dev, st.st_ino) == inode:
            os.unlink(path)
    except OSError:
        pass


def peer_uid(sock: socket.socket) -> int:
    """The connecting process's uid (SO_PEERCRED), or -1 when the kernel will not say."""
    try:
        _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    except OSError:
        return -1
    return int(uid)


def close_quietly(sock: socket.socket, reads: int = 4) -> None:
    # Read what the peer already sent first: closing a Unix socket with unread input makes the peer's
    # next read fail with ECONNRESET, which could hide the error frame we just sent it.
    try:
        sock.setblocking(False)
        for _ in range(reads):  # bounded: a client that keeps sending is cut off anyway
            if not sock.recv(65536):
                break
    except OSError:
        pass  # EAGAIN (nothing left) or the peer is already gone
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
