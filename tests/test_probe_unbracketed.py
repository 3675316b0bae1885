"""While every attached client reads the quiet elided stream, the Pipeline does not call into the probe
around its calls (engine.probe.agent_send): publish() itself leaves elided kinds waiting and sends the
rest, and the one ring client's turn skips writing the event ring.

Real agents (Pipelines with their probe), real Unix sockets and real memfd rings. A paced turn then
makes no hold() or flush() call at all, yet the client gets every kept event at its journal position,
and the bytes it finds in its ring are those the general fill writes (but for the checksums a client
that does not check them is not given); a client that is not quiet brings the calls back at once; events the short path took and then left to the general fill reach the
client all the same.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.probe import ring
from engine.probe.agent_limits import AGENT_WINDOW
from engine.probe.ring import RING_HEADER
from engine.probe.server import ProbeServer
from engine.recording.frames import HEADER, decode_frames
from tests.support.probe_agent import connect, one_turn, serving_pipeline, settle, wait_for
from tests.test_probe_ring import _kept, _recv_n, _wait_ring

T = 10.0

pytestmark = pytest.mark.skipif(
    not ring.rings_supported(), reason="needs memfd_create and file seals (Linux)"
)


class _Calls:
    """Counts the Pipeline's calls into the probe (hold and flush), as instance attributes."""

    def __init__(self, probe: Any) -> None:
        self.hold = self.flush = 0
        hold, flush = probe.hold, probe.flush

        def counted_hold() -> None:
            self.hold += 1
            hold()

        def counted_flush() -> None:
            self.flush += 1
            flush()

        probe.hold = counted_hold
        probe.flush = counted_flush


@pytest.mark.parametrize("record", [False, True])
def test_a_quiet_ring_client_costs_a_paced_turn_no_call_into_the_probe_but_publish(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, record: bool
) -> None:
    """Before, each of a turn's four Pipeline calls called hold() and flush() (three of the flushes
    only to leave the call's events waiting). Now none does while the one client is quiet; the turn's
    event is sent by the publish that hands it over, with no send() and no wake-up, and the client
    gets every kept event at its journal position, from a recording agent too."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000, **({"record": str(rtdir.parent / "run.cpsession")} if record else {})
    )
    probe = pipe.probe
    calls = _Calls(probe)
    short = [0]
    ring_turn = probe._ring_turn

    def counted(c: Any) -> bool:
        short[0] += 1
        return bool(ring_turn(c))

    probe._ring_turn = counted
    try:
        c = connect(pipe, lean=True, elide=True, poll=True)
        settle(probe, 1)
        _wait_ring(c)
        one_turn(pipe, 99)  # (the first live events close the snapshot's window: see snapshot_tail._skip_snapshot_tail)
        assert len(_recv_n(c, 1)) == 1
        assert not probe.bracket
        n0 = len(pipe.journal.events)
        h0, f0 = calls.hold, calls.flush
        w0, s0, p0 = probe.agent_writes, probe.agent_sends, probe.wakeups
        got = []
        for t in range(5):
            one_turn(pipe, t)
            time.sleep(AGENT_WINDOW)  # the model call
            got += _recv_n(c, 1)
        assert (calls.hold - h0, calls.flush - f0) == (0, 0)
        assert short == [1]  # each turn after the first by publish's straight path (_ring_now)
        assert (probe.agent_sends - s0, probe.agent_writes - w0, probe.wakeups - p0) == (5, 0, 0)
        assert got == _kept(list(pipe.journal.events), n0)
    finally:
        pipe.close()


def test_a_client_that_is_not_quiet_brings_the_bracketing_back(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """A client that is not quiet (told where the journal ends after each call) attaching beside the
    quiet one: every call is bracketed again, and once it leaves the calls are not; both clients get
    what they should throughout."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    calls = _Calls(probe)
    try:
        quiet = connect(pipe, lean=True, elide=True, poll=True)
        settle(probe, 1)
        assert not probe.bracket
        loud = connect(pipe, lean=True, elide=True, quiet=False)  # told where the journal ends
        settle(probe, 2)
        assert probe.bracket
        n0 = len(pipe.journal.events)
        h0 = calls.hold
        one_turn(pipe, 0)
        assert calls.hold - h0 == 4  # next_request, record_usage, assistant, tool_result
        assert _recv_n(loud, 1) == _kept(list(pipe.journal.events), n0)
        wait_for(lambda: loud.recv(0.05) is None and loud.journal_end == len(pipe.journal.events), "no end")
        loud.close()
        settle(probe, 1)
        assert not probe.bracket
        h0 = calls.hold
        one_turn(pipe, 1)
        assert calls.hold == h0
        got = _recv_n(quiet, 2)
        assert got == _kept(list(pipe.journal.events), n0)
    finally:
        pipe.close()


def _ring_bytes(probe: ProbeServer) -> bytes:
    (c,) = probe._clients.values()
    assert c.ring is not None
    mm = c.ring._mm
    return bytes(mm[RING_HEADER : RING_HEADER + c.ring.written])


def older_client_hello(monkeypatch: pytest.MonkeyPatch) -> None:
    """ProbeClient's hello as a client from before `ring_unchecked` sent it: without that key (so it
    checks every checksum, and the agent must give it them)."""
    from engine.probe import client

    encode = client.encode_frame

    def without_key(obj: dict[str, Any]) -> bytes:
        if obj.get("k") == "hello":
            obj = {k: v for k, v in obj.items() if k != "ring_unchecked"}
        return encode(obj)

    monkeypatch.setattr(client, "encode_frame", without_key)


