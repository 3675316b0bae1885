"""Attaching to a long session: the turns before the newest, drawn as stand-ins, are the session's own.

The inspector's live source attaches to the snapshot's tail (tests/test_probe_attach_long.py): the first
frame shows the newest turn and one stand-in for each turn before it, and the journal before the tail,
fetched by range, fills them in. The stand-ins were numbered down from the newest turn, one number a
turn, and filled by number: a session whose turn numbers skip (a recording or a probe that lost events)
or start again had the wrong turns filled, or none, and the rest left empty. These tests serve such
journals from a real probe over its Unix socket (a real Pipeline's events, renumbered) and hold that
every stand-in ends as the journal's turn at its place, and that the source says how far the history
has come while it arrives.
"""

from __future__ import annotations

import copy
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.probe.server import ProbeServer
from tests.support.probe_agent import T, run_turns, serving_pipeline, wait_progressing

TURNS = 220  # a real agent's ~6 events a turn: past TAIL_MIN, so the snapshot is sent as its tail
CUT = 100  # where the numbering changes


@pytest.fixture
def base() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="cph-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _journal(
    monkeypatch: pytest.MonkeyPatch, base: Path, number: Callable[[int], int]
) -> list[dict[str, Any]]:
    """A real Pipeline's journal of TURNS turns, each turn renumbered `number(turn)` (in every event that
    names it and in its trace)."""
    pipe = serving_pipeline(monkeypatch, base / "agent" / "rt")
    try:
        run_turns(pipe, range(TURNS))
        events = [copy.deepcopy(dict(e)) for e in pipe.journal.events]
    finally:
        pipe.close()
    for ev in events:
        if type(ev.get("turn")) is int:
            ev["turn"] = number(ev["turn"])
        if ev.get("k") == "turn":
            ev["trace"]["turn"] = ev["turn"]
    return events


def _attach(
    monkeypatch: pytest.MonkeyPatch, base: Path, log: list[dict[str, Any]]
) -> tuple[Any, list[Any], ProbeServer]:
    """A probe serving `log`, the live source attached to it, and what its follow() yielded up to
    HistoryFilled (read on a thread, as the app's reader does)."""
    from inspector.sources import HistoryFilled
    from inspector.sources.live import LiveSource

    xdg = base / "xdg"
    xdg.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    server = ProbeServer({"model": "m", "provider": "anthropic"}, lambda: log, pid=os.getpid())
    server.start()
    src = LiveSource(os.getpid(), timeout=T, backfill_idle=None)
    got: list[Any] = []

    def follow() -> None:
        for ev in src.follow():
            got.append(ev)
            if isinstance(ev, HistoryFilled):
                return

    threading.Thread(target=follow, daemon=True).start()
    return src, got, server


def _wait_filled(src: Any, got: list[Any]) -> None:
    """Until follow() says the history is complete, while it comes (the journal fetched, follow()'s
    events): a whole fill in 3 * T ran out at load ~8 on one core (tests.support.probe_agent)."""
    from inspector.sources import HistoryFilled

    wait_progressing(
        lambda: any(isinstance(e, HistoryFilled) for e in got),
        lambda: (src._jpos, len(got)),
        "the history was not fetched",
    )


