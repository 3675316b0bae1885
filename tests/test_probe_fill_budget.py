"""An inspector filling a long session's history, within the probe's CPU budget, and the agent's own turns.

The inspector attached to a long session fetches the journal before the snapshot's tail by range,
keeping a request waiting until it has it all (minutes on a 30,000-turn session). Two costs to the
agent were left (issue 15 item 4):

* A pass of the I/O thread filled the client's buffer until the pass's CPU budget was spent, and then
  pumped on, each fill cut by the spent budget to a frame of one event and a send() of its own, until
  1 MB had gone or the socket was full: a pass was 3-4x its budget, the agent's GIL held that long.
* The agent's thread did not send its own turns while a fetch was waiting (the short path wanted
  nothing owed on the socket, though a ring client's live frames go to its ring), and the I/O thread
  held the pass lock through the rests its budget imposed: each live turn was left to the I/O thread.

These tests run a real Pipeline behind a real ProbeServer and a real client on the socket (and its
shared-memory ring), filling as the inspector does.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from engine.probe.client import ProbeClient
from engine.probe.elide import RANGE_MAX
from engine.probe.lean import summary_event
from tests.support.probe_agent import T, paced_turn, run_turns, serving_pipeline

# A live turn's event: whole or summarized (the elided stream), or its marker (the fold stream).
TURN_KINDS = ("turn", "turn_summary", "turn_deferred")
HISTORY = 600  # turns before the client attaches: ~4,200 journal events, most of them on disk
PACE = 0.05  # between turns, each of at least TURN_CPU (see tests/test_probe_live_fill.py's PACE)
# A fill at five times the declared share took ~60-100 s in a fresh-clone CI run (2 cores, the suite running).
FILL_DEADLINE = 240


class _Filler:
    """Fills the journal before the tail by range as the inspector does (a request always waiting at the
    agent), keeping every range answer and the live turns in the order they came."""

    def __init__(self, c: ProbeClient) -> None:
        self.c = c
        self.journal: list[Any] = []
        self.frames: list[int] = []  # events in each range answer
        self.order: list[int] = []
        self.done = threading.Event()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _run(self) -> None:
        c = self.c
        at = c.snapshot_at
        asked = 0

        def ask() -> None:
            nonlocal asked
            if asked < at:
                hi = min(at, asked + RANGE_MAX)
                assert c.fetch_journal(asked, hi)
                asked = hi

        ask()
        ask()
        while not self.stop.is_set():
            ev = c.recv(0.05)
            if ev is None:
                continue
            k = ev.get("k")
            if k == "journal":
                assert ev["at"] == len(self.journal), "range answers in order"
                events = ev["events"][: at - len(self.journal)]
                if events and ev["at"] + len(events) > asked - RANGE_MAX:
                    ask()
                self.journal += events
                self.frames.append(len(events))
                if len(self.journal) >= at:
                    self.done.set()
            elif k in ("batch", "turn", "turn_summary", "turn_deferred"):
                self.order += [e["turn"] for e in ev.get("events", [ev]) if e.get("k") in TURN_KINDS]
            elif k == "dropped":
                raise AssertionError(f"the client lost events: {ev}")


def _attach(pipe: Any, ring: bool, fold: bool = False) -> tuple[ProbeClient, _Filler, threading.Thread]:
    c = ProbeClient.connect_path(
        pipe.probe.path,
        os.getpid(),
        T,
        lean=True,
        elide=True,
        tail=True,
        quiet=True,
        poll=True,
        ring=ring,
        fold=fold,
    )
    assert c.fold == fold
    assert c.snapshot_at > 2 * RANGE_MAX, "most of the journal comes by range"
    for _ in range(c.hello["snapshot"]):
        assert c.recv(T) is not None
    f = _Filler(c)
    th = threading.Thread(target=f.run, daemon=True)
    th.start()
    return c, f, th


def _as_sent(ev: dict[str, Any]) -> Any:
    """A journal event as a range answer carries it (a turn as its summary), through msgpack."""
    if ev.get("k") == "turn":
        ev = summary_event(ev)
    return msgpack.unpackb(msgpack.packb(ev, use_bin_type=True), raw=False)


@pytest.fixture
def long_pipe(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> Iterator[Any]:
    from engine.recording.journal import Journal

    monkeypatch.setattr("engine.pipeline.Journal", lambda *a, **k: Journal(keep=256))
    # Over the declared share (3%), as in tests/test_probe_live_fill.py: what is tested here is not the
    # share; with the paced turns' 4 ms (paced_turn) the fill takes ~6-10 s here.
    monkeypatch.setattr("engine.probe.cpu_budget.CPU_SHARE", 0.04)
    pipe = serving_pipeline(monkeypatch, rtdir)
    try:
        run_turns(pipe, range(HISTORY))
        yield pipe
    finally:
        pipe.close()


@pytest.mark.parametrize("fold", [False, True], ids=["elided", "fold"])
def test_the_agent_thread_sends_its_turns_to_a_ring_client_filling_its_history(
    long_pipe: Any, fold: bool
) -> None:
    """During the fill each paced turn reaches the ring from the agent's own thread, waking no probe
    thread; every turn once and in order, and the history whole and equal to the journal. On the old code
    no turn was the agent thread's to send while the fill ran (1 of 106). Also on the fold stream, which
    `cp-inspect attach` asks for."""
    pipe = long_pipe
    probe = pipe.probe
    c, f, th = _attach(pipe, ring=True, fold=fold)
    wakes = [0]
    real_wake = probe._wake

    def counted_wake() -> None:
        wakes[0] += 1
        real_wake()

    probe._wake = counted_wake
    try:
        turn = HISTORY
        sends0, falls0, wakes0, held0 = (
            probe.agent_sends,
            probe.agent_fallbacks,
            wakes[0],
            probe.fold_closes_held,
        )
        during = 0
        in_burst = 0  # turns begun while the I/O thread was in a burst (its wake-up flag set): its to send
        deadline = time.monotonic() + FILL_DEADLINE
        while not f.done.is_set() and f.error is None:
            assert time.monotonic() < deadline, f"the fill did not end ({len(f.journal)} of {c.snapshot_at})"
            in_burst += probe._wake_pending
            paced_turn(pipe, turn)
            turn += 1
            during += 1
            time.sleep(PACE)
        sends, falls, woke = probe.agent_sends - sends0, probe.agent_fallbacks - falls0, wakes[0] - wakes0
        # A fold client's turn that closes within FOLD_COALESCE of the last send is held for the next
        # (engine.probe.agent_send): it goes with that send, from this thread too.
        sends += probe.fold_closes_held - held0
        # The last turn is sent at its close: coalesced, it would wait for the idle ask the inspector
        # makes (LiveSource) and this raw client does not, and the test failed 1 run in 4-8 (that ask
        # is tested in tests/test_probe_fold_coalesce.py).
        probe.fold_coalesce = 0
        run_turns(pipe, range(turn, turn + 1))
        end = time.monotonic() + T
        while turn not in f.order and f.error is None and time.monotonic() < end:
            time.sleep(0.01)
        f.stop.set()
        th.join(T)
        assert f.error is None, f.error
        assert during >= 10, f"the fill ran for {during} turns only: too short to tell"
        assert c.ring, "the client read its live frames from a ring"
        assert f.order == list(range(HISTORY, turn + 1)), "each live turn once, in order"
        # (A turn that comes while the I/O thread is in a pass, its lock held, is that thread's to send;
        # so is one that comes while it is in a burst: PACE is shorter than its coalescing wait, so once
        # woken it may take turns back to back for a while, as it does for any agent that fast.)
        # The failures this exists for give a share near 0: before 32dcf75 the I/O thread rested holding
        # the pass lock, and the agent's thread left every turn to it while a fetch waited (1 of 106);
        # either of the two put back today (review43, 12-06 19:20, load 7-9): 0 or 1 turn of 114-179,
        # both streams. The share of a working probe depends on the timing of those bursts: 0.51-1.0 on
        # a quiet machine (12-06 18:10, 12 runs), 0.35-1.0 at load 5-10 (55 runs, 12-06 19:00-19:20;
        # runs of 0.40 and 0.35 had the I/O thread's bursts take half the turns). 0.75, then 0.4 failed
        # fresh-clone CIs and lone runs under load: 0.15 keeps a wide gap on both sides.
        assert sends >= 0.15 * during, (
            f"the agent's thread sent {sends} of the {during} turns made during the fill "
            f"({in_burst} begun while the I/O thread was in a burst, {falls} woke it)"
        )
        assert woke <= 0.25 * during and falls <= 0.25 * during, (
            f"{woke} wake-ups ({falls} fallbacks) for {during} turns made during the fill"
        )
        journal = pipe.journal.events
        want = [_as_sent(journal[i]) for i in range(c.snapshot_at)]
        if fold:
            # A turn the agent had not built when its range was answered comes to a fold client as its
            # marker (its fold rebuilds the trace); one built by then (spilled, or read) as its summary.
            want = [
                got
                if got == {"k": "turn_deferred", "turn": w.get("turn")} and w.get("k") == "turn_summary"
                else w
                for got, w in zip(f.journal, want, strict=False)
            ] + want[len(f.journal) :]
        assert f.journal == want, "the history is the journal's"
    finally:
        probe._wake = real_wake
        c.close()


@pytest.mark.parametrize("ring", [False, True], ids=["socket", "ring"])
def test_a_fill_pass_stops_at_its_budget_in_frames_of_many_events(
    long_pipe: Any, ring: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history comes in range answers of many events each (a pass ends its frame where its budget
    ends, and pumps no more): on the old code, once a pass had spent its budget it went on filling to
    1 MB, a frame of one event and a send() each, and most answers held one event. The passes' CPU
    stays near the budget's bound (CPU_BURST of tokens and one burst more, CPU_BURST = 2 ms)."""
    pipe = long_pipe
    # The frames' sizes, not how the agent's turns go out: bare turns, at the share that fills in a few
    # seconds behind them (an agent read as idle only fills faster, in frames as large or larger).
    monkeypatch.setattr("engine.probe.cpu_budget.CPU_SHARE", 0.15)
    c, f, th = _attach(pipe, ring=ring)
    try:
        turn = HISTORY
        deadline = time.monotonic() + FILL_DEADLINE
        while not f.done.is_set() and f.error is None:
            assert time.monotonic() < deadline, f"the fill did not end ({len(f.journal)} of {c.snapshot_at})"
            run_turns(pipe, range(turn, turn + 1))
            turn += 1
            time.sleep(PACE)
        f.stop.set()
        th.join(T)
        assert f.error is None, f.error
        assert c.ring == ring
        frames = sorted(f.frames)
        median = frames[len(frames) // 2]
        assert median >= 16 and len(frames) <= c.snapshot_at / 16, (
            f"{len(frames)} range answers for {c.snapshot_at} events, median {median} events"
        )
        journal = pipe.journal.events
        assert f.journal == [_as_sent(journal[i]) for i in range(c.snapshot_at)], (
            "the history is the journal's"
        )
    finally:
        c.close()
