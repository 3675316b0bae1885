"""The look-up of who makes a proxy call, made cheap (engine/capture/proxy/sock_diag.py, holders.py): the
client socket's inode asked of the kernel by its four-tuple, not read from /proc/net/tcp (whose every read
walks the kernel's whole connection table: ~4.6 ms CPU a table here), and its holder found through an
index of every process's descriptors that reads again only those that can be a new connection's. Real
sockets and real client processes; the answers must be the full scan's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from engine.capture.proxy import peer, sock_diag
from engine.capture.proxy.holders import SocketHolders

# A client process: on each line read, opens what the line says (a file, or a connection to the port) and
# prints the descriptor's number; "close N" closes descriptor N.
CLIENT = """
import os, socket, sys
port = int(sys.argv[1])
held = {}
for line in sys.stdin:
    what = line.split()
    if what[0] == "connect":
        s = socket.create_connection(("127.0.0.1", port)); held[s.fileno()] = s; print(s.fileno(), flush=True)
    elif what[0] == "file":
        f = open(sys.argv[0] if sys.argv[0] != "-c" else os.devnull); held[f.fileno()] = f
        print(f.fileno(), flush=True)
    elif what[0] == "close":
        held.pop(int(what[1])).close(); print("closed", flush=True)
"""


@contextmanager
def _server() -> Iterator[socket.socket]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    try:
        yield srv
    finally:
        srv.close()


@contextmanager
def _client(port: int) -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def _say(child: subprocess.Popen[str], line: str) -> str:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(line + "\n")
    child.stdin.flush()
    return child.stdout.readline().strip()


def test_without_netlink_the_tables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_: object) -> int | None:
        raise sock_diag.Unavailable("refused here")

    monkeypatch.setattr(peer, "tcp_inode", refused)
    with _server() as srv:
        c = socket.create_connection(("127.0.0.1", srv.getsockname()[1]))
        conn, addr = srv.accept()
        assert peer.socket_inode(addr[:2], conn.getsockname()[:2]) == os.fstat(c.fileno()).st_ino
        c.close()
        conn.close()


def test_the_holder_is_found_and_the_index_reads_only_what_changed() -> None:
    with _server() as srv, _client(srv.getsockname()[1]) as child:
        _say(child, "connect")
        conn, addr = srv.accept()
        inode = peer.socket_inode(addr[:2], conn.getsockname()[:2])
        assert inode is not None
        index = SocketHolders()
        assert index.find(inode, skip=os.getpid()) == child.pid  # a cold index: the newest process first
        index.index_all(skip=os.getpid())  # as the proxy does when it starts listening
        every = index.reads
        _say(child, "connect")  # a new connection from a process the index has read
        conn2, addr2 = srv.accept()
        inode2 = peer.socket_inode(addr2[:2], conn2.getsockname()[:2])
        assert inode2 is not None and inode2 != inode
        index.reads = 0
        assert index.find(inode2, skip=os.getpid()) == child.pid
        # Only the new descriptor and the sockets are read again, not every library, pipe and file.
        assert index.reads < every / 3, (index.reads, every)
        full = SocketHolders()  # the full scan's answer is the same
        full.reads = 0
        assert full.find(inode2, skip=os.getpid()) == child.pid
        conn.close()
        conn2.close()


def test_a_descriptor_number_reused_for_the_socket_is_still_found() -> None:
    """The index read descriptor N as a file; the client closed it and its connection took the number:
    a look-up that trusted the index would not find it."""
    with _server() as srv, _client(srv.getsockname()[1]) as child:
        fd = _say(child, "file")
        index = SocketHolders()
        index.index_all(skip=os.getpid())
        assert not index._links[child.pid][fd].startswith("socket:")
        assert _say(child, f"close {fd}") == "closed"
        assert _say(child, "connect") == fd  # the lowest free number: the file's
        conn, addr = srv.accept()
        inode = peer.socket_inode(addr[:2], conn.getsockname()[:2])
        assert inode is not None
        assert index.find(inode, skip=os.getpid()) == child.pid
        conn.close()


def test_a_socket_nobody_holds_is_none_and_gone_processes_leave_the_index() -> None:
    with _server() as srv, _client(srv.getsockname()[1]) as child:
        index = SocketHolders()
        index.index_all()
        assert child.pid in index._links
        child.kill()
        child.wait()
        assert index.find(2**31 - 1, first=[child.pid]) is None
        assert child.pid not in index._links