@pytest.mark.parametrize(
    ("name", "number"),
    [
        ("numbers that skip", lambda t: t if t < CUT else t + 37),  # 37 turns lost between 99 and 137
        ("numbering that restarts", lambda t: t if t < CUT else t - CUT),  # 0..99, then 0..119 again
    ],
)
def test_the_stand_ins_become_the_journals_own_turns(
    monkeypatch: pytest.MonkeyPatch, base: Path, name: str, number: Callable[[int], int]
) -> None:
    """Every turn of the timeline, once the history is in, is the journal's turn at that place, its number
    and its summary: the old source numbered the stand-ins down from the newest turn and filled them by
    number (numbers that skip: the 37 stand-ins before turn 137 stayed empty and turns 0-36 never showed;
    a numbering that restarts: the newest is turn 119 of 220, so no stand-in at all and one turn shown)."""
    from inspector.timeline import summarize

    log = _journal(monkeypatch, base, number)
    want = [summarize(e["trace"]) for e in log if e["k"] == "turn"]
    src, got, server = _attach(monkeypatch, base, log)
    try:
        assert src.client.snapshot_at > 0, "attached to the snapshot's tail"
        timeline = src.load_initial()  # the dicts the app's timeline holds, filled in place
        assert len(timeline) == TURNS, name
        assert timeline[-1]["turn"] == number(TURNS - 1)
        _wait_filled(src, got)
        assert [t["turn"] for t in timeline] == [number(t) for t in range(TURNS)], name
        assert [summarize(t) for t in timeline] == want, name
        assert all(t["final_tokens"] > 0 for t in timeline), "no stand-in left empty"
        # A turn of the history is fetched under its own number: stepping onto it shows it.
        first_after_cut = number(CUT)
        trace = src.full_trace(first_after_cut) if name == "numbers that skip" else None
        if trace is not None:
            assert trace["turn"] == first_after_cut and trace.get("sections"), "the turn's whole trace"
    finally:
        src.client.close()
        server.close()


def test_the_history_says_how_far_it_has_come(monkeypatch: pytest.MonkeyPatch, base: Path) -> None:
    """While the history arrives, follow() says how many stand-ins hold their turn (first 0 of all of
    them, then more, never fewer), before it says the history is complete; the old source said nothing
    until the end (at 20,000 turns, minutes at the agent's CPU budget)."""
    from inspector.sources import HistoryFilled, HistoryProgress

    monkeypatch.setattr("inspector.sources.live.PROGRESS_EVERY", 0.0, raising=False)
    log = _journal(monkeypatch, base, lambda t: t)
    src, got, server = _attach(monkeypatch, base, log)
    try:
        _wait_filled(src, got)
        progress = [(e.filled, e.total) for e in got if isinstance(e, HistoryProgress)]
        assert progress and progress[0] == (0, TURNS - 1), progress
        assert len(progress) >= 2 and progress[-1][0] > 0, progress
        assert [f for f, _ in progress] == sorted(f for f, _ in progress)
        assert isinstance(got[-1], HistoryFilled)
    finally:
        src.client.close()
        server.close()


