"""Which local process is on the other end of a connection to the proxy: what `ps` and `top` show a
conversation as, instead of the proxy's own command line.

A local client's socket is in /proc/net/tcp (or tcp6) with the client's address as its local address and
the proxy's as its remote one; its inode names it, and the process holding a descriptor on
"socket:[inode]" is the client. Only this user's processes can be looked into (/proc/PID/fd of another
user's is refused), and a connection already closed is gone from the table: then the answer is None, said
as "unknown" by the caller, never a guess. Linux only; elsewhere None.
"""

from __future__ import annotations

import os
import shlex
import socket
import struct
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from engine.capture.proxy.holders import SocketHolders
from engine.capture.proxy.sock_diag import Unavailable, tcp_inode

Address = tuple[str, int]


@dataclass(frozen=True)
class PeerProcess:
    """A local process found at the other end of a connection: its pid and its command line."""

    pid: int
    argv: list[str]

    @property
    def command(self) -> str:
        return shlex.join(self.argv)


def _hex_address(host: str, port: int) -> str | None:
    """`host:port` as /proc/net/tcp{,6} prints it: the address's 32-bit words in host byte order."""
    try:
        if ":" in host:
            packed = socket.inet_pton(socket.AF_INET6, host.split("%", 1)[0])
        else:
            packed = socket.inet_aton(host)
    except OSError:
        return None
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


def _forms(host: str) -> tuple[str, str]:
    """`host` and its other form: an IPv4 client of a proxy listening on :: is ::ffff:a.b.c.d to the
    proxy and a.b.c.d in the client's own socket (and the other way round)."""
    if host.lower().startswith("::ffff:") and "." in host:
        return host, host[7:]
    return host, (host if ":" in host else f"::ffff:{host}")


def socket_inode(client: Address, server: Address, proc: str = "/proc") -> int | None:
    """The inode of the socket whose local address is `client` and remote address is `server` (the
    client's end of a connection to the proxy), or None if there is none. Asked of the kernel by the
    four-tuple (sock_diag.py: ~15 us) where it can be; else, or for another `proc`, from /proc/net/tcp
    and tcp6, whose every read walks the kernel's whole connection table (~4.6 ms of CPU a table here)."""
    if proc == "/proc":
        try:
            return _diag_inode(client, server)
        except Unavailable:
            pass
    return _table_inode(client, server, proc)


def _diag_inode(client: Address, server: Address) -> int | None:
    """socket_inode by sock_diag: each form of the addresses (an IPv4 client of a proxy on :: is an AF_INET
    socket on its side) in its family."""
    for c_host, s_host in zip(_forms(client[0]), _forms(server[0]), strict=True):
        family = socket.AF_INET6 if ":" in c_host else socket.AF_INET
        inode = tcp_inode(family, (c_host, client[1]), (s_host, server[1]))
        if inode is not None:
            return inode
    return None


def _table_inode(client: Address, server: Address, proc: str) -> int | None:
    wanted: set[tuple[str, str]] = set()
    for c_host, s_host in zip(_forms(client[0]), _forms(server[0]), strict=True):
        local, remote = _hex_address(c_host, client[1]), _hex_address(s_host, server[1])
        if local is not None and remote is not None:
            wanted.add((local, remote))
    for table in ("tcp", "tcp6"):
        try:
            with open(f"{proc}/net/{table}") as f:
                next(f, None)  # the header
                for line in f:
                    fields = line.split()
                    if len(fields) > 9 and (fields[1], fields[2]) in wanted:
                        inode = int(fields[9])
                        return inode or None  # 0: a socket in TIME_WAIT, held by no process
        except (OSError, ValueError):
            continue
    return None


def argv_of(pid: int, proc: str = "/proc") -> list[str] | None:
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    parts = [p.decode("utf-8", "replace") for p in raw.split(b"\0") if p]
    return parts or None


# One look-up per connection, started when its first recorded request arrives (before its body is read):
# the agent waits for the answer with the connection open, so its socket is still in the tables (a client
# that sends one call and closes, looked up later by the recorder's thread, was gone by then: "unknown").
# On a thread of its own (descriptors read through the index: ~0.5 ms here, more on a host with many
# processes at load), never the proxy's event loop. Keyed by the
# connection's transport, held weakly: a closed connection's entry goes with it.
_POOL: ThreadPoolExecutor | None = None
_BY_CONNECTION: weakref.WeakKeyDictionary[Any, Future[PeerProcess | None]] = weakref.WeakKeyDictionary()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="contextpipe-peer")
    return _POOL


def warm() -> None:
    """Read every process's descriptors into the index, in the background (the proxy does when it starts
    listening): the first connection's look-up then reads only what changed since, not all of them."""
    if os.path.isdir("/proc/self/fd"):
        _pool().submit(_index_all)


def _index_all() -> None:
    with _HOLDERS_LOCK:
        _HOLDERS.index_all(skip=os.getpid())


def look_up(connection: Any, client: Address | None, server: Address | None) -> Future[PeerProcess | None]:
    """The peer of `connection` (its transport), looked up once per connection in the background."""
    found = _BY_CONNECTION.get(connection)
    if found is None:
        found = _pool().submit(peer_process, client, server)
        try:
            _BY_CONNECTION[connection] = found
        except TypeError:  # not weakly referable: looked up for this request alone
            pass
    return found


# The descriptors of every process as last read, kept for the proxy's life (holders.py): a look-up reads
# again only those that can be a new connection's (~0.5 ms against 2.3-2.6 ms for all of them here).
_HOLDERS = SocketHolders()
_HOLDERS_LOCK = threading.Lock()
_RECENT: list[int] = []  # the pids found last, newest first: an agent's next connection is most often theirs
RECENT_MAX = 16
_RECENT_LOCK = threading.Lock()


def peer_process(client: Address | None, server: Address | None, proc: str = "/proc") -> PeerProcess | None:
    """The local process that holds the client's end of the connection from `client` to `server` (the
    proxy's address), or None when it cannot be known (not local, closed, another user's, not Linux)."""
    if client is None or server is None or not os.path.isdir(f"{proc}/net"):
        return None
    inode = socket_inode((str(client[0]), int(client[1])), (str(server[0]), int(server[1])), proc)
    if inode is None:
        return None
    with _RECENT_LOCK:
        recent = tuple(_RECENT)
    if proc == "/proc":
        with _HOLDERS_LOCK:  # (the look-up thread's, and the recorder's for a call it was not started for)
            pid = _HOLDERS.find(inode, skip=os.getpid(), first=recent)
    else:
        pid = SocketHolders(proc).find(inode, first=recent)
    if pid is None:
        return None
    argv = argv_of(pid, proc)
    if not argv:
        return None
    with _RECENT_LOCK:  # (the look-up thread and the recorder's)
        if pid in _RECENT:
            _RECENT.remove(pid)
        _RECENT.insert(0, pid)
        del _RECENT[RECENT_MAX:]
    return PeerProcess(pid, argv)
