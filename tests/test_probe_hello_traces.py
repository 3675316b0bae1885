"""Only a client that has completed a valid hello makes the agent build its turns' traces.

fuzz43 found that hostile local clients held open (a connection that sends nothing, half a frame, a
hello the agent cannot answer) cost the agent's turn 2.28x its quiet CPU: every attached connection
counted as a reader of traces, so each turn built its trace for them. Now a connection is attached to
the journal only at its first valid hello (or, sending none, when the agent starts it at HELLO_WAIT),
and only a valid hello that asks for a stream of traces (any but the fold stream) counts: the
Pipeline's turns stay records (engine/trace_lazy.py) for the rest, asserted on the records
themselves, not on timing.

Real agents (Pipelines with their probe), real Unix sockets, the real client.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from engine.recording.frames import HEADER, encode_frame
from engine.trace_lazy import TurnRecord
from tests.support.probe_agent import connect, serving_pipeline, wait_for
from tests.test_probe import Raw

T = 10.0


def _turn(pipe: Any, t: int) -> None:
    req = pipe.next_request()  # (an agent that sends the body and reads no trace)
    pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10})
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
    pipe.tool_result(calls[0].id, f"output of step {t}")


def _built(pipe: Any, last: int) -> list[bool]:
    """Whether each of the last `last` turns' traces was built as it came (not left a record)."""
    n = len(pipe.traces)
    return [not isinstance(pipe.traces.raw(i), TurnRecord) for i in range(n - last, n)]


def _hostile(path: Path) -> list[socket.socket]:
    """Connections that never complete a valid hello: one silent, one sending half a hello frame, one
    garbage after a frame header, one a hello of a protocol the agent does not speak."""
    socks = []
    hello = encode_frame({"k": "hello", "protocol": 1})
    garbage = HEADER.pack(8, 0) + b"\xc1garbage"[:8]  # a whole frame whose checksum is wrong
    for data in (b"", hello[:5], garbage, encode_frame({"k": "hello", "protocol": 99})):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(T)
        s.connect(str(path))
        if data:
            s.sendall(data)
        socks.append(s)
    return socks


def test_connections_without_a_valid_hello_build_no_trace(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        for t in range(3):
            _turn(pipe, t)
        socks = _hostile(probe.path)
        try:
            # The silent one and the half frame are started at HELLO_WAIT (hello, snapshot: the
            # handshake); the garbage and the foreign protocol are told why and closed.
            wait_for(lambda: probe.client_count == 2 and len(probe._clients) == 2, "not admitted")
            for t in range(3, 9):
                _turn(pipe, t)
            assert probe.tracing_clients == 0
            assert _built(pipe, 6) == [False] * 6  # every turn a record: nothing reads traces
        finally:
            for s in socks:
                s.close()
        wait_for(lambda: not probe._clients, "the hostile connections were not let go")

        # A client that completes its hello (protocol 1: turns with their traces) makes them built.
        c = connect(pipe)
        wait_for(lambda: probe.tracing_clients == 1, "a client with a valid hello was not counted")
        for t in range(9, 12):
            _turn(pipe, t)
        assert _built(pipe, 3) == [True] * 3
        c.close()
        wait_for(lambda: probe.client_count == 0, "the client was not let go")
        _turn(pipe, 12)
        assert _built(pipe, 1) == [False]
    finally:
        pipe.close()


def test_a_client_without_a_hello_gets_the_turns_as_markers_until_it_sends_one(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        _turn(pipe, 0)
        raw = Raw(probe.path)  # sends nothing: started after HELLO_WAIT with the whole snapshot
        try:
            frames = raw.until("hello")
            assert len(frames) == 1 and frames[0]["snapshot"] == len(pipe.journal.events)
            snapshot = [raw.next() for _ in range(frames[0]["snapshot"])]
            assert [e["turn"] for e in snapshot if e and e["k"] == "turn"] == [0]  # read whole
            assert probe.tracing_clients == 0
            _turn(pipe, 1)
            assert _built(pipe, 1) == [False]
            live = raw.until("turn_deferred")  # the turn as the agent keeps it: its marker
            assert live[-1] == {"k": "turn_deferred", "turn": 1}

            # Its hello, late: it reads traces from here, and the agent builds them for it.
            raw.sock.sendall(encode_frame({"k": "hello", "protocol": 1}) + encode_frame({"k": "ping"}))
            raw.until("pong")
            assert probe.tracing_clients == 1
            _turn(pipe, 2)
            assert _built(pipe, 1) == [True]
            turn = raw.until("turn")[-1]
            assert turn["turn"] == 2 and turn["trace"] == pipe.traces[2]
        finally:
            raw.close()
        wait_for(lambda: probe.client_count == 0, "the client was not let go")
    finally:
        pipe.close()