def test_a_resync_after_lost_events_takes_only_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, base: Path
) -> None:
    """A live source that fell behind the agent's ring loses events and re-syncs. It asks for the
    snapshot's tail and the journal between what it holds and that tail, by range: what it takes in is
    what it lacked (the old re-sync took the whole snapshot again, at 20,000 turns ~120,000 events at the
    agent's CPU budget). The turns it lost come as stand-ins, filled in place; the timeline ends as the
    agent's turns, and the source's journal as the agent's, event for event."""
    from engine.probe import ring
    from engine.probe.agent_send import AGENT_WINDOW
    from inspector.sources import EventsLost, HistoryFilled, NewTurn
    from inspector.sources.live import LiveSource
    from inspector.timeline import summarize

    if not ring.rings_supported():
        pytest.skip("needs memfd_create and file seals (Linux)")
    monkeypatch.setattr(ring, "RING_SIZE", 4096)  # a few turns go round it
    pipe = serving_pipeline(monkeypatch, base / "rt")
    stop = threading.Event()
    src = None
    try:
        run_turns(pipe, range(TURNS))
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None)
        timeline = src.load_initial()
        # follow() on a thread of its own, as the app's reader runs it, pulled only while `reading` is
        # set: between pulls the generator is idle, reading nothing, as a reader that fell behind.
        follow = src.follow()
        out: queue.Queue[Any] = queue.Queue()
        reading = threading.Event()

        def pull() -> None:
            while not stop.is_set():
                if reading.wait(0.05):
                    ev = next(follow, None)
                    out.put(ev)
                    if ev is None or isinstance(ev, HistoryFilled):
                        reading.clear()  # the history is in: read no more until told
                    if ev is None:
                        return

        threading.Thread(target=pull, daemon=True).start()

        def until(done: Callable[[Any], bool]) -> list[Any]:
            got = []
            reading.set()
            while True:
                try:
                    ev = out.get(timeout=3 * T)
                except queue.Empty:
                    raise AssertionError(
                        f"follow() yielded nothing more after {[type(e).__name__ for e in got[-5:]]}"
                    ) from None
                assert ev is not None, f"follow() ended after {[type(e).__name__ for e in got[-5:]]}"
                got.append(ev)
                if isinstance(ev, NewTurn):
                    timeline.append(ev.trace)
                if done(ev):
                    return got

        until(lambda ev: isinstance(ev, HistoryFilled))
        held = len(src.events)  # the journal the source holds (nothing lost yet)
        fetched = src.fetched_events
        # The agent runs on while the inspector does not read: its frames go round the ring, unread.
        for t in range(TURNS, TURNS + 30):
            run_turns(pipe, range(t, t + 1))
            time.sleep(AGENT_WINDOW)
        n = len(pipe.journal.events)
        got = until(lambda ev: isinstance(ev, HistoryFilled))
        assert any(isinstance(e, EventsLost) for e in got), "the source fell behind the ring"
        # What it took in: the tail (the newest turn on) and the range it lacked, not the journal again.
        tail = int(src.client.hello["snapshot"])
        assert src.client.snapshot_at > 0 and tail < 20, src.client.hello
        assert src.fetched_events - fetched <= n - held, (src.fetched_events - fetched, n - held)
        run_turns(pipe, range(TURNS + 30, TURNS + 31))
        until(lambda ev: isinstance(ev, NewTurn) and ev.trace["turn"] == TURNS + 30)
        traces = [e["trace"] for e in pipe.journal.events if e["k"] == "turn"]
        assert [t["turn"] for t in timeline] == list(range(TURNS + 31))
        assert [summarize(t) for t in timeline] == [summarize(t) for t in traces]
        src._load_events()
        assert src.events == list(pipe.journal.events)
    finally:
        stop.set()
        if src is not None:
            src.client.close()
        pipe.close()


def test_a_stand_in_stepped_onto_before_its_turn_arrives(monkeypatch: pytest.MonkeyPatch, base: Path) -> None:
    """Stepping onto a stand-in before the history reaches it fetches its trace under its guessed number,
    which in a session whose numbers skip the agent may not have; once the history is in, that number is
    no turn of the session, and a save (every trace fetched) does not report it as one it could not get."""
    from inspector.sources import HistoryFilled
    from inspector.sources.live import LiveSource

    log = _journal(monkeypatch, base, lambda t: t if t < CUT else t + 37)
    xdg = base / "xdg"
    xdg.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    server = ProbeServer({"model": "m", "provider": "anthropic"}, lambda: log, pid=os.getpid())
    server.start()
    try:
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None)
        timeline = src.load_initial()
        guess = 110  # a stand-in's number (numbered down from 256); the session has no turn 110
        assert guess in [t["turn"] for t in timeline]
        shown = src.full_trace(guess)  # follow() not running yet: the fetch reads its own answer
        assert "not received" in str(shown["error"])
        for ev in src.follow():
            if isinstance(ev, HistoryFilled):
                break
        assert guess not in [t["turn"] for t in timeline]
        src._load_events()  # a save's fetch of every trace: nothing reported missing
        assert [e for e in src.events if e["k"] == "turn"] == [e for e in log if e["k"] == "turn"]
    finally:
        src.client.close()
        server.close()


def test_a_fetch_waiting_for_its_answer_leaves_the_socket_to_follow(
    monkeypatch: pytest.MonkeyPatch, base: Path
) -> None:
    """A fetch (the fold of the newest turn asking for the journal before it: minutes of it at 20,000
    turns) waits for its answers on the socket without holding the lock follow() reads the live turns
    under. It held it through each 50 ms wait and took it again at once: follow() got it by chance, and
    the view stopped following the agent for as long as the fetch lasted (10-30 s seen at 40,000 turns)."""
    from inspector.sources.live import LiveSource

    log = _journal(monkeypatch, base, lambda t: t)
    xdg = base / "xdg"
    xdg.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    server = ProbeServer({"model": "m", "provider": "anthropic"}, lambda: log, pid=os.getpid())
    server.start()
    src = None
    try:
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None)
        # A fetcher waiting for an answer that is slow to come (none comes here).
        fetcher = threading.Thread(target=src._take_answers, args=(lambda: False, time.monotonic() + 1.0))
        fetcher.start()
        held = []
        for _ in range(100):
            time.sleep(0.005)
            held.append(src._io.locked())
        fetcher.join(T)
        assert sum(held) < 30, f"the lock was held {sum(held)} of 100 looks while the fetch waited"
    finally:
        if src is not None:
            src.client.close()
        server.close()


