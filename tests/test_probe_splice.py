"""A recording agent's turns on the elided stream: sent whole, spliced from the frames it encoded.

engine.probe.splice builds a `batch` frame from the payloads the agent's recorder already encoded. These
tests hold that the bytes are those of encoding the batch whole, that the elided fill sends what the
general path's rules say (every event with a frame whole, every other one as before) at the journal's
positions, however the fill is cut and whether the encoding is shared, and that the inspector's live
source on a recording agent gets every turn whole (nothing to fetch, nothing owed at exit) and saves
the agent's journal.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.probe.elided_fill as elided_fill
from engine.probe.client import ProbeClient
from engine.probe.client_state import HIGH_WATER, Client
from engine.probe.elide import ELIDED_KINDS
from engine.probe.lean import summary_event
from engine.probe.server import ProbeServer
from engine.probe.splice import batch_payload
from engine.recording.frames import HEADER, decode_frames, encode_frame, pack_payload
from tests.support.probe_agent import run_turns, serving_pipeline
from tests.test_probe_lean import _burst, _caught_up, _follow_all, _live

# Values an engine event may hold (msgpack's types; str keys).
_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.binary(max_size=8),
)
_value = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
_event = st.builds(
    lambda k, rest: {"k": k, **rest},
    st.sampled_from(["request", "usage", "msg", "blob", "part", "turn", "error", "compaction", "x"]),
    st.dictionaries(st.text(min_size=2, max_size=5), _value, max_size=5),
)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(_event, max_size=40), at=st.data(), end=st.integers(0, 2**40))
def test_a_spliced_batch_is_the_batch_encoded_whole(events: list[dict[str, Any]], at: Any, end: int) -> None:
    positions = at.draw(st.lists(st.integers(0, 2**40), min_size=len(events), max_size=len(events)))
    whole = pack_payload({"k": "batch", "events": events, "at": positions, "end": end})
    assert batch_payload([pack_payload(e) for e in events], positions, end) == whole


@pytest.mark.parametrize("n", [0, 1, 15, 16, 65535, 65536])
def test_a_spliced_batchs_array_header_is_msgpacks_at_every_size(n: int) -> None:
    events = [{}] * n
    whole = pack_payload({"k": "batch", "events": events, "at": list(range(n)), "end": n})
    assert batch_payload([b"\x80"] * n, list(range(n)), n) == whole


# ------------------------------------------------------------------------------------------ the fill


def _trace(turn: int, pad: int) -> dict[str, Any]:
    return {
        "turn": turn,
        "final_tokens": 100 + turn,
        "error": None,
        "tier": "Normal",
        "cache_break": None,
        "alerts": [],
        "pressure": {"raw": 0.1, "predictive": 0.2},
        "usage": None,
        "actions": [],
        "sections": [{"id": "history", "note": "x" * pad}],
    }


def _ring_events(spec: list[tuple[str, bool, int]]) -> list[Any]:
    """Ring slots from (kind, has a frame, padding) specs: turns numbered in order, as the engine's."""
    out: list[Any] = []
    turn = 0
    for kind, framed, pad in spec:
        if kind == "turn":
            ev: dict[str, Any] = {"k": "turn", "turn": turn, "trace": _trace(turn, pad)}
            turn += 1
        else:
            ev = {"k": kind, "turn": turn, "data": "y" * pad}
        out.append((ev, encode_frame(ev)) if framed else ev)
    return out


def _expected(slots: list[Any], jpos: int) -> list[tuple[dict[str, Any], int]]:
    """The elided stream's rules: no elided kind; an event with a frame whole; a turn without one as its
    summary unless it is the newest turn of what the fill looks at; each at its journal position."""
    plain = [s[0] if type(s) is tuple else s for s in slots]
    turns = [i for i, e in enumerate(plain) if e["k"] == "turn"]
    newest = turns[-1] if turns else -1
    out = []
    for i, (slot, ev) in enumerate(zip(slots, plain, strict=True)):
        if ev["k"] in ELIDED_KINDS:
            continue
        if type(slot) is not tuple and ev["k"] == "turn" and i < newest:
            ev = summary_event(ev)
        out.append((ev, jpos + i))
    return out


class _Server(ProbeServer):
    """A probe server that is never started: its ring is filled by hand and its fill run directly."""

    def _spent(self) -> bool:
        return False


def _elided_client(server: ProbeServer, jpos: int, frames: bool) -> Client:
    a, b = socket.socketpair()
    b.close()
    c = Client(a, os.getuid())
    c.lean = c.elide = True
    c.frames = frames
    c.jpos = c.jdone = jpos
    server._clients[c.fd] = c
    server._nclients += 1
    server._nlean += 1
    return c


def _drain_fills(server: ProbeServer, c: Client) -> tuple[bytes, list[int]]:
    """Fill until the client's cursor reaches the head, taking its buffer after each fill (as sends
    would); all it was sent and how large each fill's buffer was."""
    data = b""
    sizes: list[int] = []
    while c.cursor < server._head:
        server._fill_elided(c)
        sizes.append(len(c.outbuf))
        data += bytes(c.outbuf)
        c.outbuf.clear()
    return data, sizes


