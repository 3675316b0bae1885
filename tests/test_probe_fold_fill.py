"""A fold client's trace requests during a long session's history fill cost the probe no disk reads.

An inspector on the fold stream that attached to the snapshot's tail cannot rebuild the turns that close
while the history before the tail is still arriving, so it asks the agent for each one's trace (`trace
N`). The turn just closed is among the journal's newest events, held in memory, but its ring slot holds
only its `turn_deferred` marker: the lookup scanned the ring in vain and then bisected the whole journal,
reading ~30 events back from disk for every answer (~1 ms of the probe's CPU a paced turn, more than its
budget left the fill: bench_probe_fill.py --fold never finished a 1,500-turn history in 120 s).

Real agents (a Pipeline serving its probe, its journal spilling to disk), real Unix sockets, the real
client; the journal's reads from disk are counted where they happen (EventLog._read).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine.recording.event_log import EventLog
from tests.support.fold_stream import raw_fold_client, spilling_pipeline

T = 10.0


def _turn(pipe: Any, t: int) -> None:
    req = pipe.next_request()  # (the count only: an agent that never reads its traces)
    pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10 + t})
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
    pipe.tool_result(calls[0].id, f"output of step {t}\n" + "word " * 20)


def test_trace_requests_for_new_turns_read_nothing_from_disk(
    rtdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipe = spilling_pipeline(_turn)
    try:
        events = pipe.journal.events
        assert isinstance(events, EventLog) and len(events) - events.in_memory() > 500  # most of it on disk
        c = raw_fold_client(pipe)
        reads = [0]
        read = EventLog._read

        def counted(self: EventLog, i: int) -> dict[str, Any]:
            reads[0] += 1
            return read(self, i)

        monkeypatch.setattr(EventLog, "_read", counted)
        answers: dict[int, Any] = {}
        for t in range(150, 170):
            _turn(pipe, t)
            pipe.close_turn()
            assert c.request_trace(t)
            deadline = time.monotonic() + T
            while t not in answers:
                assert time.monotonic() < deadline, f"no answer for turn {t}"
                ev = c.recv(0.2)
                if ev is not None and ev.get("k") == "trace":
                    answers[ev["turn"]] = ev["trace"]
        # And one a few dozen turns back, still in memory (asked in a long queue, it is answered late).
        assert c.request_trace(152)
        answers.pop(152)
        deadline = time.monotonic() + T
        while 152 not in answers:
            assert time.monotonic() < deadline
            ev = c.recv(0.2)
            if ev is not None and ev.get("k") == "trace":
                answers[ev["turn"]] = ev["trace"]
        own = {tr["turn"]: tr for tr in list(pipe.traces)}
        assert all(answers[t] == own[t] for t in range(150, 170))
        # Every answer came from the journal's newest events, in memory: nothing was read from disk.
        assert reads[0] == 0
        # An old turn, on disk, is still found (the bisect over the journal, as before).
        assert c.request_trace(3)
        deadline = time.monotonic() + T
        while 3 not in answers:
            assert time.monotonic() < deadline
            ev = c.recv(0.2)
            if ev is not None and ev.get("k") == "trace":
                answers[ev["turn"]] = ev["trace"]
        assert answers[3] is not None and answers[3]["turn"] == 3 and reads[0] > 0
        c.close()
    finally:
        pipe.close()


def test_a_range_answer_reads_the_journal_on_disk_a_run_at_a_time(
    rtdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history fill's range answers read the journal's spilled events a run per pread (see
    EventLog.read_run), not one pread and one lookup each (about half of a range answer's CPU)."""
    pipe = spilling_pipeline(_turn)
    try:
        events = pipe.journal.events
        assert isinstance(events, EventLog) and len(events) - events.in_memory() >= 600
        own = list(events[:600])
        c = raw_fold_client(pipe)
        preads = [0]
        pread = os.pread

        def counted(fd: int, size: int, at: int) -> bytes:
            preads[0] += 1
            return pread(fd, size, at)

        monkeypatch.setattr(os, "pread", counted)
        got: dict[int, Any] = {}
        for lo in range(0, 600, 200):
            assert c.fetch_journal(lo, lo + 200)
        deadline = time.monotonic() + T
        while len(got) < 600:
            assert time.monotonic() < deadline, f"{len(got)} of 600 events came"
            ev = c.recv(0.2)
            if ev is not None and ev.get("k") == "journal":
                got.update((ev["at"] + k, e) for k, e in enumerate(ev["events"]))
        # In order, each as journaled (a turn as its summary, or, one the journal moved to disk unbuilt,
        # as its marker: the fold client rebuilds it, the probe does not).
        for i, ev in enumerate(own):
            assert got[i] == ev or (
                ev["k"] == "turn"
                and got[i]["k"] in ("turn_summary", "turn_deferred")
                and got[i]["turn"] == ev["turn"]
            )
        # 600 events on disk in runs of up to 64 (and a run ends at a spilled chunk's end, and where an
        # answer's frame or pass ends): a few dozen preads, not 600.
        assert preads[0] <= 40, preads[0]
        c.close()
    finally:
        pipe.close()