def test_a_drop_during_the_first_fill_resumes_it(monkeypatch: pytest.MonkeyPatch, base: Path) -> None:
    """Events lost while the history before the tail is still arriving: the re-sync keeps the journal
    fetched so far and the stand-ins still waiting, and fetches on from where it had reached. The old
    re-sync began again from nothing (the whole journal fetched again) and handed the app a stand-in for
    every turn once more: its timeline, which keeps what it was handed, held the session twice, the
    first copy's stand-ins never filled."""
    from engine.probe import ring
    from engine.probe.agent_send import AGENT_WINDOW
    from inspector.sources import EventsLost, HistoryFilled, HistoryProgress, NewTurn
    from inspector.sources.live import LiveSource
    from inspector.timeline import summarize

    if not ring.rings_supported():
        pytest.skip("needs memfd_create and file seals (Linux)")
    monkeypatch.setattr(ring, "RING_SIZE", 4096)  # a few turns go round it
    monkeypatch.setattr("inspector.sources.live_fetch.RANGE_MAX", 120)  # the history in ~11 ranges
    monkeypatch.setattr("inspector.sources.live.PROGRESS_EVERY", 0.0)
    pipe = serving_pipeline(monkeypatch, base / "rt")
    stop = threading.Event()
    src = None
    try:
        run_turns(pipe, range(TURNS))
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None)
        timeline = src.load_initial()
        assert len(timeline) == TURNS and src.client.snapshot_at > 0
        # follow() on a thread of its own, as the app's reader runs it, pulled one event at a time when
        # asked: between pulls it reads nothing, as a reader that fell behind.
        follow = src.follow()
        got: list[Any] = []
        asks: queue.Queue[bool] = queue.Queue()
        out: queue.Queue[Any] = queue.Queue()

        def pull() -> None:
            while not stop.is_set():
                try:
                    asks.get(timeout=0.05)
                except queue.Empty:
                    continue
                ev = next(follow, None)
                out.put(ev)
                if ev is None:
                    return

        threading.Thread(target=pull, daemon=True).start()

        def until(done: Callable[[Any], bool]) -> None:
            while True:
                asks.put(True)
                try:
                    ev = out.get(timeout=3 * T)
                except queue.Empty:
                    raise AssertionError(
                        f"follow() yielded nothing more after {[type(e).__name__ for e in got[-5:]]}"
                    ) from None
                assert ev is not None, f"follow() ended after {[type(e).__name__ for e in got[-5:]]}"
                got.append(ev)
                if isinstance(ev, NewTurn):
                    timeline.append(ev.trace)
                if done(ev):
                    return

        # Part of the history is in, not all of it.
        until(lambda ev: isinstance(ev, HistoryProgress) and ev.filled > 0)
        part = src.history_progress()
        assert part is not None and 0 < part[0] < part[1], part
        fetched = src.fetched_events
        # The agent runs on while the inspector reads nothing: its frames go round the ring, unread.
        for t in range(TURNS, TURNS + 30):
            run_turns(pipe, range(t, t + 1))
            time.sleep(AGENT_WINDOW)
        n = len(pipe.journal.events)
        until(lambda ev: isinstance(ev, HistoryFilled))
        assert any(isinstance(e, EventsLost) for e in got), "the source fell behind the ring"
        # What it fetched after the drop: the journal it had not reached, not the journal again.
        assert src.fetched_events <= n, (fetched, src.fetched_events, n)
        run_turns(pipe, range(TURNS + 30, TURNS + 31))
        until(lambda ev: isinstance(ev, NewTurn) and ev.trace["turn"] == TURNS + 30)
        traces = [e["trace"] for e in pipe.journal.events if e["k"] == "turn"]
        assert [t["turn"] for t in timeline] == list(range(TURNS + 31))
        assert [summarize(t) for t in timeline] == [summarize(t) for t in traces]
        src._load_events()
        assert src.events == list(pipe.journal.events)
    finally:
        stop.set()
        if src is not None:
            src.client.close()
        pipe.close()


