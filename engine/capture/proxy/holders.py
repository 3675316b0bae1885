"""Which process holds a socket: the proxy's index of every process's descriptors, kept between look-ups.

The only way to the holder of a socket inode is each process's /proc/PID/fd, one readlink a descriptor
(~5 us quiet, ~30 us at load: 2.3-2.6 ms CPU for the ~500 descriptors of this project's small host, tens
of ms on a desktop with a browser). A proxy looks up every new connection's client, and most descriptors
do not change between two look-ups: a library, a log, a pipe stays what it was. So the index keeps what
each descriptor was last read as and a look-up reads again only those that can be the new socket:

1. the processes most likely to hold it, read whole: `first` (the clients found last), then processes
   the index has not read yet (started since, most often the client of a first call), newest first;
2. in every other process, the descriptors it did not have at the last read and those that were
   sockets (a connection's descriptor is a socket's, or new): one listdir a process;
3. only if none holds it, the descriptors read before as something else, in case one was closed and
   its number reused for the socket since.

A descriptor is only ever said to hold the socket from a fresh readlink, so the answer is the one a full
scan gives; the index only orders the reads. Other users' processes cannot be read (skipped); a process
gone leaves the index at the next look-up. Not thread-safe: one look-up at a time (peer.py's one thread).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

SOCKET_PREFIX = "socket:["


class SocketHolders:
    """The index of /proc/PID/fd link targets, and look-ups of a socket's holder through it."""

    def __init__(self, proc: str = "/proc") -> None:
        self.proc = proc
        self._links: dict[int, dict[str, str]] = {}  # pid -> descriptor -> link target, as last read
        self.reads = 0  # readlinks made (what the index saves; the tests count them)

    def find(self, inode: int, skip: int | None = None, first: Sequence[int] = ()) -> int | None:
        """The pid of a process with a descriptor on socket `inode`, None if none is found (or only
        `skip`'s, looked into last: the proxy itself holds the most descriptors)."""
        target = f"{SOCKET_PREFIX}{inode}]"
        # The clients found last first, before /proc is even listed (~70 us of the ~130 a look-up takes).
        known = [p for p in dict.fromkeys(first) if p != skip]
        for pid in known:
            if self._read(pid, target, {}) is not None:
                return pid
        try:
            pids = sorted((int(p) for p in os.listdir(self.proc) if p.isdigit()), reverse=True)
        except OSError:
            return None
        alive = set(pids)
        for gone in [p for p in self._links if p not in alive]:
            del self._links[gone]
        whole = [p for p in pids if p not in self._links and p != skip]
        for pid in whole:
            if self._read(pid, target, {}) is not None:
                return pid
        whole += known
        chosen = set(whole)
        rest = [p for p in pids if p not in chosen and p != skip]
        deferred: list[tuple[int, list[str]]] = []
        for pid in rest:
            stale: list[str] = []
            if self._read(pid, target, self._links.get(pid, {}), stale) is not None:
                return pid
            if stale:
                deferred.append((pid, stale))
        for pid, fds in deferred:
            if self._reread(pid, target, fds):
                return pid
        if skip is not None and skip in alive and self._read(skip, target, {}) is not None:
            return skip
        return None

    def index_all(self, skip: int | None = None) -> None:
        """Read every process's descriptors (but `skip`'s) into the index."""
        try:
            pids = [int(p) for p in os.listdir(self.proc) if p.isdigit()]
        except OSError:
            return
        for pid in pids:
            if pid != skip:
                self._read(pid, "", {})

    def _read(
        self, pid: int, target: str, before: dict[str, str], stale: list[str] | None = None
    ) -> str | None:
        """List `pid`'s descriptors and read those not in `before` or read as sockets there (all of them
        when `stale` is None); the others are kept as they were and named in `stale`. Returns the
        descriptor holding `target`, if one does."""
        fd_dir = f"{self.proc}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # another user's (kept as read, with nothing: not new at the next look-up), or gone
            self._links[pid] = {}
            return None
        links: dict[str, str] = {}
        self._links[pid] = links
        for fd in fds:
            was = before.get(fd)
            if stale is not None and was is not None and not was.startswith(SOCKET_PREFIX):
                links[fd] = was
                stale.append(fd)
                continue
            try:
                link = os.readlink(f"{fd_dir}/{fd}")
            except OSError:  # closed since the listing
                continue
            self.reads += 1
            links[fd] = link
            if link == target:
                return fd
        return None

    def _reread(self, pid: int, target: str, fds: list[str]) -> bool:
        """Read again descriptors of `pid` kept from an earlier read (their number may be reused)."""
        links = self._links.get(pid)
        if links is None:
            return False
        for fd in fds:
            try:
                link = os.readlink(f"{self.proc}/{pid}/fd/{fd}")
            except OSError:
                links.pop(fd, None)
                continue
            self.reads += 1
            links[fd] = link
            if link == target:
                return True
        return False
