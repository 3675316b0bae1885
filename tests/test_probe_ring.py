"""A polling, quiet elided client reads its live frames from a shared-memory ring (engine.probe.ring).

Real agents (Pipelines with their probe), real Unix sockets, real memfds passed with SCM_RIGHTS and
mapped by both sides. A paced agent's turns then make no send() at all (nothing reaches the client's
socket: the kernel says it is not readable) while the client gets every event at its journal position;
a client that lets the ring go round is told `dropped` and goes on at the writer's place; a client
that scribbles on the ring, or tries to shrink, grow or seal it, cannot break the agent; a client
that does not ask, or an agent that offers no ring, uses the socket as before.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.probe import handshake, ring
from engine.probe.agent_limits import AGENT_WINDOW
from engine.probe.client import ProbeClient
from engine.probe.elide import ELIDED_KINDS
from engine.probe.ring import RING_HEADER, RING_MAGIC, RingOverrun, RingReader, RingWriter, rings_supported
from engine.recording.frames import decode_frames, encode_frame
from tests.support.probe_agent import connect, one_turn, probe_asleep, serving_pipeline, settle, wait_for

T = 10.0

pytestmark = pytest.mark.skipif(
    not ring.rings_supported(), reason="needs memfd_create and file seals (Linux)"
)


def _kept(journal: list[dict[str, Any]], start: int) -> list[tuple[dict[str, Any], int]]:
    return [(e, i) for i, e in enumerate(journal) if i >= start and e["k"] not in ELIDED_KINDS]


def _recv_n(c: ProbeClient, n: int) -> list[tuple[dict[str, Any] | None, int | None]]:
    out = []
    deadline = time.monotonic() + T
    while len(out) < n and time.monotonic() < deadline:
        ev, at = c.recv_at(0.2)
        if ev is not None:
            out.append((ev, at))
    return out


def _readable(c: ProbeClient) -> bool:
    return bool(select.select([c.fileno()], [], [], 0)[0])


def _wait_ring(c: ProbeClient) -> None:
    """The ring frame comes after the snapshot; a recv that finds nothing else takes it."""
    wait_for(lambda: c.recv(0.01) is None and c.ring, "the agent did not hand over a ring")


@pytest.mark.parametrize("record", [False, True])
def test_a_paced_turn_makes_no_send_with_a_ring_client_and_the_client_gets_every_event(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, record: bool
) -> None:
    """The inspector's way of reading (poll=True, quiet elided) takes the ring; a paced turn is then
    sent by the agent's own thread with no send() call (nothing arrives on the socket), where the same
    client on the socket (ring=False) costs one a turn. Both get the same events at the same positions,
    from a recording agent too (its turn goes as the frame its recorder encoded)."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000, **({"record": str(rtdir.parent / "run.cpsession")} if record else {})
    )
    probe = pipe.probe
    writes: dict[bool, int] = {}
    try:
        for use_ring in (False, True):
            c = connect(pipe, lean=True, elide=True, poll=True, ring=None if use_ring else False)
            settle(probe, 1)
            if use_ring:
                _wait_ring(c)
                # The pass that handed the ring over may leave a CPU-budget rest behind it: asleep again
                # before counting (a fresh-clone CI at load ~5 counted one pass more than before).
                settle(probe, 1)
            assert c.ring is use_ring
            n0 = len(pipe.journal.events)
            w0, s0, p0 = probe.agent_writes, probe.agent_sends, probe.wakeups
            got = []
            for t in range(5):
                one_turn(pipe, 10 * use_ring + t)
                time.sleep(AGENT_WINDOW)  # the model call
                if use_ring:
                    assert not _readable(c)  # nothing on the socket: the turn went to the ring
                got += _recv_n(c, 1)
            writes[use_ring] = probe.agent_writes - w0
            # The agent's thread sent every turn. Passes of the I/O thread's own may still fall in the window on a
            # loaded machine (a rest ending); a turn that woke it would wake it on every turn (five more).
            assert probe.agent_sends - s0 == 5 and probe.wakeups <= p0 + 2
            assert got == _kept(list(pipe.journal.events), n0)
            c.close()
            settle(probe, 0)
    finally:
        pipe.close()
    assert writes == {False: 5, True: 0}