def test_a_range_answered_in_frames_handled_out_of_order(monkeypatch: pytest.MonkeyPatch, base: Path) -> None:
    """Two threads read the socket (follow() and a fetcher, such as the fold of the turn the person
    stepped onto), each takes one frame under the socket's lock and handles it after letting it go: the
    later frame of a range may be handled first. It was dropped (it did not start where the journal
    held had reached), the range was never complete, no other was asked for, and the history's fill
    stopped for good (attached at 50,000 turns, stepping back one turn stopped it at 6,054 of 53,886).
    Now it waits for the frame before it."""
    from inspector.sources import HistoryFilled
    from inspector.timeline import summarize

    # A range comes in several frames.
    monkeypatch.setattr("engine.probe.fetch_answers.RANGE_FRAME_EVENTS", 20)
    log = _journal(monkeypatch, base, lambda t: t)
    want = [summarize(e["trace"]) for e in log if e["k"] == "turn"]
    from engine.probe.server import ProbeServer as _Server
    from inspector.sources.live import LiveSource

    xdg = base / "xdg"
    xdg.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    server = _Server({"model": "m", "provider": "anthropic"}, lambda: log, pid=os.getpid())
    server.start()
    src = None
    try:
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None)
        timeline = src.load_initial()
        assert src.client.snapshot_at > 0 and src._jpos == 0
        assert src._ask_range(src._history_at) == "asked"
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + T
        while len(frames) < 2:
            assert time.monotonic() < deadline, frames
            ev, _ = src.client.recv_at(0.1, on_socket=True)
            if ev is not None and ev.get("k") == "journal":
                frames.append(ev)
        first, second = frames
        assert second["at"] == first["at"] + len(first["events"]) > 0
        src._extend(second)  # the fetcher's frame, handled first
        src._extend(first)
        assert src._jpos == second["at"] + len(second["events"]), "the later frame was dropped"
        got: list[Any] = []
        for ev in src.follow():
            got.append(ev)
            if isinstance(ev, HistoryFilled):
                break
        assert len(timeline) == TURNS
        assert [summarize(t) for t in timeline] == want
    finally:
        if src is not None:
            src.client.close()
        server.close()


def test_a_stand_in_folded_before_its_turn_arrives(monkeypatch: pytest.MonkeyPatch, base: Path) -> None:
    """The content of a stand-in the person stepped onto while the history is still arriving (the
    section text, which a fold of the journal up to that turn gives): the fold waits for the journal
    through it. It folded the journal held so far and failed ("turn N is not in this journal (it has
    turns 0..41)"), and the content panel said so."""
    from inspector.sources.live import LiveSource

    log = _journal(monkeypatch, base, lambda t: t)
    xdg = base / "xdg"
    xdg.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    server = ProbeServer({"model": "m", "provider": "anthropic"}, lambda: log, pid=os.getpid())
    server.start()
    src = None
    try:
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None)
        timeline = src.load_initial()
        assert src.history_progress() == (0, TURNS - 1, 0)  # nothing of the history has arrived
        turn = timeline[-2]["turn"]  # the newest stand-in
        text = src.section_content(turn, "history")  # follow() not running: the fold fetches itself
        want = next(e["trace"] for e in log if e["k"] == "turn" and e["turn"] == turn)
        assert [s["id"] for s in src.full_trace(turn)["sections"]] == [s["id"] for s in want["sections"]]
        assert text and "not in" not in text, text[:200]
    finally:
        if src is not None:
            src.client.close()
        server.close()
