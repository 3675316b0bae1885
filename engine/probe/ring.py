"""A shared-memory ring for a polling client's live stream: the agent writes, the client maps it read-only.

A client that polls on its own timer (see `poll`) still cost the agent one send() a turn, the
turn's batch copied into the socket: on a shared VM, right after the agent's model call, that
syscall alone cost its thread ~20-30 us of a 1.5-2 ms turn (BENCHMARKS.md, "Probe overhead on a
realistic turn"). So a quiet elided client (see `elide`) that says `"ring": true` in its hello is
given a ring instead: once its snapshot is in the socket, the agent sends one `{"k": "ring", "size":
N}` frame with a memfd attached (SCM_RIGHTS), and from then on every live frame for that client (the
same bytes it would have sent) is copied into the ring, not sent. The socket still carries what the
client asked for (snapshot, fetch answers), pongs, errors and what a closing agent sends. A client
that does not ask, or an agent from before this, uses the socket alone as before.

Layout: a RING_HEADER-byte header, then `size` bytes of data. The header holds RING_MAGIC and the
total number of bytes ever written (u64 at WRITTEN_AT); byte `w` of the stream is at data offset
`w % size`. The writer copies a flush's frames (whole frames only) into the data, then stores the new
total: a reader that sees total `W` may read up to `W`, always at a frame boundary.

Safety for the agent, whatever the client does:
* The agent never reads the ring (it keeps its own count of what it wrote) and never waits on it: a
  client that writes into it, or stops reading, changes only what that client reads.
* The memfd is sealed against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW) before the client
  gets it: writing into a mapping of a file that someone truncated would kill the agent with SIGBUS,
  and a memfd has no path another process could replace. It is close-on-exec, and the agent closes
  its descriptor once the client has it (the mapping stays).

Safety for the client: it maps the ring read-only and takes it only if it is sealed against shrinking
(a peer that could truncate it would kill the reader with SIGBUS), checks its size and magic, and
treats a total that goes backwards or jumps more than `size` as lost bytes.

Checksums: a frame's crc32 guards bytes that crossed a socket or a file; the ring is memory the agent
writes and the reader maps, where a torn read is found by the total (read before and after copying),
not by a checksum. So a client that says `"ring_unchecked": true` in its hello (ProbeClient does) reads
its ring's frames without checking their crc32, and the agent's thread leaves it 0 in the batches it
encodes for that ring (computing it cold was ~10 us of a paced turn's ~65 on the agent's thread). The
frames a pass of the I/O thread writes, and a recording agent's own frames, keep theirs (encoded once
for every client); a client that does not ask gets checksums throughout, as before.

A reader that falls more than `size` bytes behind has lost frames (the writer went round): it sees
that from the total (before and after copying, since the writer may go round while it copies) and
starts again at the writer's current total, a frame boundary; the client reports it as `dropped`, as
it would events lost in the agent's own queue.

Held events: a quiet client is sent no frame that only says where the journal has reached, so events
the agent journals after its last frame (the reply and tool results while a turn's close is awaited)
wait in its queue, and the client learns of them only by asking for the journal's end, which wakes the
agent's I/O thread (~350 us of its CPU a turn). So the agent says in the header when it holds events
back (a ring frame with `"held": true`): at HELD_AT, a u64 count of events held so far and the u64
total written + 1 when the newest of them was held. The reader sees events held since the last frame
exactly when that total is the current one (a frame written since carried them), and asks only then,
once per count: an agent paced by its model journals nothing between a turn's close and its model's
answer, and no longer answers a useless ask. The count changes once a burst, not once an event: a held
event within MARK_GAP of the newest mark, with no frame since, leaves the mark as it is. Each store ran
cold after the model call or the tool run (the first of a burst ~10 us, each later one ~2-3 us: five a
paced turn, ~20 us, bench_probe --publish-split --split-reader fold; the page is not what is cold, the
code is: a private bytearray's first store of a burst costs the same), and the reader, which asks only
after it has seen the count stay put for backfill_idle, learns nothing more from the later ones.

Only a fold client's ring is marked (its ring frame says `"held": true`; others `false`, which a reader
takes as no marks, as from an agent before them). A client of the quiet elided stream is never spared an
ask by them: the request and the reply are elided kinds, held through every model call and tool run, so
after any quiet gap something is held, and it asks once a quiet period with or without marks. Marking
each of a paced turn's five held events, cold after the model call, cost the agent's thread ~15-30 us a
turn (bench_probe --publish-split; an in-process A/B, 0.5 s pace: 120 -> 88 us of publish a turn).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import sys

from engine.errors import ContextPipeError

RING_MAGIC = b"CPRING01"
RING_HEADER = 64  # a cache line: magic, then the total written
WRITTEN_AT = 8
# Ring data bytes: a turn on the quiet elided stream is ~0.5-3 KB (a summary, the newest turn whole),
# ~50 KB a second from an agent running turns back to back, and a polling client looks at least every
# POLL_MAX (0.1 s): seconds of slack. Populated when made (see RingWriter), so kept small.
RING_SIZE = 256 * 1024
_U64 = struct.Struct("<Q")
HELD_AT = 16  # events held (u64), then the total written + 1 when the newest was held (u64)
_HELD = struct.Struct("<QQ")
# Whether the held mark may be stored as two items of a native u64 view (RingWriter.held_q): its format
# is little-endian. After the model call the first mark of a turn ran cold, and struct.pack_into (the
# method call, its buffer export, the format's codes) cost the agent's thread ~7 us more than two item
# stores of a view made once (bench_probe --publish-split --split-reader fold: the request's publish
# 17.0 -> 10.1 us a turn; `--twin foldview`). The reader sees either as one 16-byte record: a look
# between the two stores finds the total of the mark before, i.e. no held events or the old count
# (the reader asks once per count), as a torn pack_into would. The written total after each frame is
# stored the same way (RingWriter.written_q): one u64 item store.
_NATIVE_LE = sys.byteorder == "little" and struct.calcsize("Q") == 8
# A held event within MARK_GAP seconds of the ring's newest mark, with no frame written since, is not
# marked again (see "Held events"). A reader asks only after backfill_idle of quiet from when it saw the
# count change, so such an event was journaled before any ask that mark can prompt, and the answer (read
# from the journal) holds it. Under the reader's own resolution: it looks at the count at most every
# engine.probe.poll.POLL_MIN (16 ms), so the quiet it measures moves by less than it can tell.
MARK_GAP = 0.01
# No shrinking (SIGBUS for the writer), no growing, and no further seals (F_SEAL_WRITE cannot be added
# anyway while the agent's writable mapping exists; F_SEAL_SEAL closes the question).
_SEALS = (fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL) if hasattr(fcntl, "F_ADD_SEALS") else 0


def rings_supported() -> bool:
    """memfd_create and file seals (Linux): without them the agent offers no ring."""
    return hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS")


class RingWriter:
    """The agent's side: create the sealed memfd and write frames into it. `fd` is for handing to the
    client once (then `release_fd()`)."""

    # (marked, marked_at: the total + 1 the newest held mark says, and when it was stored: see
    # MARK_GAP, on the agent's thread only. held_q, written_q: the header's held record as two native
    # u64 items and its written total as one, or None (see _NATIVE_LE); released before the mapping
    # closes.)
    __slots__ = ("size", "fd", "_mm", "_view", "_written", "_room", "marked", "marked_at", "held_q", "written_q")

    def __init__(self, size: int | None = None) -> None:
        size = RING_SIZE if size is None else size
        flags = getattr(os, "MFD_CLOEXEC", 1) | getattr(os, "MFD_ALLOW_SEALING", 2)
        fd = os.memfd_create("contextpipe-probe-ring", flags)
        try:
            os.ftruncate(fd, RING_HEADER + size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            # Populated now (the I/O thread, once per client): a write that first touches a page of a
            # memfd takes a page fault, on the agent's thread, for every new page until the ring wraps.
            mm = mmap.mmap(
                fd,
                RING_HEADER + size,
                mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                mmap.PROT_READ | mmap.PROT_WRITE,
            )
        except BaseException:
            os.close(fd)
            raise
        mm[:8] = RING_MAGIC
        self.size = size
        self.fd: int | None = fd
        self._mm = mm
        self._view = memoryview(mm)
        self.held_q = self._view[HELD_AT : HELD_AT + _HELD.size].cast("Q") if _NATIVE_LE else None
        self.written_q = self._view[WRITTEN_AT : WRITTEN_AT + _U64.size].cast("Q") if _NATIVE_LE else None
        self._written = 0
        self.marked = 0
        self.marked_at = 0.0
        mm.seek(RING_HEADER)
        self._room = size  # bytes from the position to the end of the data

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Copy whole frames into the ring and publish the new total. Never blocks, never reads the ring."""
        n = len(data)
        if n < self._room:
            self._mm.write(data)  # one C call: the mapping's position is where the next byte goes
            self._room -= n
            self._written += n
        else:
            self._wrap(data)
        q = self.written_q
        if q is None:
            _U64.pack_into(self._mm, WRITTEN_AT, self._written)
        else:
            q[0] = self._written

    def write_frame(self, header: bytes, payload: bytes) -> None:
        """`write(header + payload)` without joining them first (a turn's frame is a few KB)."""
        n = len(header) + len(payload)
        mm = self._mm
        if n < self._room:
            mm.write(header)
            mm.write(payload)
            self._room -= n
            self._written += n
        else:
            self._wrap(header)
            self._wrap(payload)
        q = self.written_q  # (see _NATIVE_LE: the total stored as the held mark is)
        if q is None:
            _U64.pack_into(mm, WRITTEN_AT, self._written)
        else:
            q[0] = self._written

    def _wrap(self, data: bytes | bytearray | memoryview) -> None:
        """Copy `data` in across the end of the ring (the rare case), leaving the position after it."""
        src = memoryview(data)
        size = self.size
        if len(src) > size:  # more than the ring holds: only the newest `size` bytes could be read anyway
            self._written += len(src) - size
            src = src[len(src) - size :]
        pos = self._written % size
        first = min(len(src), size - pos)
        view = self._view
        view[RING_HEADER + pos : RING_HEADER + pos + first] = src[:first]
        if first < len(src):
            view[RING_HEADER : RING_HEADER + len(src) - first] = src[first:]
        self._written += len(src)
        pos = self._written % size
        self._mm.seek(RING_HEADER + pos)
        self._room = size - pos

    @property
    def written(self) -> int:
        return self._written

    def mark_held(self, held: int) -> None:
        """Say that `held` events have been held back so far, the newest after what is written now (see
        "Held events"). Two u64 stores (`held_q`; struct.pack_into where the view is not the format's
        byte order). publish() makes the same stores in line."""
        try:
            q = self.held_q
            if q is None:
                _HELD.pack_into(self._mm, HELD_AT, held, self._written + 1)
            else:
                q[0] = held
                q[1] = self._written + 1
        except ValueError:
            pass  # the I/O thread closed it (the client left) since publish() read the ring list

    def release_fd(self) -> None:
        """The client has its descriptor (or will never get it): the agent keeps only the mapping."""
        fd, self.fd = self.fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        self.release_fd()
        try:
            for q in (self.held_q, self.written_q):
                if q is not None:
                    q.release()
            self._view.release()
            self._mm.close()
        except (BufferError, ValueError):
            pass  # a fill holding a view of it (only on the same thread: never at this point)