def ring_frames(data: bytes) -> list[tuple[int, bytes]]:
    """(crc field, payload) of each frame in a ring's bytes, no checksum checked."""
    out, pos = [], 0
    while pos < len(data):
        length, crc = HEADER.unpack_from(data, pos)
        out.append((crc, data[pos + HEADER.size : pos + HEADER.size + length]))
        pos += HEADER.size + length
    assert pos == len(data)
    return out


def _published_turns(
    general: bool, monkeypatch: pytest.MonkeyPatch, rtdir: Path, unchecked: bool = True
) -> bytes:
    """What one quiet ring client finds in its ring after the same published events, by the short
    path or (general) the general fill on the agent's thread; `unchecked`: the client says it does not
    check its ring's checksums (ProbeClient does), else it is a client from before that."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rtdir.parent))
    if not unchecked:
        older_client_hello(monkeypatch)
    journal: list[dict[str, Any]] = [{"k": "session", "n": 0}]
    probe = ProbeServer({"model": "m"}, lambda: journal)
    if general:
        monkeypatch.setattr(probe, "_ring_turn", lambda c: False)
        monkeypatch.setattr(probe, "_ring_now", lambda event, frame: False)
    probe.start()
    try:
        c = _connect_server(probe)
        settle(probe, 1)
        _wait_ring(c)
        assert [sc.ring_unchecked for sc in probe._clients.values()] == [unchecked]
        for t in range(6):
            evs: list[dict[str, Any]] = [
                {"k": "request", "turn": t, "sections": [{"id": "s", "tokens": t}]},
                {"k": "blob", "h": f"h{t}", "text": "x" * (100 * t)},
                {"k": "usage", "turn": t, "usage": {"input_tokens": t}},
                {
                    "k": "turn",
                    "turn": t,
                    "trace": {"turn": t, "final_tokens": 10 * t, "sections": [{"id": "s"}]},
                },
                {"k": "msg", "role": "assistant", "h": f"a{t}"},
            ]
            if t % 2:  # in a call (hold/flush), with a turn before it: the older goes as its summary
                evs.insert(0, {"k": "turn", "turn": 100 + t, "trace": {"turn": 100 + t, "final_tokens": 1}})
                evs.insert(3, {"k": "alert", "turn": t, "text": "pressure"})
                probe.hold()
            for ev in evs:
                journal.append(ev)
                probe.publish(ev)
            if t % 2:
                probe.flush()
        return _ring_bytes(probe)  # (written by publish, on this thread)
    finally:
        probe.close()


def _connect_server(probe: ProbeServer) -> Any:
    from engine.probe.client import ProbeClient

    c = ProbeClient.connect(
        probe.pid, timeout=T, runtime_dir=probe.path.parent, lean=True, elide=True, poll=True
    )
    for _ in range(c.hello["snapshot"]):
        assert c.recv(T) is not None
    return c


@pytest.mark.parametrize("unchecked", [False, True])
def test_the_short_path_writes_the_bytes_the_general_fill_writes(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, unchecked: bool
) -> None:
    """Side by side, the same events published to one quiet ring client, outside any call (publish's
    straight path, _ring_now) and in calls with two events to send (flush's short one, _ring_turn): the
    ring's bytes are those the general fill writes for them. For a client that does not check its
    ring's checksums the short paths leave every crc32 0 (see ring, "Checksums") and the frames are
    otherwise the same bytes; a client from before that gets the very bytes, checksums and all."""
    short = _published_turns(False, monkeypatch, rtdir, unchecked)
    monkeypatch.undo()
    general = _published_turns(True, monkeypatch, rtdir, unchecked)
    if unchecked:
        # (The first batch after the attach goes by the general fill, past the snapshot's tail:
        # checksummed as for any client.)
        assert [crc for crc, _ in ring_frames(short)][1:] == [0] * 5
        assert [p for _, p in ring_frames(short)] == [p for _, p in ring_frames(general)]
        short = general  # (the same frames, checksummed: decoded below with the checks)
    else:
        assert short == general
    frames, used = decode_frames(short)
    assert used == len(short)
    batches = [f for f in frames if f["k"] == "batch"]
    assert [len(b["events"]) for b in batches] == [1, 3, 1, 3, 1, 3]
    assert [e["k"] for e in batches[1]["events"]] == ["turn_summary", "alert", "turn"]


def test_events_the_short_path_took_and_left_to_the_fill_reach_the_client(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """An event the fast encoder refuses (a map with a non-str key) makes the short path give up after
    it took the waiting events from the queue: it puts them in the event ring first, so the general
    fill sends them, each at its journal position."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        c = connect(pipe, lean=True, elide=True, poll=True)
        settle(probe, 1)
        _wait_ring(c)
        one_turn(pipe, 0)  # (its first live events close the snapshot's window: see snapshot_tail._skip_snapshot_tail)
        assert len(_recv_n(c, 1)) == 1
        n0 = len(pipe.journal.events)
        taken = probe.agent_sends
        odd = {"k": "note", "table": {1: "one", 2: "two"}}
        pipe.journal.append(odd)
        assert probe.agent_sends == taken + 1  # sent by the agent's thread, by the general fill
        one_turn(pipe, 1)
        got = _recv_n(c, 2)
        journal = list(pipe.journal.events)
        assert got == _kept(journal, n0)
        assert got[0] == (odd, n0)
    finally:
        pipe.close()
