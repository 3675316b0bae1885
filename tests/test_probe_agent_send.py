"""The agent's thread sending what one of its Pipeline calls published (engine.probe.agent_send).

An agent that waits on its model between turns must not wake the probe's I/O thread for each turn;
these tests hold that its events still reach lean and elided clients whole and in order, that a client
that stops reading makes the agent hand over to the I/O thread instead of waiting, that events
published outside a call still arrive, that the two threads never interleave on a stream, and that
redaction still applies. Real sockets, real ProbeClients, real threads.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine.probe import agent_send, fold_send
from engine.probe.agent_limits import AGENT_WINDOW, AGENT_WINDOW_SENDS
from engine.probe.client import ProbeClient
from engine.probe.client_state import HIGH_WATER
from engine.probe.elide import ELIDED_KINDS
from tests.support.probe_agent import T, connect, one_turn, probe_asleep, serving_pipeline, settle, wait_for


def _events_at(c: ProbeClient, n: int) -> list[tuple[dict[str, Any], int | None]]:
    """The next n events with their journal positions (a batch with no events reads as None: skipped)."""
    out: list[tuple[dict[str, Any], int | None]] = []
    deadline = time.monotonic() + T
    while len(out) < n:
        ev, at = c.recv_at(0.05)
        if ev is not None:
            out.append((ev, at))
        assert time.monotonic() < deadline, f"{len(out)} of {n} events arrived"
    return out


def test_a_paced_agents_turns_reach_lean_and_elided_clients_without_waking_the_io_thread(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        lean = connect(pipe, lean=True)
        elided = connect(pipe, lean=True, elide=True, quiet=False)  # told where the journal ends
        settle(probe, 2)
        n0 = len(pipe.journal.events)
        passes, fallbacks = probe.wakeups, probe.agent_fallbacks
        got_lean: list[dict[str, Any]] = []
        got_elided: list[tuple[dict[str, Any] | None, int | None]] = []
        for t in range(6):
            before = len(pipe.journal.events)
            one_turn(pipe, t)
            # The agent waits on its model now: what the turn published is on the sockets already.
            for _ in range(len(pipe.journal.events) - before):
                got_lean.append(lean.recv(T))  # type: ignore[arg-type]
            kept = [e for e in pipe.journal.events[before:] if e["k"] not in ELIDED_KINDS]
            for _ in kept:
                got_elided.append(elided.recv_at(T))
            # The batches of calls that published only elided kinds say where the journal ends.
            deadline = time.monotonic() + T
            while elided.journal_end < len(pipe.journal.events):
                assert elided.recv(0.05) is None  # an empty batch: recv() returns None once it is read
                assert time.monotonic() < deadline, "the stream did not say where the journal ends"
            time.sleep(AGENT_WINDOW)  # the model call
            # Each turn begins with the I/O thread asleep, as a paced agent's does: a pass of its own
            # (a rest off the attaches' CPU budget, late on a loaded machine) left its wake-up flag set
            # into a turn, and that turn's calls were its to send (20 of 24 sent here at load ~10). A turn
            # that woke it would still be counted below (a fallback, a pass).
            wait_for(lambda: probe_asleep(probe), "the I/O thread did not go back to sleep")
        journal = list(pipe.journal.events)
        # The I/O thread slept through the six turns: none of them woke it (no fallback, every call sent
        # its events itself). Passes of its own may fall in the window on a loaded machine (CPU-budget
        # rests from the two attaches ending: 2 against 1 in a fresh-clone CI run, 5 against 3 at load ~6);
        # a turn that woke it would wake it on every turn (six more), so half that still tells them apart.
        assert probe.wakeups <= passes + 3
        assert probe.agent_fallbacks == fallbacks
        assert probe.agent_sends >= 6 * 4  # every call sent its events itself
        assert got_lean == journal[n0:]  # each turn is the newest of its send: whole
        assert got_elided == [(e, i) for i, e in enumerate(journal) if i >= n0 and e["k"] not in ELIDED_KINDS]
        assert lean.recv(0.2) is None and elided.recv(0.2) is None
    finally:
        pipe.close()


def test_an_event_published_outside_a_call_still_arrives(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """A capture layer may journal on its own, outside any Pipeline call: no flush follows, so the
    publish wakes the I/O thread as before."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        c = connect(pipe, lean=True)
        settle(probe, 1)
        passes = probe.wakeups
        ev = {"k": "note", "turn": 0, "text": "journaled by a capture layer"}
        pipe.journal.append(ev)
        assert c.recv(T) == ev
        assert probe.wakeups > passes
        # And a call after it is the agent's again, once the I/O thread's burst has ended.
        settle(probe, 1)
        sends = probe.agent_sends
        pipe.user("more")
        assert c.recv(T) is not None
        assert probe.agent_sends == sends + 1
    finally:
        pipe.close()