def _as_read(data: bytes, piece: int) -> tuple[list[tuple[dict[str, Any], int | None]], int]:
    """What a ProbeClient hands out of that stream (events with their positions), and its journal end,
    reading it `piece` bytes at a time (a frame announced may not have arrived yet). Every batch frame
    in it is byte for byte that batch encoded whole."""
    frames, used = decode_frames(data)
    assert used == len(data)
    pos = 0
    for f in frames:
        length, _ = HEADER.unpack_from(data, pos)
        if f.get("k") == "batch":
            assert data[pos + HEADER.size : pos + HEADER.size + length] == pack_payload(f)
        pos += HEADER.size + length
    a, b = socket.socketpair()
    got = []
    with a, b:
        client = ProbeClient(a, os.getpid(), Path("unused"))
        for i in range(0, len(data), piece):
            client._reader.feed(data[i : i + piece])
            while True:
                ev, at = client.recv_at(0)
                if ev is None:
                    break
                got.append((ev, at))
    return got, client.journal_end


_slot = st.tuples(
    st.sampled_from(["request", "usage", "msg", "blob", "part", "turn", "turn", "error", "compaction"]),
    st.booleans(),
    st.sampled_from([0, 10, 40_000]),
)


@settings(max_examples=80, deadline=None)
@given(
    spec=st.lists(_slot, min_size=1, max_size=60),
    jpos=st.integers(0, 5),
    sharing=st.booleans(),
    raw=st.booleans(),
    piece=st.sampled_from([997, 1 << 30]),
)
def test_the_elided_fill_sends_a_recording_agents_events_whole_at_their_positions(
    spec: list[tuple[str, bool, int]], jpos: int, sharing: bool, raw: bool, piece: int
) -> None:
    """Every kept event with a frame arrives whole (a turn too, where the general path sent its summary),
    the rest as the general path sends them, each at its journal position, in order, once, whether the
    client asked for the agent's frames as they are (`raw`: each then is in the stream byte for byte) or
    not; each batch is the bytes of encoding it whole; a fill stops once it is past HIGH_WATER by at most
    one event; and two clients in the same place get the same bytes."""
    slots = _ring_events(spec)
    with tempfile.TemporaryDirectory(prefix="cps-", dir="/tmp") as d:
        server = _Server({"model": "m", "provider": "p", "engine_version": "0"}, list, runtime_dir=Path(d))
        server._ring[: len(slots)] = slots
        server._head = len(slots)
        c = _elided_client(server, jpos, raw)
        other = _elided_client(server, jpos, raw) if sharing else None
        data, sizes = _drain_fills(server, c)
        if other is not None:
            assert _drain_fills(server, other)[0] == data
        for x in server._clients.values():
            x.sock.close()
        server.close()  # never started, it still holds the descriptor it keeps in reserve (one an example)
    got, end = _as_read(data, piece)
    assert got == _expected(slots, jpos)
    assert end == jpos + len(slots)
    assert c.cursor == len(slots) and c.jpos == jpos + len(slots)
    if raw:
        assert all(s[1] in data for s in slots if type(s) is tuple and s[0]["k"] not in ELIDED_KINDS)
    if all(type(s) is tuple for s in slots):  # (the general path bounds a fill by ELIDE_SCAN events alone)
        assert all(size <= HIGH_WATER + max(len(s[1]) for s in slots) + 64 for size in sizes)
    summarized = {ev["turn"] for ev, _ in got if ev["k"] == "turn_summary"}
    assert c.owed == summarized


def test_shared_elided_batches_are_spliced_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two elided clients in the same place: the second is sent the first's bytes (one splice)."""
    slots = _ring_events([("blob", True, 5), ("turn", True, 5), ("usage", True, 0), ("turn", True, 5)])
    calls: list[int] = []
    real = elided_fill.batch_payload
    monkeypatch.setattr(elided_fill, "batch_payload", lambda *a: (calls.append(1), real(*a))[1])
    with tempfile.TemporaryDirectory(prefix="cps-", dir="/tmp") as d:
        server = _Server({"model": "m", "provider": "p", "engine_version": "0"}, list, runtime_dir=Path(d))
        server._ring[: len(slots)] = slots
        server._head = len(slots)
        a, b = _elided_client(server, 3, False), _elided_client(server, 3, False)
        server._fill_elided(a)
        server._fill_elided(b)
        for x in (a, b):
            x.sock.close()
        server.close()
    assert bytes(a.outbuf) == bytes(b.outbuf) and len(calls) == 1
    assert (a.cursor, a.jpos) == (b.cursor, b.jpos) == (4, 7)


# ------------------------------------------------------------------------------------------ the inspector


def test_a_recording_agents_turns_reach_the_live_source_whole(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, tmp_path: Path
) -> None:
    """Turns back to back from an agent that records: the elided stream sends each whole (the general
    path summarized all but the newest of a send), so the source holds every trace without fetching
    one, the agent owes it none at exit, and a save is the agent's journal."""
    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event

    pipe = serving_pipeline(monkeypatch, rtdir, record=str(tmp_path / "agent.cpsession"))
    try:
        run_turns(pipe, range(2))
        src = _live(pipe)
        _follow_all(src)
        _burst(pipe, range(2, 14))
        _caught_up(src, pipe)
        journal = list(pipe.journal.events)
        turns = {e["turn"]: e["trace"] for e in journal if e["k"] == "turn"}
        assert src._by_turn == turns and not src._missing and src.fetched == 0
        assert all(not c.owed for c in pipe.probe._clients.values())
        assert all(src.full_trace(n) == turns[n] for n in range(14))
        out = tmp_path / "saved.cpsession"
        src.save(out)
    finally:
        pipe.close()
    assert [unpack_event(e) for e in RecordingReader.open(out).events()] == journal