@pytest.mark.parametrize("record", [False, True])
def test_a_ring_client_that_does_not_check_checksums_is_given_none_and_gets_every_event(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, record: bool
) -> None:
    """ProbeClient says in its hello that it reads its ring's frames unchecked (see ring, "Checksums"):
    a paced turn's batch, which the agent's thread encodes itself, then goes into the ring with a crc32
    field of 0 (computing it, cold, was ~10 us of the agent's ~65 a turn), and the client still gets
    every event at its journal position. A recording agent's turn goes as the frame its recorder
    encoded, checksum and all. A client from before this (its hello without the key) gets checksums
    on every frame, and reads the same events."""
    from tests.test_probe_unbracketed import older_client_hello, ring_frames

    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000, **({"record": str(rtdir.parent / "run.cpsession")} if record else {})
    )
    probe = pipe.probe
    try:
        for unchecked in (True, False):
            if not unchecked:
                older_client_hello(monkeypatch)
            c = connect(pipe, lean=True, elide=True, poll=True)
            settle(probe, 1)
            _wait_ring(c)
            (sc,) = probe._clients.values()
            assert sc.ring_unchecked is unchecked
            w0, n0, s0 = sc.ring.written, len(pipe.journal.events), probe.agent_sends
            got = []
            for t in range(4):
                one_turn(pipe, 10 * unchecked + t)
                time.sleep(AGENT_WINDOW)  # the model call
                got += _recv_n(c, 1)
            assert probe.agent_sends - s0 == 4  # each turn's batch written by the agent's own thread
            assert got == _kept(list(pipe.journal.events), n0)
            frames = ring_frames(bytes(sc.ring._mm[RING_HEADER + w0 : RING_HEADER + sc.ring.written]))
            batches = [(crc, p) for crc, p in frames if msgpack.unpackb(p)["k"] == "batch"]
            assert len(batches) == 4
            if unchecked and not record:
                # (The first turn after an attach goes by the general fill, past the snapshot's tail:
                # encoded as for any client, checksummed. The next ones by the short paths.)
                assert [crc for crc, _ in batches[1:]] == [0] * 3
            else:  # the recorder's frames (announced by empty batches), or a client that checks
                decode_frames(bytes(sc.ring._mm[RING_HEADER + w0 : RING_HEADER + sc.ring.written]))
            c.close()
            settle(probe, 0)
    finally:
        pipe.close()


