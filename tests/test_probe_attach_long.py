"""Attaching to a long-running agent: bounded work for the agent, and the newest turn first.

An inspector attaches to an agent that has run for thousands of turns. The whole snapshot (every event
of the journal, most of it on disk, each turn's trace built on first read) took the probe's I/O thread
tens of seconds at its CPU budget, and counting the journal's turns for the hello read every event back
from disk and built every turn kept in memory in one go (the agent's turns waited on the GIL: 76 ms
against 18 ms without an attach, bench_probe.py --attach-long 5000). These tests hold that an attach
builds no turn but the newest and reads nothing from disk before its hello, that a client asking for
the tail gets the newest turn first and the rest of the journal by range, and that the inspector's live
source draws that turn in its first frame, with the turns before it filled in as they arrive.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine.probe.client import ProbeClient
from engine.probe.elide import RANGE_MAX
from engine.probe.server import ProbeServer
from engine.recording.event_log import Deferred, EventLog
from tests.support.probe_agent import T, run_turns, serving_pipeline, wait_progressing

TURNS = 400
EVENTS_A_TURN = 6
TURNS_LIVE = 200  # a real agent's: more journal events than TAIL_MIN, so the snapshot is sent as its tail


class _Turn(Deferred):
    """A turn event kept as a recipe, as the engine keeps a trace nobody has read (engine.trace_lazy):
    built on first read. Counts its builds and the thread that made each."""

    kind = "turn"
    built: list[tuple[int, str]] = []

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.event: dict[str, Any] | None = None

    def resolve(self) -> dict[str, Any]:
        if self.event is None:
            _Turn.built.append((self.turn, threading.current_thread().name))
            self.event = {
                "k": "turn",
                "turn": self.turn,
                "trace": {"turn": self.turn, "final_tokens": 100 + self.turn},
            }
        return self.event


class _CountingLog(EventLog):
    """The journal's event list, counting the events read back from disk."""

    def __init__(self, keep: int) -> None:
        super().__init__(keep, chunk=64)
        self.disk_reads = 0

    def _read(self, i: int) -> dict[str, Any]:
        self.disk_reads += 1
        return super()._read(i)


def _long_journal(keep: int = 256) -> _CountingLog:
    """TURNS turns of six events, most of them on disk; the newest turns' events still recipes."""
    log = _CountingLog(keep)
    for t in range(TURNS):
        log.append({"k": "request", "turn": t, "sha256": "ab" * 32})
        log.append(_Turn(t))
        log.append({"k": "usage", "turn": t, "usage": {"input_tokens": 100 + t}})
        log.append({"k": "msg", "turn": t, "role": "assistant", "h": f"{t:064x}"})
        log.append({"k": "part", "turn": t, "n": 1})
        log.append({"k": "blob", "h": f"{t:064x}", "data": "x" * 200})
    return log


def _server(rtdir: Path, log: Any) -> ProbeServer:
    server = ProbeServer(
        {"model": "m", "provider": "anthropic"}, lambda: log, pid=os.getpid(), runtime_dir=rtdir
    )
    server.start()
    return server


def test_an_attach_builds_no_old_turn_and_reads_nothing_from_disk(rtdir: Path) -> None:
    """Before its hello the probe counts the journal's turns: from what the journal counted as it wrote
    them to disk, and the recipes it keeps by their kind, building none of them. A client asking for the
    tail is then sent the newest turn (the one turn built) and what follows it: nothing from disk."""
    log = _long_journal()
    assert len(log) - log.in_memory() > TURNS, (
        "most of the journal must be on disk for the test to mean anything"
    )
    _Turn.built.clear()
    server = _server(rtdir, log)
    try:
        c = ProbeClient.connect_path(server.path, os.getpid(), T, lean=True, elide=True, tail=True)
        try:
            # Nothing old built, nothing read from disk (the old count built every turn kept in memory
            # and read the rest back from disk, before the hello).
            assert log.disk_reads == 0 and {t for t, _ in _Turn.built} <= {TURNS - 1}
            hello = c.hello
            assert hello["turns"] == TURNS
            assert hello["snapshot_at"] == (TURNS - 1) * EVENTS_A_TURN + 1  # the newest turn's position
            assert hello["snapshot"] == EVENTS_A_TURN - 1  # it and the events after it
            first = c.recv(T)
            assert first is not None and first["k"] == "turn" and first["turn"] == TURNS - 1
            assert first["trace"]["final_tokens"] == 100 + TURNS - 1
            for _ in range(hello["snapshot"] - 1):
                assert c.recv(T) is not None
            assert [t for t, _ in _Turn.built] == [TURNS - 1]
            assert log.disk_reads == 0
        finally:
            c.close()
    finally:
        server.close()