def test_turns_closed_during_the_history_fill_are_folded_not_asked_of_the_agent(
    rtdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inspector attached to the tail of a long session does not ask the agent for the trace of each
    turn that closes while the history before the tail is still arriving (the probe built and sent one a
    turn, in a queue it answered slower than a busy agent's turns came, within the budget the fill
    lacked): its fold builds those turns once the history is there, equal to the agent's own."""
    from engine.pipeline import Pipeline
    from inspector.sources import NewTurn
    from inspector.sources.live import LiveSource

    pipe = Pipeline(
        "claude-sonnet-4", "anthropic", 200_000, serve=True, max_output_tokens=1024, journal_keep=256
    )
    assert pipe.probe is not None
    # Every live turn sent at its close: this inspector never asks for what the agent holds back
    # (backfill_idle None), and turns closer than FOLD_COALESCE wait for a later send (tests of that
    # in tests/test_probe_fold_coalesce.py).
    pipe.probe.fold_coalesce = 0.0
    try:
        pipe.identity("You are a careful coding agent.")
        pipe.user("Fix the failing test.")
        for t in range(180):  # (over TAIL_MIN events: the tail is sent, the rest fetched)
            _turn(pipe, t)
        pipe.close_turn()
        # The fill is held back (its next range not asked for) until the live turns below have come.
        release = threading.Event()
        fetch_history = LiveSource._fetch_history

        def held(self: LiveSource) -> bool:
            return fetch_history(self) if release.is_set() else False

        monkeypatch.setattr(LiveSource, "_fetch_history", held)
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True)
        src.load_initial()
        assert src._folding and not src._history_told
        seen: list[int] = []
        stop = threading.Event()

        def follow() -> None:
            for e in src.follow():
                if isinstance(e, NewTurn):
                    seen.append(e.trace["turn"])
                if stop.is_set():
                    return

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        for t in range(180, 192):
            _turn(pipe, t)
        pipe.close_turn()
        deadline = time.monotonic() + T
        while 191 not in seen:
            assert time.monotonic() < deadline, f"the live turns did not come: {seen}"
            time.sleep(0.01)
        assert src.asked_traces == 0 and not src._history_told  # (one a turn before)
        release.set()
        deadline = time.monotonic() + T
        while not src._history_told or any(t in src._missing for t in range(180, 192)):
            assert time.monotonic() < deadline, "the fill did not end, or its turns stayed stand-ins"
            time.sleep(0.01)
        assert src.asked_traces == 0  # (the fold filled them: compared with the agent's own below)
        shown = {t: dict(src.full_trace(t)) for t in range(180, 192)}
        stop.set()
        _turn(pipe, 192)  # (wakes the reader to see stop)
        src.close()
        reader.join(T)
        own = {tr["turn"]: tr for tr in list(pipe.traces)}
        assert all(shown[t] == own[t] for t in range(180, 192))
    finally:
        pipe.close()