def test_a_ring_client_reads_to_the_end_when_the_agent_closes(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """What the agent wrote to the ring before it closed is read before the client reports the end, and
    what a closing agent sends on the socket (the journal past what the client had) follows it."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    c = connect(pipe, lean=True, elide=True, poll=True)
    settle(pipe.probe, 1)
    _wait_ring(c)
    n0 = len(pipe.journal.events)
    for t in range(6):
        one_turn(pipe, t)
    pipe.close()
    journal = list(pipe.journal.events)
    live, ranges = [], []
    for ev in c.events():
        (ranges if ev["k"] == "journal" else live).append(ev)
    assert live == [e for e, _ in _kept(journal, n0)]
    fetched = [e for r in ranges for e in r["events"]]
    assert fetched and fetched[-1] == journal[-1]  # the rest of the journal, as before the ring


def test_a_client_that_lets_the_ring_go_round_is_told_dropped_and_goes_on(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """The agent never waits for a ring reader: one that looks too late finds its frames overwritten,
    gets `dropped` (the live source re-syncs on it) and then the events written after."""
    monkeypatch.setattr(ring, "RING_SIZE", 4096)
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        c = connect(pipe, lean=True, elide=True, poll=True)
        settle(probe, 1)
        _wait_ring(c)
        for t in range(12):  # a whole trace is ~1.5-3 KB: several times round a 4 KB ring, unread
            one_turn(pipe, t)
            time.sleep(AGENT_WINDOW)
        first = c.recv(T)
        assert first is not None and first["k"] == "dropped" and first["ring_overrun"] > 0
        assert c.dropped >= 1
        n0 = len(pipe.journal.events)
        one_turn(pipe, 99)
        got = _recv_n(c, 1)
        assert got == _kept(list(pipe.journal.events), n0)
        assert probe.client_count == 1 and probe.agent_writes == 0  # still the ring, never the socket
    finally:
        pipe.close()


def _raw_ring_client(path: Path) -> tuple[socket.socket, int, int]:
    """A client of our own making: the hello asking for the ring, then the socket read (with recvmsg)
    until the ring frame and its descriptor arrive. Returns the socket, the descriptor and the size."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(T)
    s.connect(str(path))
    s.sendall(
        encode_frame(
            {
                "k": "hello",
                "protocol": handshake.PROTOCOL_VERSION,
                "lean": True,
                "elide": True,
                "quiet": True,
                "ring": True,
            }
        )
    )
    buf, fds = b"", []
    deadline = time.monotonic() + T
    while time.monotonic() < deadline:
        data, got, _, _ = socket.recv_fds(s, 1 << 16, 4)
        fds += got
        buf += data
        frames, _ = decode_frames(buf)
        for f in frames:
            if f.get("k") == "ring":
                assert len(fds) == 1
                return s, fds[0], f["size"]
    raise AssertionError("no ring frame")


def test_a_hostile_client_cannot_break_the_agent_through_its_ring(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """The descriptor a client gets is the agent's memfd. Writing into it changes only what that client
    reads (the agent never reads the ring); shrinking it (which would kill the agent with SIGBUS on its
    next write), growing it and adding seals are refused by the kernel. The agent runs on, and another
    client on the same agent gets every event."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        hostile, fd, size = _raw_ring_client(probe.path)
        assert os.fstat(fd).st_size == RING_HEADER + size
        with pytest.raises(OSError) as shrink:
            os.ftruncate(fd, 0)
        assert shrink.value.errno == errno.EPERM
        with pytest.raises(OSError):
            os.ftruncate(fd, RING_HEADER + 2 * size)
        with pytest.raises(OSError):
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
        mm = mmap.mmap(fd, RING_HEADER + size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        honest = connect(pipe, lean=True, elide=True, poll=True)
        settle(probe, 2)
        n0 = len(pipe.journal.events)
        for t in range(4):
            mm[:] = b"\xff" * len(mm)  # the header's total and every byte of data, between turns
            one_turn(pipe, t)
            mm[8:16] = (2**64 - 1).to_bytes(8, "little")
            time.sleep(AGENT_WINDOW)
        assert _recv_n(honest, 4) == _kept(list(pipe.journal.events), n0)
        mm.close()
        hostile.close()
        assert probe.running and probe.publish_errors == 0
    finally:
        pipe.close()


def test_the_agent_survives_a_ring_client_that_is_killed_mid_stream(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """A real inspector process holding the ring mapped, killed while the agent runs turns: the agent
    drops the connection and frees the ring; nothing it does waits on the dead reader."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    reader = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from engine.probe.client import ProbeClient\n"
        "c = ProbeClient.connect(int(sys.argv[1]), timeout=10, runtime_dir=Path(sys.argv[2]), lean=True, elide=True, poll=True)\n"
        "while not c.ring:\n"
        "    c.recv(0.05)\n"
        "print('RING', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", reader, str(os.getpid()), str(probe.path.parent)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "RING"
        wait_for(lambda: probe._nrings == 1, "no ring")
        one_turn(pipe, 0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(T)
        for t in range(1, 4):
            one_turn(pipe, t)
            time.sleep(AGENT_WINDOW)
        wait_for(lambda: probe.client_count == 0 and probe._nrings == 0, "the dead reader was not dropped")
    finally:
        if proc.poll() is None:
            proc.kill()
        pipe.close()


def test_a_client_of_an_agent_that_offers_no_ring_reads_the_socket(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """An agent without rings (an older one, or no memfd here) never hands one over: the client's ask is
    ignored and it reads the socket as before."""
    monkeypatch.setattr(handshake, "rings_supported", lambda: False)
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        c = connect(pipe, lean=True, elide=True, poll=True)
        assert c.hello["ring"] is False
        settle(probe, 1)
        n0 = len(pipe.journal.events)
        one_turn(pipe, 0)
        assert _recv_n(c, 1) == _kept(list(pipe.journal.events), n0)
        assert not c.ring and probe.agent_writes == 1
    finally:
        pipe.close()


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(64, 512),
    ops=st.lists(st.one_of(st.integers(1, 700), st.just(0)), max_size=60),
)
def test_a_ring_reader_gets_the_bytes_written_in_order_or_knows_it_lost_some(
    size: int, ops: list[int]
) -> None:
    """Writes of whole chunks (a positive op: that many bytes, even ones as a header and payload) and
    looks (0) in any order: each look
    returns exactly the bytes written since the last one, or, when the writer went round past them,
    raises RingOverrun and the next look starts at a chunk written after it."""
    w = RingWriter(size)
    try:
        assert w.fd is not None
        r = RingReader(w.fd, size)
        w.release_fd()
        unread = b""
        lost = False
        counter = 0
        for op in ops + [0]:
            if op:
                chunk = bytes((counter + i) % 251 for i in range(op))
                counter += 1
                if op % 2:
                    w.write(chunk)
                else:  # a frame's header and payload, written as one
                    w.write_frame(chunk[: op // 3], chunk[op // 3 :])
                unread += chunk
                if len(unread) > size:
                    lost, unread = True, b""
                continue
            if lost:
                with pytest.raises(RingOverrun):
                    r.take()
                lost = False
                assert r.take() == b""
            else:
                assert r.take() == unread
            unread = b""
        r.close()
    finally:
        w.close()


def test_a_flush_after_the_last_client_left_has_nothing_left_to_send(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """An event that is not elided, published just before the last client leaves, is dropped with it:
    the next client's first paced turn is one flush that sends (the turn's), as every turn after it, not
    one more for what is gone."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        first = connect(pipe, lean=True, elide=True, poll=True)
        settle(probe, 1)
        probe.publish({"k": "note", "text": "outside a call"})
        first.close()
        settle(probe, 0)
        second = connect(pipe, lean=True, elide=True, poll=True)
        settle(probe, 1)
        _wait_ring(second)
        sends, wakeups = probe.agent_sends, probe.wakeups
        one_turn(pipe, 0)
        assert (probe.agent_sends - sends, probe.wakeups - wakeups) == (1, 0)
    finally:
        pipe.close()


def test_a_ring_that_could_shrink_under_the_reader_is_refused() -> None:
    # A peer that hands over a memfd it could still truncate could kill the reader with SIGBUS; the
    # reader takes only a ring sealed against shrinking, as the agent's own RingWriter makes it.
    if not rings_supported():
        pytest.skip("no memfd seals on this platform")
    size = 4096
    fd = os.memfd_create("unsealed", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, RING_HEADER + size)
        os.pwrite(fd, RING_MAGIC, 0)
        with pytest.raises(ValueError, match="not sealed against shrinking"):
            RingReader(fd, size)
    finally:
        os.close(fd)
    writer = RingWriter(size)
    try:
        assert writer.fd is not None
        reader = RingReader(writer.fd, size)  # the agent's own ring is accepted
        writer.write(b"abc")
        assert reader.take() == b"abc"
        reader.close()
    finally:
        writer.close()


def test_a_ring_whose_hand_over_finds_the_socket_full_is_handed_over_once_it_drains(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """The ring's frame goes on the socket right after the snapshot, which the client may not have read
    yet: its send then fails with EAGAIN. The agent offers it again once the socket takes more, not at
    "a later pass" that a paced agent never causes (its own thread sent the client's turns on the socket
    then, each a send(), and the client never got its ring). Here the hand-over fails until the I/O thread
    has gone to sleep (as it did with the socket full), or for half a second (a fake EAGAIN on a socket
    that is writable has the retries come at once)."""
    real = socket.send_fds
    refused: list[float] = []
    full = [True]

    def send_fds(*args: Any, **kw: Any) -> int:
        if full[0]:
            refused.append(time.monotonic())
            raise BlockingIOError(errno.EAGAIN, "the client has not read its snapshot yet")
        return real(*args, **kw)

    monkeypatch.setattr(socket, "send_fds", send_fds)
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        c = connect(pipe, lean=True, elide=True, poll=True)
        wait_for(lambda: refused, "the agent never handed the ring over")
        wait_for(
            lambda: probe_asleep(probe) or time.monotonic() - refused[0] > 0.5, "the probe did not settle"
        )
        full[0] = False
        n0 = len(pipe.journal.events)
        got = []
        for t in range(4):
            one_turn(pipe, t)
            time.sleep(AGENT_WINDOW)  # the model call
            got += _recv_n(c, 1)
        assert c.ring, "the client never got its ring"
        assert got == _kept(list(pipe.journal.events), n0)
        w1 = probe.agent_writes
        for t in range(4, 7):
            one_turn(pipe, t)
            time.sleep(AGENT_WINDOW)
            assert not _readable(c)  # its turns go to the ring, not the socket
        assert probe.agent_writes == w1
        c.close()
    finally:
        pipe.close()