def test_a_client_that_does_not_ask_for_the_tail_gets_the_whole_journal(rtdir: Path) -> None:
    """A client from before the tail (or of another stream) is sent the whole snapshot, as ever, its turn
    count the same."""
    log = _long_journal()
    server = _server(rtdir, log)
    try:
        with ProbeClient.connect_path(server.path, os.getpid(), T, lean=True, elide=True) as c:
            assert c.snapshot_at == 0 and "snapshot_at" not in c.hello
            assert c.hello["snapshot"] == len(log) and c.hello["turns"] == TURNS
            got = [c.recv(T) for _ in range(len(log))]
            assert [e["turn"] for e in got if e is not None and e["k"] == "turn"] == list(range(TURNS))
    finally:
        server.close()


def test_the_rest_of_the_journal_comes_by_range_event_for_event(rtdir: Path) -> None:
    """What the tail leaves out is the journal before it, fetched by range: together they are the journal."""
    log = _long_journal()
    server = _server(rtdir, log)
    try:
        with ProbeClient.connect_path(server.path, os.getpid(), T, lean=True, elide=True, tail=True) as c:
            at = c.snapshot_at
            tail = [c.recv(T) for _ in range(c.hello["snapshot"])]
            fetched: list[dict[str, Any]] = []
            while len(fetched) < at:
                lo = len(fetched)
                hi = min(at, lo + RANGE_MAX)
                assert c.fetch_journal(lo, hi)
                while len(fetched) < hi:
                    ev = c.recv(T)
                    assert ev is not None, "the range was not answered"
                    if ev["k"] == "journal":
                        assert ev["at"] == len(fetched)
                        fetched += ev["events"]
            whole = fetched + tail
            assert len(whole) == len(log)
            for i, (mine, theirs) in enumerate(zip(whole, log, strict=True)):
                if theirs["k"] == "turn":  # a range answer sends a turn as its summary
                    assert (mine["k"], mine["turn"]) == (
                        "turn_summary" if i < at else "turn",
                        theirs["turn"],
                    ), i
                else:
                    assert mine == theirs, i
    finally:
        server.close()


def test_a_client_that_says_nothing_gets_its_hello_and_snapshot(rtdir: Path) -> None:
    """The agent waits for a client's hello a moment (to know what to send first); a client that never
    sends one still gets the hello and the whole snapshot."""
    import socket

    from engine.recording.frames import decode_frames

    log = [{"k": "blob", "h": "0" * 64, "data": "x"}, {"k": "turn", "turn": 0, "trace": {"turn": 0}}]
    server = _server(rtdir, log)
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(T)
        s.connect(str(server.path))
        data = b""
        deadline = time.monotonic() + T
        frames: list[dict[str, Any]] = []
        while len(frames) < 3 and time.monotonic() < deadline:
            data += s.recv(65536)
            frames, _used = decode_frames(data)
        s.close()
        assert [f["k"] for f in frames] == ["hello", "blob", "turn"]
        assert frames[0]["snapshot"] == 2 and "snapshot_at" not in frames[0]
    finally:
        server.close()


def test_the_first_frame_shows_the_newest_turn_and_the_history_fills_in(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """The inspector's live source on a real agent: what the app draws first holds every turn, the newest
    whole and those before it as stand-ins, read from the snapshot's tail alone; following the agent
    fetches the journal before it, fills each stand-in with its turn's summary in place (the dicts the
    timeline holds) and says so once; the source then holds the agent's journal event for event."""
    from engine.recording.journal import Journal
    from inspector.sources import HistoryFilled, NewTurn
    from inspector.sources.live import LiveSource
    from inspector.timeline import summarize

    monkeypatch.setattr("engine.pipeline.Journal", lambda *a, **k: Journal(keep=64))
    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(TURNS_LIVE))
        assert pipe.journal.events.in_memory() < len(pipe.journal.events), "some of the journal on disk"
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None)
        assert src.client.snapshot_at > 0, "attached to the snapshot's tail"
        initial = src.load_initial()
        assert [t["turn"] for t in initial] == list(range(TURNS_LIVE))
        assert initial[-1] == pipe.traces[-1], "the newest turn whole"
        assert all(t["tier"] == "" and t["final_tokens"] == 0 for t in initial[:-1]), "the rest are stand-ins"
        got: list[Any] = []

        def follow() -> None:
            for ev in src.follow():
                got.append(ev)
                if isinstance(ev, NewTurn) and ev.trace["turn"] == TURNS_LIVE + 1:
                    return

        th = threading.Thread(target=follow, daemon=True)
        th.start()
        wait_progressing(  # (a whole fill in T ran out at load ~8 on one core: see wait_progressing)
            lambda: any(isinstance(e, HistoryFilled) for e in got),
            lambda: (src._jpos, len(got)),
            "the history was not fetched",
        )
        traces = [e["trace"] for e in pipe.journal.events if e["k"] == "turn"]
        assert [summarize(t) for t in traces][:-1] == initial[:-1], "filled in place, turn for turn"
        run_turns(pipe, range(TURNS_LIVE, TURNS_LIVE + 2))
        th.join(T)
        assert [e.trace["turn"] for e in got if isinstance(e, NewTurn)] == [TURNS_LIVE, TURNS_LIVE + 1]
        assert sum(isinstance(e, HistoryFilled) for e in got) == 1
        src._load_events()
        assert src.events == list(pipe.journal.events)
    finally:
        pipe.close()
