"""The lean probe stream (engine.probe.lean) and the inspector's live source that reads it.

A lean client gets turns it is not looking at as summaries and fetches whole traces when it needs them.
These tests hold that nothing the inspector shows or saves changes: every turn reaches it, its summary
reads as the trace's, a fetched trace is the journal's, re-plans and saves from a lean live session are
those from the whole journal, and a client that asks for too much or nonsense cannot hurt the agent.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.probe.client import ProbeClient
from engine.probe.elide import ELIDED_KINDS
from engine.probe.lean import FETCH_MAX, find_turn, turn_summary
from engine.probe.server import ProbeServer
from engine.recording.frames import encode_frame
from inspector.sources import NewTurn
from inspector.timeline import summarize
from tests.support.probe_agent import T, run_turns, serving_pipeline


def _burst(pipe: Any, turns: range) -> None:
    """Run turns with the probe's publishes held back, then hand them all over at once: the probe
    sees them as one burst, as it does when turns come back to back (deterministic on a loaded box)."""
    probe = pipe.probe
    held: list[tuple[Any, ...]] = []
    real = probe.publish
    probe.publish = lambda ev, frame=None: held.append((ev, frame))
    try:
        run_turns(pipe, turns)
    finally:
        probe.publish = real
    # Published as in a call that outlasted HOLD_MAX: each publish wakes the I/O thread (the first's
    # byte does), which takes them as one burst. (Outside any call, while every client is quiet, the
    # agent's thread would send each turn itself: see agent_send.)
    probe.hold()
    probe._held_at = -1e9
    try:
        for ev, frame in held:
            real(ev, frame)
    finally:
        probe._held = False


def _journal_turns(pipe: Any) -> dict[int, dict[str, Any]]:
    return {e["turn"]: e for e in pipe.journal.events if e.get("k") == "turn"}


def _lean_clients(server: Any, n: int) -> None:
    """Until the probe has read n clients' hellos asking for the lean stream (it reads a client's hello
    when its socket turns readable, maybe after sending it the snapshot: events before that go whole)."""
    deadline = time.monotonic() + T
    while server._nlean < n:
        assert time.monotonic() < deadline, "the probe did not read the lean hello"
        time.sleep(0.01)


def _read_until(c: ProbeClient, pred: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        ev = c.recv(T)
        assert ev is not None, f"stream ended or timed out after {[e.get('k') for e in out]}"
        out.append(ev)
        if pred(ev):
            return out


# ------------------------------------------------------------------------------------------ the wire


def test_summary_reads_as_the_trace_for_the_timeline(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    """What the timeline makes of a summary is what it makes of the whole trace (real engine traces and
    the synthetic ones with alerts, cache breaks, compactions and errors)."""
    from inspector.sources.synthetic import SyntheticSource

    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(6))
        traces = [e["trace"] for e in _journal_turns(pipe).values()]
    finally:
        pipe.close()
    traces += SyntheticSource().load_initial()
    assert any(t.get("alerts") for t in traces) and any(t.get("cache_break") for t in traces)
    for trace in traces:
        assert summarize(turn_summary(trace)) == summarize(trace)
        assert len(encode_frame(turn_summary(trace))) < len(encode_frame(trace)) / 3


_words = st.sampled_from(["Normal", "TrimSchemas", "held", "compacted", "place_markers", "x", ""])
_num = st.one_of(st.none(), st.integers(0, 10**6), st.floats(0, 2, allow_nan=False))
_traces = st.fixed_dictionaries(
    {
        "turn": st.integers(0, 10**5),
        "final_tokens": st.integers(0, 10**6),
        "error": st.one_of(st.none(), st.text(max_size=5)),
        "tier": _words,
        "cache_break": st.one_of(st.none(), st.booleans(), st.fixed_dictionaries({"cause": _words})),
        "alerts": st.lists(st.fixed_dictionaries({"rule": _words, "severity": _words, "message": st.text(max_size=8)})),
        "pressure": st.fixed_dictionaries({"predictive": _num, "raw": _num}),
        "usage": st.one_of(st.none(), st.fixed_dictionaries({"cache_read_tokens": st.integers(0, 10**6)})),
        "actions": st.lists(st.fixed_dictionaries({"step": _words, "tokens_saved": st.integers(0, 99)})),
        "sections": st.lists(st.fixed_dictionaries({"name": _words, "tokens": st.integers(0, 999)}), max_size=3),
    },
    optional={
        "compaction": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"decision": st.sampled_from(["held", "compacted", "skipped"]), "cut": st.integers(0, 9)},
                optional={"text": st.text(max_size=8)},
            ),
        ),
        "tap_errors": st.integers(0, 9),
    },
)


@settings(max_examples=300, deadline=None)
@given(_traces)
def test_a_summary_reads_as_its_trace_and_carries_a_compaction_only_when_one_was_made(trace: dict[str, Any]) -> None:
    """For any trace: the timeline makes the same of its summary; the summary holds the trace's own
    compaction record only for a turn that compacted (a turn that held, the common case, sends none:
    ~23 fewer objects for the probe's thread to encode)."""
    summary = turn_summary(trace)
    assert summarize(summary) == summarize(trace)
    comp = trace.get("compaction")
    compacted = isinstance(comp, dict) and comp.get("decision") == "compacted"
    assert ("compaction" in summary) == compacted
    if compacted:
        assert summary["compaction"] is comp


def test_a_burst_reaches_a_lean_client_as_summaries_and_the_newest_whole(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        with ProbeClient.connect(os.getpid(), runtime_dir=pipe.probe.path.parent, lean=True) as c:
            for _ in range(c.hello["snapshot"]):
                assert c.recv(T) is not None
            _lean_clients(pipe.probe, 1)
            n0 = len(pipe.journal.events)
            _burst(pipe, range(12))
            journal = list(pipe.journal.events[n0:])
            got = [c.recv(T) for _ in journal]
            assert c.recv(0.2) is None  # nothing more: each event once
    finally:
        pipe.close()
    # Every event in order; every turn but the newest as its summary; nothing else changed.
    want = [
        {"k": "turn_summary", "turn": e["turn"], "summary": turn_summary(e["trace"])}
        if e["k"] == "turn" and e["turn"] != 11
        else e
        for e in journal
    ]
    assert got == want
    assert sum(e["k"] == "turn_summary" for e in got) == 11


def test_a_lean_burst_goes_out_in_batch_frames(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    """On the wire a burst is a few `batch` frames (not a frame per event), and ProbeClient hands out
    their events one by one, in order."""
    import socket

    import msgpack

    from engine.recording.frames import HEADER
    from engine.recording.frames import encode_frame as enc

    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(T)
        sock.connect(str(pipe.probe.path))
        sock.sendall(enc({"k": "hello", "protocol": 1, "lean": True}))
        frames: list[dict[str, Any]] = []
        buf = bytearray()

        def read(n: int) -> None:
            nonlocal buf
            while len(frames) < n:
                if len(buf) >= HEADER.size:
                    length, _ = HEADER.unpack(buf[: HEADER.size])
                    if len(buf) >= HEADER.size + length:
                        frames.append(msgpack.unpackb(bytes(buf[HEADER.size : HEADER.size + length])))
                        del buf[: HEADER.size + length]
                        continue
                data = sock.recv(1 << 20)
                assert data, "EOF"
                buf += data

        read(1)
        read(1 + frames[0]["snapshot"])
        _lean_clients(pipe.probe, 1)
        n0 = len(pipe.journal.events)
        _burst(pipe, range(10))
        journal = list(pipe.journal.events[n0:])
        live: list[dict[str, Any]] = []
        while len(live) < len(journal):
            read(len(frames) + 1)
            f = frames[-1]
            live += f["events"] if f["k"] == "batch" else [f]
        sock.close()
    finally:
        pipe.close()
    batches = [f for f in frames if f["k"] == "batch"]
    assert batches and len(frames) - 1 - frames[0]["snapshot"] <= 3  # 60 events in at most 3 frames
    assert [e["k"] for e in live] == [
        "turn_summary" if e["k"] == "turn" and e["turn"] != 9 else e["k"] for e in journal
    ]


def test_a_client_that_does_not_ask_gets_every_turn_whole(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        with ProbeClient.connect(os.getpid(), runtime_dir=pipe.probe.path.parent) as full, ProbeClient.connect(
            os.getpid(), runtime_dir=pipe.probe.path.parent, lean=True
        ) as lean:
            for c in (full, lean):
                for _ in range(c.hello["snapshot"]):
                    assert c.recv(T) is not None
            _lean_clients(pipe.probe, 1)
            n0 = len(pipe.journal.events)
            _burst(pipe, range(5))
            journal = list(pipe.journal.events[n0:])
            got_full = [full.recv(T) for _ in journal]
            got_lean = _read_until(lean, lambda ev: ev.get("k") == "turn" and ev["turn"] == 4)
    finally:
        pipe.close()
    assert got_full == journal
    assert [e["k"] for e in got_lean].count("turn_summary") == 4


def test_fetch_returns_the_journaled_trace_from_the_ring_and_from_the_journal(rtdir: Path) -> None:
    """A fetched trace is the journal's, for a turn still in the probe's ring and for one long gone from
    it (looked up in the journal); a turn that does not exist and a malformed fetch are answered None."""
    journal: list[dict[str, Any]] = []
    server = ProbeServer({"model": "m"}, lambda: journal, runtime_dir=rtdir, queue_limit=8)
    server.start()

    def turn_events(t: int) -> list[dict[str, Any]]:
        trace = {"turn": t, "tier": "Normal", "final_tokens": 100 + t, "pressure": {"predictive": 0.1}, "sections": [{"id": "s", "n": t}]}
        return [
            {"k": "request", "turn": t, "sha": f"{t:064x}"},
            {"k": "blob", "h": f"{t:064x}", "data": "x" * t},
            {"k": "turn", "turn": t, "trace": trace},
            {"k": "usage", "turn": t, "usage": {"input_tokens": 1}},
        ]

    try:
        with ProbeClient.connect_path(server.path, os.getpid(), T, lean=True) as c:
            _lean_clients(server, 1)
            for t in range(40):
                for ev in turn_events(t):
                    journal.append(ev)
                    server.publish(ev)
            _read_until(c, lambda ev: ev.get("turn") == 39 and ev["k"] == "usage")
            c.fetch([38, 3, 0, 39, 99])
            answers = [c.recv(T) for _ in range(5)]
            c.fetch(["x", None])  # type: ignore[list-item]
            bad = [c.recv(T) for _ in range(2)]
            assert c.recv(0.1) is None and not c.disconnected  # and the client is still served
    finally:
        server.close()
    by_turn = {e["turn"]: e["trace"] for e in journal if e["k"] == "turn"}
    assert [a["k"] for a in answers] == ["trace"] * 5
    assert [(a["turn"], a["trace"]) for a in answers] == [
        (38, by_turn[38]),
        (3, by_turn[3]),  # 37 turns (148 events) back: not in an 8-event ring
        (0, by_turn[0]),
        (39, by_turn[39]),
        (99, None),
    ]
    assert [(b["k"], b["trace"]) for b in bad] == [("trace", None), ("trace", None)]


def test_find_turn_in_a_journal_on_disk(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    """The journal lookup bisects a real journal whose older events were moved to disk."""
    pipe = serving_pipeline(monkeypatch, rtdir, journal_keep=64)
    try:
        run_turns(pipe, range(60))
        events = pipe.journal.events
        assert events.in_memory() < len(events)  # most of it is on disk
        turns = _journal_turns(pipe)
        for t in (0, 1, 17, 30, 58, 59):
            assert find_turn(events, t) == turns[t]
        assert find_turn(events, 60) is None
        assert find_turn(events, -1) is None
        assert find_turn([], 0) is None
    finally:
        pipe.close()


def test_a_fetch_flood_is_cut_off_and_the_agent_carries_on(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    """Fetches are input like pings: a client that floods them is rate-limited and closed; the agent
    and another client carry on, and the flooder never held more than FETCH_QUEUE turns."""
    from engine.probe.client import ProbeError

    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(3))
        with ProbeClient.connect(os.getpid(), runtime_dir=pipe.probe.path.parent, lean=True) as good:
            for _ in range(good.hello["snapshot"]):
                assert good.recv(T) is not None
            bad = ProbeClient.connect(os.getpid(), runtime_dir=pipe.probe.path.parent, lean=True)
            # A flood: 2,000 frames (4,000 input tokens) outrun the bucket's burst and refill (64 + 64 a
            # second) at any pace this machine sends at; 200 could be sent slowly enough to pass under load.
            for _ in range(2000):
                bad.fetch(list(range(FETCH_MAX)))
                if bad.disconnected:
                    break
            try:  # cut off: an error frame ("rate_limited"), or closed while it was not reading
                while bad.recv(T) is not None:
                    pass
            except ProbeError as exc:
                assert "sent more" in str(exc)
            assert bad.disconnected
            bad.close()
            assert max((len(c.fetch) for c in pipe.probe._clients.values()), default=0) <= 256
            _lean_clients(pipe.probe, 1)
            _burst(pipe, range(3, 5))
            got = _read_until(good, lambda ev: ev.get("k") == "turn" and ev["turn"] == 4)
            assert [e["k"] for e in got].count("turn_summary") == 1
    finally:
        pipe.close()


# ------------------------------------------------------------------------------------------ the inspector


def _live(pipe: Any, backfill: bool = False, elide: bool = True) -> Any:
    """The inspector's source on this process's agent (XDG_RUNTIME_DIR already points at its probe).
    Without backfill, unless asked: a loaded machine's pause could otherwise fetch traces mid-test.
    `elide=False`: the lean stream alone, as from an agent from before the elided stream."""
    from inspector.sources.live import BACKFILL_IDLE, LiveSource

    before = pipe.probe._nlean
    src = LiveSource(os.getpid(), timeout=T, backfill_idle=BACKFILL_IDLE if backfill else None, elide=elide)
    _lean_clients(pipe.probe, before + 1)
    assert src._elided is elide
    if elide:  # the agent has read the hello that asks for it: what it publishes now is elided
        deadline = time.monotonic() + T
        while not all(c.elide for c in pipe.probe._clients.values() if c.lean):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    return src


def _follow_all(src: Any) -> threading.Thread:
    """Follow in the background, until the agent closes."""
    th = threading.Thread(target=lambda: [None for _ in src.follow()], daemon=True)
    th.start()
    return th


def _caught_up(src: Any, pipe: Any) -> None:
    """Until the live source has been sent everything the agent journaled (on the elided stream: all
    it streams, and word of how far the journal goes)."""
    deadline = time.monotonic() + T
    n = len(pipe.journal.events)
    probe = pipe.probe

    def sent() -> bool:
        # A quiet elided client is not told where the journal ends by a batch of its own: caught up is
        # the probe having nothing left to send it (events of elided kinds the agent's thread left
        # waiting are sent to no quiet client: see agent_send), and its newest turn received.
        from engine.probe.elide import ELIDED_KINDS

        with probe._pass_lock:
            waiting = [e[0] if type(e) is tuple else e for e in list(probe._pending)]
            return all(e["k"] in ELIDED_KINDS for e in waiting) and all(
                c.cursor == probe._head and not c.outbuf for c in probe._clients.values()
            )

    def behind() -> bool:
        if not src._elided:
            return len(src.events) < n
        if src._seen_turns < pipe.turn - 1:
            return True
        return not sent() if src.client.quiet else src.client.journal_end < n

    while behind():
        assert time.monotonic() < deadline, "the live source did not catch up"
        time.sleep(0.02)


def _follow(src: Any, until_turn: int, out: list[dict[str, Any]]) -> threading.Thread:
    def run() -> None:
        for ev in src.follow():
            if isinstance(ev, NewTurn):
                out.append(ev.trace)
                if ev.trace["turn"] == until_turn:
                    return

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def _followed_burst(pipe: Any, turns: range, elide: bool = True) -> tuple[Any, list[dict[str, Any]]]:
    """Attach a live source, run `turns` as one burst while it follows, and return the source with the
    traces it followed (up to the last of `turns`)."""
    src = _live(pipe, elide=elide)
    got: list[dict[str, Any]] = []
    th = _follow(src, turns[-1], got)
    _burst(pipe, turns)
    th.join(T)
    assert not th.is_alive()
    return src, got


@pytest.mark.parametrize("elide", [True, False])
def test_coalesced_turns_reach_the_inspector_and_older_traces_are_fetched_on_demand(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, elide: bool
) -> None:
    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(2))
        src, got = _followed_burst(pipe, range(2, 14), elide)
        journal_turns = _journal_turns(pipe)
        # Every turn reached the timeline, in order, reading as its whole trace would.
        assert [t["turn"] for t in got] == list(range(2, 14))
        assert [summarize(t) for t in got] == [summarize(journal_turns[n]["trace"]) for n in range(2, 14)]
        assert len(src._missing) == 11 and src.fetched == 0  # the newest came whole
        # The person steps back: one fetch brings that turn and the summarized ones before it.
        assert src.full_trace(7) == journal_turns[7]["trace"]
        assert src.fetched == 6  # turns 2..7
        assert all(src.full_trace(n) == journal_turns[n]["trace"] for n in range(0, 14))
        # Re-plans fold from the traces they need (fetched as needed) and equal a whole journal's.
        src3_got: list[dict[str, Any]] = []
        src3 = _live(pipe, elide=elide)
        th = _follow(src3, 25, src3_got)
        _burst(pipe, range(14, 26))
        th.join(T)
        assert len(src3._missing) == 11
        for n in (25, 20, 15):
            assert src3.replayer(n).replan(n).trace == whole_replan(pipe, n)
        # Why the cache missed (re-plans of the turn and the one before) reads the same as well.
        from engine.recording.replay import Replayer
        from engine.recording.why import why_missed
        from inspector.sources.replaying import shared_counter

        events = list(pipe.journal.events)
        assert src3.why_missed(22) == why_missed(events, 22, replayer=Replayer(events, shared_counter()))
        assert len(src3._missing) < 11  # only what the folds needed was fetched
    finally:
        pipe.close()


def test_following_the_live_tail_fetches_only_the_turns_shown(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    """A view that follows the tail asks for ever newer turns: each is fetched alone, none of the
    summarized turns before it (nobody is looking at them). Stepping back brings the ones behind."""
    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(2))
        src, got = _followed_burst(pipe, range(2, 22))
        journal_turns = _journal_turns(pipe)
        assert len(src._missing) == 19 and src.fetched == 0
        assert src.full_trace(1) == journal_turns[1]["trace"]  # shown on attach (whole, in the snapshot)
        for n in (6, 11, 15):  # drawn while following: each newer than the last
            assert src.full_trace(n) == journal_turns[n]["trace"]
        assert src.fetched == 3
        # The person steps back from 15: 14 and the FETCH_BEHIND summarized turns before it.
        from inspector.sources.live import FETCH_BEHIND

        assert src.full_trace(14) == journal_turns[14]["trace"]
        assert src.fetched == 3 + 1 + FETCH_BEHIND  # the 8 still summarized before it: 4..13 but 6 and 11
        assert all(src.full_trace(n) == journal_turns[n]["trace"] for n in range(5, 15))
    finally:
        pipe.close()


@pytest.mark.parametrize("elide", [True, False])
def test_the_shadow_summary_of_a_lean_session_fetches_nothing(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, elide: bool
) -> None:
    """The TUI asks for the session-wide shadow totals as turns arrive. They read a turn's final_tokens
    and usage only, which its summary has: nothing is fetched, and they equal the whole journal's."""
    from engine.shadow import shadow_summary
    from engine.whatif import Overrides

    pipe = serving_pipeline(monkeypatch, rtdir, shadow=Overrides(gates={"drop_rounds": False}))
    try:
        run_turns(pipe, range(2))
        src, got = _followed_burst(pipe, range(2, 14), elide)
        assert len(src._missing) == 11
        whole = shadow_summary(list(pipe.journal.events))
        assert whole is not None and len(whole["turns"]) == 14
        assert src.shadow_summary() == whole
        assert src.fetched == 0 and len(src._missing) == 11 and src.fetched_events == 0
    finally:
        pipe.close()


def whole_replan(pipe: Any, n: int) -> dict[str, Any]:
    from engine.recording.replay import Replayer
    from inspector.sources.replaying import shared_counter

    return Replayer(list(pipe.journal.events), shared_counter()).replan(n).trace


@pytest.mark.parametrize("elide", [True, False])
def test_a_lean_live_session_saves_the_recording_of_the_whole_journal(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, tmp_path: Path, elide: bool
) -> None:
    from engine.recording.cpsession import RecordingReader

    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(2))
        src = _live(pipe, elide=elide)
        _follow_all(src)
        _burst(pipe, range(2, 12))
        _caught_up(src, pipe)
        assert len(src._missing) == 9
        src.save(tmp_path / "lean.cpsession")
        assert not src._missing
        journal = list(pipe.journal.events)
    finally:
        pipe.close()
    # The saved journal is the agent's, event for event (turn events decoded back from their packed form).
    from engine.recording.journal import unpack_event

    saved = [unpack_event(e) for e in RecordingReader.open(tmp_path / "lean.cpsession").events()]
    assert saved == journal


@pytest.mark.parametrize("elide", [True, False])
def test_an_agent_that_exits_sends_the_traces_it_summarized(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, tmp_path: Path, elide: bool
) -> None:
    """Turns come back to back until the agent exits, so the inspector never had a quiet moment to
    fetch the traces it was sent summaries of: closing, the probe sends them (it could not be asked
    any more), and a save after the exit writes the agent's journal."""
    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event

    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(2))
        src = _live(pipe, elide=elide)
        th = _follow_all(src)
        _burst(pipe, range(2, 12))
        _caught_up(src, pipe)
        assert len(src._missing) == 9 and src.fetched == 0
        journal = list(pipe.journal.events)
    finally:
        pipe.close()
    th.join(T)
    assert src.client.disconnected and not src._missing and src.fetched == 9
    src.save(tmp_path / "after.cpsession")
    saved = [unpack_event(e) for e in RecordingReader.open(tmp_path / "after.cpsession").events()]
    assert saved == journal


def test_an_exiting_agent_keeps_sending_while_the_inspector_keeps_reading(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, tmp_path: Path
) -> None:
    """An agent that never paused leaves an elided inspector owed most of its journal and every trace
    (it fetches in the background only while the agent is quiet): ~1.3 MB here, far more than the socket
    holds. The exiting probe keeps sending as long as the inspector keeps taking it: here one that
    spends ~0.8 s on each 256 KB it reads, ~4 s in all, which a flush bounded by FLUSH_ON_CLOSE alone
    (pinned to 2 s) cut short (on a loaded machine a save after an 800-turn demo agent exited missed ~40%
    of it). FLUSH_ON_CLOSE and FLUSH_MAX are pinned so that only the rule is tested, not this machine's
    speed, and each gulp leaves FLUSH_ON_CLOSE 1.2 s to spare for the decoding and the scheduling: with
    0.5 s and ~0.2 s a gulp (0.3 s spare) the test failed 3 runs of 6 pinned to one core beside two CPU
    hogs (the probe's thread and the reader share this process, starved to a third of a core)."""
    from engine.probe import loop
    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event

    monkeypatch.setattr(loop, "FLUSH_ON_CLOSE", 2.0)
    monkeypatch.setattr(loop, "FLUSH_MAX", 30.0, raising=False)
    pipe = serving_pipeline(monkeypatch, rtdir)
    closing = threading.Event()
    try:
        src = _live(pipe, elide=True)
        recv_at = src.client.recv_at

        def slow_recv_at(timeout: float | None = None) -> Any:
            ev, at = recv_at(timeout)
            if closing.is_set() and ev is not None:  # ~0.8 s per 256 KB read: 70 KB journal frames, 2.6 KB traces
                time.sleep({"journal": 0.2, "trace": 0.008}.get(ev.get("k"), 0.0))
            return ev, at

        src.client.recv_at = slow_recv_at  # type: ignore[method-assign]
        th = _follow_all(src)
        _burst(pipe, range(300))
        _caught_up(src, pipe)
        assert len(src._missing) >= 290 and src.fetched == 0  # (the newest of each pass came whole)
        journal = list(pipe.journal.events)
        assert src._jpos < len(journal) // 4  # the inspector has fetched next to nothing of the journal
        closing.set()
    finally:
        pipe.close()
    th.join(T)
    assert src.client.disconnected and not src._missing
    src.save(tmp_path / "after.cpsession")
    saved = [unpack_event(e) for e in RecordingReader.open(tmp_path / "after.cpsession").events()]
    assert saved == journal


@pytest.mark.parametrize("elide", [True, False])
def test_summarized_traces_are_backfilled_when_the_agent_is_quiet(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, elide: bool
) -> None:
    """After a burst, an idle agent's summarized traces (and on the elided stream, the journal's events
    it left out) arrive without being asked for, so they are there after the agent exits; then the
    probe's thread sleeps (no pass while nothing is sent)."""
    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        src = _live(pipe, backfill=True, elide=elide)
        th = _follow_all(src)
        _burst(pipe, range(10))
        n = len(pipe.journal.events)
        deadline = time.monotonic() + T
        while (
            not src._by_turn or src._missing or 9 not in src._by_turn or src._jpos < n
        ) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert src.fetched == 9 and not src._missing
        assert [e for e in src.events if e.get("k") != "turn"] == [e for e in pipe.journal.events if e.get("k") != "turn"]
        turns = _journal_turns(pipe)
        assert all(src.full_trace(n) == turns[n]["trace"] for n in range(10))
        passes = pipe.probe.wakeups
        time.sleep(1.5)
        assert pipe.probe.wakeups == passes  # the inspector asks nothing more, the agent sends nothing
    finally:
        pipe.close()
    th.join(T)


def test_a_lean_client_of_a_recording_agent_gets_its_frames_as_they_are(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, tmp_path: Path
) -> None:
    """A recording agent hands the probe each event's frame: copying it is cheaper than summarizing,
    so a lean client gets the journal as it is, turns whole."""
    pipe = serving_pipeline(monkeypatch, rtdir, record=str(tmp_path / "r.cpsession"))
    try:
        with ProbeClient.connect(os.getpid(), runtime_dir=pipe.probe.path.parent, lean=True) as c:
            for _ in range(c.hello["snapshot"]):
                assert c.recv(T) is not None
            n0 = len(pipe.journal.events)
            _burst(pipe, range(6))
            journal = list(pipe.journal.events[n0:])
            got = [c.recv(T) for _ in journal]
            assert c.recv(0.2) is None
    finally:
        pipe.close()
    assert got == journal


def test_a_trace_that_cannot_be_had_is_shown_in_the_shape_of_its_neighbours(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """After the agent is gone without a word (killed: its probe flushed nothing on the way out), a
    summarized turn never fetched is shown with its summary over the nearest whole trace's shape
    (every key the panels read) and an error saying why, not a crash."""
    from engine.probe import loop

    pipe = serving_pipeline(monkeypatch, rtdir)
    monkeypatch.setattr(loop, "FLUSH_ON_CLOSE", 0.0)
    try:
        src = _live(pipe)
        _follow_all(src)
        _burst(pipe, range(6))
        _caught_up(src, pipe)
        whole = _journal_turns(pipe)
    finally:
        pipe.close()
    deadline = time.monotonic() + T
    while not src.client.disconnected:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert 2 in src._missing
    shown = src.full_trace(2)
    assert set(whole[2]["trace"]) <= set(shown)
    assert shown["turn"] == 2 and shown["sections"] == [] and "not received" in shown["error"]
    assert shown["thresholds"] == whole[5]["trace"]["thresholds"]
    assert summarize(shown) == {**summarize(whole[2]["trace"]), "error": shown["error"]}


@pytest.mark.parametrize("elide", [False, True])
@pytest.mark.parametrize("one_client_a_pass", [False, True], ids=["ample_budget", "one_client_a_pass"])
def test_lean_clients_in_the_same_place_share_one_encoding(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, elide: bool, one_client_a_pass: bool
) -> None:
    """Lean clients at the same place in the live stream are sent one encoding of a run, also when the
    probe's CPU budget serves them in different passes (on a loaded machine a pass may serve one client).

    Deterministic: the burst reaches the ring in one pass (the I/O thread takes none of it until it is
    all published), and the budget is pinned (never spent, or spent after every client). The count is
    taken once every client has the burst: the agent closing then sends each lean client the traces it
    had only as summaries, which is that client's own fetch, not the live stream."""
    import engine.probe.queues as queues

    pipe = serving_pipeline(monkeypatch, rtdir)
    probe = pipe.probe
    try:
        clients = [
            ProbeClient.connect(os.getpid(), runtime_dir=probe.path.parent, lean=True, elide=elide) for _ in range(3)
        ]
        for c in clients:
            assert c.elide is elide
            for _ in range(c.hello["snapshot"]):
                assert c.recv(T) is not None
        _lean_clients(probe, 3)
        batches: list[int] = []
        real = queues.pack_payload_fast
        monkeypatch.setattr(
            queues, "pack_payload_fast", lambda obj: (batches.append(1) if obj.get("k") == "batch" else None) or real(obj)
        )
        probe._spent = lambda: one_client_a_pass
        published = threading.Event()
        absorb = probe._absorb
        probe._absorb = lambda: absorb() if published.is_set() else 0
        n0 = len(pipe.journal.events)
        _burst(pipe, range(8))
        published.set()
        journal = list(pipe.journal.events[n0:])
        want = [e for e in journal if e["k"] not in ELIDED_KINDS] if elide else journal
        got = [[c.recv(T) for _ in want] for c in clients]
        live_encodings = len(batches)
        for c in clients:
            c.close()
    finally:
        pipe.close()
    assert got[0] == got[1] == got[2]
    assert [e["k"] for e in got[0]].count("turn_summary") == 7
    assert live_encodings == 1  # not one per client


def test_a_redacting_probe_redacts_summaries_and_fetched_traces(rtdir: Path) -> None:
    journal: list[dict[str, Any]] = []
    server = ProbeServer({"model": "m"}, lambda: journal, runtime_dir=rtdir, redact=True)
    server.start()
    try:
        with ProbeClient.connect_path(server.path, os.getpid(), T, lean=True) as c:
            _lean_clients(server, 1)
            for t in range(3):
                trace = {
                    "turn": t, "tier": "Normal", "final_tokens": 1, "pressure": {"predictive": 0.1}, "usage": None,
                    "actions": [], "alerts": [{"rule": "r", "severity": "warn", "message": "SECRET alert"}],
                    "compaction": {"decision": "compacted", "text": "SECRET pay-back"},
                }
                ev = {"k": "turn", "turn": t, "trace": trace}
                journal.append(ev)
                server.publish(ev)
            got = [c.recv(T) for _ in range(3)]
            c.fetch([0])
            got.append(c.recv(T))
    finally:
        server.close()
    assert [e["k"] for e in got] == ["turn_summary", "turn_summary", "turn", "trace"]
    assert "SECRET" not in repr(got)


@pytest.mark.parametrize("record", [False, True])
def test_attach_with_record_keeps_every_turn_of_an_agent_that_exits_during_a_burst(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path, tmp_path: Path, record: bool
) -> None:
    """`cp-inspect attach PID --record FILE` saves on exit. Under the lean stream a burst's turns arrive as
    summaries fetched later; an agent that exits right after the burst would leave them unfetched and
    the save short, so with --record the inspector asks for every turn whole (and without it, lean)."""
    from typer.testing import CliRunner

    import inspector.cli as cli
    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event
    from inspector.sources import Disconnected
    from inspector.sources.live import LiveSource

    pipe = serving_pipeline(monkeypatch, rtdir)
    journal: list[dict[str, Any]] = []
    seen: list[LiveSource] = []

    # The app's reader, without a terminal; what else the two runners are given (agent_ended) unread.
    def headless(src: LiveSource, theme: str | None, *_: object, **__: object) -> None:
        seen.append(src)
        src.load_initial()
        _burst(pipe, range(12))
        journal.extend(pipe.journal.events)
        pipe.close()  # the agent exits before anything summarized could be fetched
        for ev in src.follow():
            if isinstance(ev, Disconnected):
                return

    import inspector.attach_cli as attach_cli
    import inspector.attach_command as attach_command

    # Without --record the typer command hands a plain attach to attach_command (the console script's
    # typer-free path), which runs the app through run_live, not attach_cli._run_app: both get the
    # headless reader.
    monkeypatch.setattr(attach_cli, "_run_app", headless)
    monkeypatch.setattr(attach_command, "run_live", headless)
    out = tmp_path / "attached.cpsession"
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
    try:
        res = CliRunner().invoke(cli.app, ["attach", str(os.getpid())] + (["--record", str(out)] if record else []))
    finally:
        pipe.close()
    assert res.exit_code == 0, res.output
    # --record's save-on-SIGTERM handlers are the command's own: this process has its own again after it.
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == handlers
    assert seen and seen[0].lean is (not record)
    if record:
        saved = [unpack_event(e) for e in RecordingReader.open(out).events()]
        assert saved == journal  # every turn whole, as the agent journaled it


def test_an_inspector_fetching_a_trace_every_turn_of_a_fast_agent_is_not_cut_off(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """An inspector following a fast agent fetches as it shows turns: here a trace fetch every 1/30 s for
    5 s (two input tokens each: its recv and its frame), ~300 tokens, which a bucket refilled at 16 a
    second (the old INPUT_RATE, ~144 tokens in 5 s) ran dry on: the probe cut the inspector off as
    "rate_limited" mid-session (found in tmux: `cp-inspect attach` on the demo agent stopped at turn
    ~500 of 600 and its save failed). Every fetch must be answered and the stream stay up."""
    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(3))
        with ProbeClient.connect(os.getpid(), runtime_dir=pipe.probe.path.parent, lean=True) as c:
            for _ in range(c.hello["snapshot"]):
                assert c.recv(T) is not None
            _lean_clients(pipe.probe, 1)
            sent = 0
            t0 = time.monotonic()
            while time.monotonic() - t0 < 5.0:
                assert c.fetch([sent % 3]), f"could not send fetch {sent}"
                sent += 1
                time.sleep(1 / 30)
            assert sent >= 100
            traces: list[dict[str, Any]] = []

            def answered(ev: dict[str, Any]) -> bool:
                if ev.get("k") == "trace":
                    traces.append(ev)
                return len(traces) == sent

            got = _read_until(c, answered)
            assert not [e for e in got if e.get("k") == "error"]
            assert all(ev["trace"] is not None for ev in traces)
            assert not c.disconnected and pipe.probe.client_count == 1
    finally:
        pipe.close()