def test_a_client_that_stops_reading_makes_the_agent_hand_over_not_wait(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """The agent's send never blocks: what the socket does not take stays in the client's buffer and
    the I/O thread finishes it; while that backlog stands the agent does not fill again. Once the client
    reads, it gets everything in order."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        c = connect(pipe, lean=True)
        settle(probe, 1)
        n0 = len(pipe.journal.events)
        big = "x" * 60_000
        t = 0
        while probe.agent_fallbacks == 0:
            one_turn(pipe, t, result=f"{t} {big}")  # unique, so each result is a new blob
            t += 1
            assert t < 200, "the socket never filled"
            time.sleep(AGENT_WINDOW)  # paced: the fallback is the socket's doing, not the rate's
        # The last agent flush left bytes in the buffer and woke the I/O thread to finish them.
        assert probe.stats()[0].buffered_bytes > 0
        sends = probe.agent_sends
        for _ in range(6):
            one_turn(pipe, t, result=f"{t} {big}")
            t += 1
            time.sleep(AGENT_WINDOW)
        assert probe.agent_sends == sends  # with a backlog the agent only queues, the I/O thread sends
        (st,) = probe.stats()
        assert st.buffered_bytes <= HIGH_WATER + 2 * len(big)
        assert st.queued > 0
        journal = list(pipe.journal.events)
        got = [c.recv(T) for _ in range(len(journal) - n0)]
        assert c.recv(0.2) is None and c.dropped == 0
    finally:
        pipe.close()
    # Turns the I/O thread sent several of at once come as summaries but the newest: the rest is whole.
    assert [e for e in got if e and e["k"] != "turn_summary"] == [
        e
        for e in journal[n0:]
        if e["k"] != "turn" or any(g is e or g == e for g in got if g and g["k"] == "turn")
    ]
    assert [e["turn"] for e in got if e and e["k"] in ("turn", "turn_summary")] == list(range(t))


def test_io_thread_passes_and_agent_flushes_never_interleave(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """A stress loop: a client pinging (each ping is an I/O-thread pass) while the agent runs turns,
    some back to back (the I/O thread's bursts) and some paced (the agent's own sends). Both streams
    arrive whole and in order: every frame decodes, positions match the journal."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    try:
        lean = connect(pipe, lean=True)
        elided = connect(pipe, lean=True, elide=True)
        settle(probe, 2)
        n0 = len(pipe.journal.events)
        stop = threading.Event()
        got_lean: list[dict[str, Any]] = []
        got_elided: list[tuple[dict[str, Any], int | None]] = []

        def read(c: ProbeClient, out: list[Any], at: bool) -> None:
            while not stop.is_set() or c.recv(0) is not None:
                ev, pos = c.recv_at(0.05)
                if ev is not None and ev.get("k") != "pong":
                    out.append((ev, pos) if at else ev)

        def ping() -> None:
            while not stop.is_set():
                elided.ping()
                time.sleep(0.04)  # within the input budget

        threads = [
            threading.Thread(target=read, args=(lean, got_lean, False)),
            threading.Thread(target=read, args=(elided, got_elided, True)),
            threading.Thread(target=ping),
        ]
        for th in threads:
            th.start()
        try:
            # 40 turns at least, then on in rounds of 8 until both paths have sent (a loaded machine can
            # leave the agent's thread no send of its own for a while: the I/O thread is in a pass).
            sends0, wakes0 = probe.agent_sends, probe.wakeups
            turns = 0
            while turns < 40 or (turns < 400 and not (probe.agent_sends > sends0 and probe.wakeups > wakes0)):
                one_turn(pipe, turns)
                if turns % 4 == 3:
                    time.sleep(0.15)  # a model call: the burst ends, the next turns are the agent's to send
                turns += 1
            journal = list(pipe.journal.events)
            kept = [(e, i) for i, e in enumerate(journal) if i >= n0 and e["k"] not in ELIDED_KINDS]
            wait_for(
                lambda: len(got_lean) >= len(journal) - n0 and len(got_elided) >= len(kept), "not all arrived"
            )
        finally:
            stop.set()
            for th in threads:
                th.join(T)
        assert probe.agent_sends > sends0 and probe.wakeups > wakes0
    finally:
        pipe.close()
    assert [e for e in got_lean if e["k"] != "turn_summary" and e["k"] != "turn"] == [
        e for e in journal[n0:] if e["k"] != "turn"
    ]
    assert [e["turn"] for e in got_lean if e["k"] in ("turn", "turn_summary")] == list(range(turns))
    assert [p for _, p in got_elided] == [i for _, i in kept]
    for (ev, _), (e, _) in zip(got_elided, kept, strict=True):
        assert ev == e or (ev["k"] == "turn_summary" and ev["turn"] == e["turn"])


def test_redaction_applies_to_what_the_agent_sends(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    secret = "the password is hunter2"
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000, redact=True)
    probe = pipe.probe
    try:
        c = connect(pipe, lean=True)
        settle(probe, 1)
        sends = probe.agent_sends
        before = len(pipe.journal.events)
        one_turn(pipe, 0, result=secret)
        got = [c.recv(T) for _ in range(len(pipe.journal.events) - before)]
        assert probe.agent_sends > sends
    finally:
        pipe.close()
    assert all(g is not None for g in got)
    assert secret not in repr(got)
    blobs = [g for g in got if g and g["k"] == "blob"]
    assert blobs and all(isinstance(b["data"], dict) and "sha256" in b["data"] for b in blobs)


def test_events_iterates_past_a_batch_with_no_events(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    """A call that journals only elided kinds sends an elided client a batch that says only where the
    journal ends; `ProbeClient.events()` must go on to the next event, not end as if disconnected."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    try:
        c = connect(pipe, lean=True, elide=True, quiet=False)
        settle(pipe.probe, 1)
        got: list[dict[str, Any]] = []
        th = threading.Thread(target=lambda: got.extend(c.events()), daemon=True)
        th.start()
        pipe.user("only a part and a blob: both elided")
        wait_for(lambda: c.journal_end == len(pipe.journal.events), "the empty batch did not arrive")
        time.sleep(0.1)
        one_turn(pipe, 0)
        wait_for(lambda: any(e["k"] == "turn" for e in got), "the turn after the empty batch did not arrive")
        assert th.is_alive()
    finally:
        pipe.close()
    th.join(T)


def test_send_hands_the_request_over_before_the_model_answers(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """`Pipeline.send` waits on the model between next_request and record_usage: the request's events
    must reach the client while the model call runs, not when it returns."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    try:
        c = connect(pipe, lean=True)
        settle(pipe.probe, 1)
        seen: list[str] = []

        def model(body: dict[str, Any]) -> dict[str, Any]:
            while "request" not in seen:
                ev = c.recv(T)
                assert ev is not None, "the request did not arrive during the model call"
                seen.append(ev["k"])
            return {"usage": {"input_tokens": 100, "output_tokens": 5}}

        pipe.send(model)
        assert "request" in seen
        assert c.recv(T) is not None  # then the usage and the turn
    finally:
        pipe.close()


@pytest.mark.parametrize("quiet", [False, True])
def test_turns_back_to_back_go_to_the_io_threads_bursts(monkeypatch: pytest.MonkeyPatch, rtdir: Path, quiet: bool) -> None:
    """Past AGENT_WINDOW_SENDS flushes in AGENT_WINDOW the agent stops sending itself: its turns come
    back to back, and the I/O thread's bursts send many of them in one pass for less. Every event
    still arrives, in order. (A quiet client's turn is one flush that sends, four for one told where
    the journal ends.)"""
    # One window for the whole test, however slow (read by agent_send, and by fold_send's straight path).
    monkeypatch.setattr(agent_send, "AGENT_WINDOW", 3600.0)
    monkeypatch.setattr(fold_send, "AGENT_WINDOW", 3600.0)
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    probe = pipe.probe
    turns = 20 if quiet else 10
    try:
        c = connect(pipe, lean=True, elide=True, quiet=quiet)
        settle(probe, 1)
        n0 = len(pipe.journal.events)
        passes = probe.wakeups
        for t in range(turns):
            one_turn(pipe, t)
        assert probe.agent_sends == AGENT_WINDOW_SENDS
        assert probe.agent_fallbacks > 0  # the rest woke the I/O thread
        wait_for(lambda: probe.wakeups > passes, "the I/O thread was not woken")
        journal = list(pipe.journal.events)
        kept = [(e, i) for i, e in enumerate(journal) if i >= n0 and e["k"] not in ELIDED_KINDS]
        got = _events_at(c, len(kept))
    finally:
        pipe.close()
    assert [p for _, p in got] == [i for _, i in kept]
    assert [e["turn"] for e, _ in got if e and e["k"] in ("turn", "turn_summary")] == list(range(turns))


def test_a_forked_childs_calls_send_nothing_on_the_parents_stream(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """The child inherits the server and its client sockets but not the I/O thread (which may have held
    the pass lock): its calls' flushes must neither send on the parent's sockets nor block."""
    pipe = serving_pipeline(monkeypatch, rtdir, window=200_000)
    try:
        c = connect(pipe, lean=True)
        settle(pipe.probe, 1)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                pipe.user("from the child")
                code = 0 if pipe.probe.agent_sends == 0 or not pipe.probe._clients else 3
            except BaseException:
                code = 4
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert c.recv(0.2) is None
        pipe.user("from the parent")
        assert c.recv(T) is not None
    finally:
        pipe.close()