class RingOverrun(ContextPipeError):
    """The writer went round past what this reader had read: `lost` bytes (at least) are gone."""

    def __init__(self, lost: int) -> None:
        super().__init__(f"the probe ring was overwritten: {lost} bytes lost")
        self.lost = lost


class RingReader:
    """The client's side: map the agent's memfd read-only and take what was written since the last look."""

    __slots__ = ("size", "_mm", "_read")

    def __init__(self, fd: int, size: int) -> None:
        st = os.fstat(fd)
        if type(size) is not int or size <= 0 or st.st_size != RING_HEADER + size:
            raise ValueError(
                f"the probe ring is {st.st_size} bytes, not the {RING_HEADER} + {size} announced"
            )
        if rings_supported():
            # A ring the agent could still shrink would kill this process with SIGBUS the moment it
            # read a page past the new end: take only one sealed as RingWriter seals it.
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
            if not seals & fcntl.F_SEAL_SHRINK:
                raise ValueError("the probe ring is not sealed against shrinking")
        mm = mmap.mmap(fd, RING_HEADER + size, mmap.MAP_SHARED, mmap.PROT_READ)
        if mm[:8] != RING_MAGIC:
            mm.close()
            raise ValueError("not a probe ring (bad magic)")
        self.size = size
        self._mm = mm
        self._read = 0

    def written(self) -> int:
        return int(_U64.unpack_from(self._mm, WRITTEN_AT)[0])

    def held(self) -> int:
        """How many events the agent had held back when it held the newest, if no frame has been written
        since it did (it waits in the agent's queue: ask for the journal's end), else 0 (see "Held
        events")."""
        held, since = _HELD.unpack_from(self._mm, HELD_AT)
        return int(held) if since and since - 1 == self.written() else 0

    def take(self) -> bytes:
        """The bytes written since the last call (b"" if none). Raises RingOverrun, after moving on to the
        writer's current total (a frame boundary), if the writer went round past them."""
        mm = self._mm
        size = self.size
        r = self._read
        w = self.written()
        if w == r:
            return b""
        if w < r or w - r > size:
            self._read = w
            raise RingOverrun(w - r if w > r else 0)
        pos = r % size
        n = w - r
        first = min(n, size - pos)
        data = mm[RING_HEADER + pos : RING_HEADER + pos + first]
        if first < n:
            data += mm[RING_HEADER : RING_HEADER + n - first]
        # The writer may have gone round while we copied: then part of it is newer bytes.
        w2 = self.written()
        if w2 - r > size:
            self._read = w2
            raise RingOverrun(w2 - r)
        self._read = w
        return data

    def close(self) -> None:
        try:
            self._mm.close()
        except (BufferError, ValueError):
            pass
