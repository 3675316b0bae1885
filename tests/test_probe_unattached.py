"""An agent that serves its probe but has no client attached builds no turn trace the probe would drop.

The probe drops every event while no client is attached (nothing is encoded), but its subscription to
the journal made each turn build its trace at once (engine/trace_lazy.py's records were only for a
journal nobody subscribed to): ~120 us of a ~1.2 ms turn, measured. Now the turns of such an agent are
records, built when read; a client that attaches reads them whole from the journal (its snapshot), a
turn open when it attaches reaches it live, whole, and turns after that are built as they come.

Real agents (Pipelines with their probe), real Unix sockets, the real client.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine.probe.client import ProbeClient
from engine.trace_lazy import TurnEvent, TurnRecord
from tests.support.probe_agent import serving_pipeline, wait_for

T = 10.0


def _request(pipe: Any) -> Any:
    return pipe.next_request()  # (an agent that sends the body and reads no trace)


def _outcome(pipe: Any, req: Any, t: int) -> None:
    pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10})
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
    pipe.tool_result(calls[0].id, f"output of step {t}")


def _kinds(pipe: Any) -> list[type]:
    return [type(pipe.traces.raw(i)) for i in range(len(pipe.traces))]


def test_turns_wait_as_records_until_a_client_attaches_and_it_gets_every_trace_whole(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        for t in range(4):
            _outcome(pipe, _request(pipe), t)
        assert _kinds(pipe) == [TurnRecord] * 4  # nothing built: the probe has no client

        # A client attaches mid-turn: the request made (as a record), its outcome not yet in.
        req = _request(pipe)
        c = ProbeClient.connect(os.getpid(), timeout=T, runtime_dir=probe.path.parent)
        got = [c.recv(T) for _ in range(c.hello["snapshot"])]
        wait_for(lambda: probe.client_count == 1, "the client was not counted")
        _outcome(pipe, req, 4)  # the open turn, journaled now: sent live, whole
        for t in range(5, 7):
            _outcome(pipe, _request(pipe), t)
        assert _kinds(pipe)[-2:] == [dict, dict]  # with a client, built as they come
        journal = list(pipe.journal.events)
        while len(got) < len(journal):
            ev = c.recv(T)
            assert ev is not None, f"{len(got)} of {len(journal)} events"
            got.append(ev)
        assert got == journal  # every event once, in order (none twice from the snapshot's tail)
        turns = [e for e in got if e["k"] == "turn"]
        assert [e["turn"] for e in turns] == list(range(7))
        for e in turns:  # whole traces, outcome and alerts included, as the records build them
            assert {"sections", "steps", "usage", "alerts"} <= set(e["trace"])
            assert e["trace"] == pipe.traces[e["turn"]]
        c.close()
        wait_for(lambda: probe.client_count == 0, "the client was not let go")
        _outcome(pipe, _request(pipe), 7)
        assert _kinds(pipe)[-1] is TurnRecord  # gone: records again
    finally:
        pipe.close()


def test_a_recording_agent_still_builds_its_traces_as_they_come(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """The recorder writes every event as it comes: its turns are built at once, probe or not."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000, record=str(rtdir.parent / "run.cpsession"))
    try:
        for t in range(2):
            _outcome(pipe, _request(pipe), t)
        assert _kinds(pipe) == [dict, dict]
    finally:
        pipe.close()


def test_a_turn_event_read_by_two_threads_at_once_is_one_dict(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """The probe's I/O thread (a client's snapshot) and the agent's thread (handing the event to the
    probe) may build a turn's event at once; the probe knows an event in both by its identity."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    try:
        _outcome(pipe, _request(pipe), 0)
        req = _request(pipe)
        rec = pipe.traces.raw(-1)
        assert type(rec) is TurnRecord
        _outcome(pipe, req, 1)
        build = TurnRecord.trace

        def slow_build(self: TurnRecord) -> dict[str, Any]:
            time.sleep(0.02)  # (a wider window for the threads to meet in: a big trace, a busy machine)
            return build(self)

        monkeypatch.setattr(TurnRecord, "trace", slow_build)
        for _ in range(3):
            ev = TurnEvent(TurnRecord.__new__(TurnRecord))  # a record to build: the real one's state
            for slot in TurnRecord.__slots__:
                if hasattr(rec, slot):
                    setattr(ev._record, slot, getattr(rec, slot))
            out: list[Any] = []
            start = threading.Barrier(4)

            def read(ev: TurnEvent = ev, out: list[Any] = out, start: threading.Barrier = start) -> None:
                start.wait()
                out.append(ev.resolve())

            threads = [threading.Thread(target=read) for _ in range(4)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(T)
            assert len(out) == 4 and all(e is out[0] for e in out)
    finally:
        pipe.close()
