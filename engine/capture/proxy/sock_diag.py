"""The inode of one TCP socket, found by its addresses, asked of the kernel (NETLINK_SOCK_DIAG).

peer.py needs the inode of the client's end of a connection to the proxy. /proc/net/tcp and tcp6 hold it,
but reading either walks the kernel's whole connection hash table however few connections there are: 4.6
ms of CPU a table on this project's host with five connections open, ~9 ms a look-up for the pair. The
sock_diag exact look-up (what `ss` uses) finds the one socket by its four-tuple: 12-20 us, unprivileged.
Linux only; where netlink is refused (a seccomp profile, a kernel without inet_diag) `Unavailable` is
raised and the caller reads the tables.
"""

from __future__ import annotations

import errno
import socket
import struct

from engine.errors import ContextPipeError

Address = tuple[str, int]

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NOCOOKIE = 0xFFFFFFFF
ALL_STATES = 0xFFFFFFFF
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
# inet_diag_msg after the header: family, state, timer, retrans (4 bytes), inet_diag_sockid (48),
# expires, rqueue, wqueue (12), then uid and inode.
_UID_INODE = struct.Struct("=II")
_UID_INODE_AT = _HEADER.size + 4 + 48 + 12


class Unavailable(ContextPipeError):
    """The kernel's socket diagnostics cannot be asked here: read /proc/net/tcp instead."""


def _request(family: int, local: bytes, local_port: int, remote: bytes, remote_port: int) -> bytes:
    """An inet_diag_req_v2 for the TCP socket bound to `local` and connected to `remote` (addresses in
    network order, padded to 16 bytes), in its netlink message."""
    body = (
        struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, ALL_STATES)
        + struct.pack(">HH", local_port, remote_port)
        + local.ljust(16, b"\0")
        + remote.ljust(16, b"\0")
        + struct.pack("=III", 0, NOCOOKIE, NOCOOKIE)  # any interface; no cookie to check
    )
    return _HEADER.pack(_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + body


def tcp_inode(family: int, local: Address, remote: Address) -> int | None:
    """The inode of the TCP socket of `family` (AF_INET or AF_INET6) whose local address is `local` and
    remote address `remote`; None if there is none, or its inode is 0 (TIME_WAIT: no process holds it).
    Raises Unavailable when netlink cannot be asked."""
    try:
        packed_local = socket.inet_pton(family, local[0].split("%", 1)[0])
        packed_remote = socket.inet_pton(family, remote[0].split("%", 1)[0])
    except OSError:
        return None  # not an address of this family
    try:
        nl = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    except (OSError, AttributeError) as exc:  # not Linux, or refused
        raise Unavailable(str(exc)) from exc
    try:
        nl.settimeout(1.0)
        nl.sendto(_request(family, packed_local, local[1], packed_remote, remote[1]), (0, 0))
        reply = nl.recv(65536)
    except OSError as exc:
        raise Unavailable(str(exc)) from exc
    finally:
        nl.close()
    if len(reply) < _HEADER.size:
        raise Unavailable("a short netlink reply")
    kind = _HEADER.unpack_from(reply)[1]
    if kind == NLMSG_ERROR:
        code = -struct.unpack_from("=i", reply, _HEADER.size)[0]
        if code == errno.ENOENT:
            return None  # no such socket: closed, or not on this host
        raise Unavailable(errno.errorcode.get(code, str(code)))
    if kind != SOCK_DIAG_BY_FAMILY or len(reply) < _UID_INODE_AT + _UID_INODE.size:
        raise Unavailable(f"an unexpected netlink reply (type {kind})")
    inode = _UID_INODE.unpack_from(reply, _UID_INODE_AT)[1]
    return inode or None
