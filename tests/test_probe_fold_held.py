"""An attached fold inspector asks a quiet agent how far its journal reached only when it holds events back.

The fold stream sends no batch that only says where the journal has reached (`quiet`), so an inspector
used to ask for the journal's end after every quiet period of backfill_idle, and the agent's I/O thread
woke to answer (~350 us of its CPU a turn on a small VM) even when nothing had been journaled since the
turn's batch. The agent now marks in the client's ring the events it holds back (engine.probe.ring,
"Held events"): the inspector asks once the agent has journaled nothing for backfill_idle after holding
some, and not at all when it holds none. Real agent (a Pipeline serving its probe), real socket and
ring, the real live source following the stream.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inspector.sources.live import LiveSource
from tests.test_probe_fold import T, _Follower, _pipeline

IDLE = 0.15  # the inspector's backfill_idle here
GAP = 0.5  # a quiet gap: longer than IDLE, with room for a loaded machine's poll


def _close(pipe: Any, t: int) -> None:
    """A turn's request and its usage (which closes it: the turn's batch goes out with its marker)."""
    req = pipe.next_request()
    pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10 + t})


def _reply(pipe: Any, t: int) -> None:
    """The model's reply and the tool's result: journaled after the turn's batch, held back by the agent."""
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
    pipe.tool_result(calls[0].id, f"output of step {t}")


def _attach(pipe: Any) -> tuple[LiveSource, _Follower]:
    probe = pipe.probe
    src = LiveSource(os.getpid(), timeout=T, backfill_idle=IDLE, fold=True)
    assert src._folding
    view = _Follower(src)
    deadline = time.monotonic() + T
    while not (probe.client_count == 1 and src.client.held() is not None):
        assert time.monotonic() < deadline, "the fold client never got a ring that says what is held"
        time.sleep(0.005)
    return src, view


def _settled(pipe: Any, src: LiveSource) -> None:
    """Wait until the inspector has the whole journal (asking for it as it would)."""
    deadline = time.monotonic() + T
    while src._jpos < len(pipe.probe._journal()):
        have, end = src._jpos, len(pipe.probe._journal())
        assert time.monotonic() < deadline, f"the inspector has {have} of the journal's {end} events"
        time.sleep(0.01)


def test_a_quiet_gap_with_nothing_journaled_since_the_batch_wakes_no_probe_thread(rtdir: Path) -> None:
    pipe = _pipeline(rtdir)
    probe = pipe.probe
    try:
        _close(pipe, 0)
        _reply(pipe, 0)
        src, view = _attach(pipe)
        _close(pipe, 1)
        _settled(pipe, src)
        time.sleep(GAP)  # (the ask after attaching, if any, is answered)
        wakeups, asked = probe.wakeups, src.fetched_events
        turns = range(2, 8)
        for t in turns:
            # The reply, the tool result and the next request come together; then the turn's batch, and a
            # gap longer than the inspector's idle with nothing journaled after that batch.
            _reply(pipe, t - 1)
            _close(pipe, t)
            time.sleep(GAP)
        view.wait_for(turns[-1])
        per_turn = (probe.wakeups - wakeups) / len(turns)
        # Before: one ask after every gap (the I/O thread woke 1.0 a turn) for a journal end it had sent.
        assert per_turn < 0.5, f"the probe thread woke {per_turn:.2f} times a turn with nothing held back"
        assert src.fetched_events == asked, "the inspector fetched events the turns' batches had sent"
        assert src._jpos == len(probe._journal())  # it has all of the journal all the same
        view.stop()
    finally:
        pipe.close()


def test_the_reply_and_tool_result_held_during_a_long_tool_run_arrive_within_the_idle(rtdir: Path) -> None:
    pipe = _pipeline(rtdir)
    probe = pipe.probe
    try:
        _close(pipe, 0)
        src, view = _attach(pipe)
        _reply(pipe, 0)
        _close(pipe, 1)
        _settled(pipe, src)
        for t in range(1, 4):
            time.sleep(GAP)
            wakeups = probe.wakeups
            _reply(pipe, t)  # then a long tool run: nothing more journaled, nothing sent
            end = len(probe._journal())
            assert src._jpos < end
            start = time.monotonic()
            deadline = start + T
            while src._jpos < end:
                assert time.monotonic() < deadline, f"turn {t}'s reply and tool result never arrived"
                time.sleep(0.005)
            took = time.monotonic() - start
            assert took >= IDLE * 0.9, "asked before the agent had been quiet for the idle"
            kinds = [e.get("k") for e in src.events[-3:]]
            assert "msg" in kinds and "part" in kinds, kinds
            # One ask answers them (the count the agent said was held changes no more).
            time.sleep(GAP)
            assert probe.wakeups - wakeups <= 2, probe.wakeups - wakeups
            _close(pipe, t + 1)
        view.wait_for(3)
        view.stop()
    finally:
        pipe.close()


def test_a_long_model_call_wakes_no_probe_thread(rtdir: Path) -> None:
    """Model calls longer than the inspector's idle: the tool results and the request journaled before
    each call go out before it (the agent learned from the first call how long its calls take), so the
    inspector has nothing held back to ask for while it waits. Before: the I/O thread woke to answer
    the inspector's ask once a turn (~360 us of its CPU). The inspector's journal is the agent's."""
    from engine.probe.fold_send import LONG_WAIT

    pipe = _pipeline(rtdir)
    wait = max(GAP, LONG_WAIT + 0.1)  # a model call longer than the idle and than LONG_WAIT

    def turn(t: int) -> None:
        req = pipe.next_request()
        time.sleep(wait)  # the model call
        pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10 + t})
        _reply(pipe, t)  # (a quick tool)

    try:
        _close(pipe, 0)
        _reply(pipe, 0)
        src, view = _attach(pipe)
        turn(1)  # (learns how long a call takes)
        _settled(pipe, src)
        time.sleep(GAP)  # (the ask for the reply held after the close, if any, is answered)
        per_turn = _wakeups_a_turn(pipe, src, view, turn, range(2, 6))
        assert per_turn < 0.5, f"the probe thread woke {per_turn:.2f} times a turn during the model calls"
        _journals_agree(pipe, src, view)
    finally:
        pipe.close()


def test_a_long_tool_run_wakes_no_probe_thread(rtdir: Path) -> None:
    """Tool runs longer than the inspector's idle (the model quick): the model's reply goes out before
    each run (the agent learned from the first run how long its tools take), so the inspector has
    nothing held back to ask for meanwhile, and shows the reply at once. Before: the I/O thread woke to
    answer the inspector's ask once a turn."""
    from engine.probe.fold_send import LONG_WAIT

    pipe = _pipeline(rtdir)
    run = max(GAP, LONG_WAIT + 0.1)  # a tool run longer than the idle and than LONG_WAIT

    def turn(t: int) -> None:
        _close(pipe, t)
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        time.sleep(run)  # the tool runs
        pipe.tool_result(calls[0].id, f"output of step {t}")

    try:
        _close(pipe, 0)
        _reply(pipe, 0)
        src, view = _attach(pipe)
        turn(1)  # (learns how long a tool runs)
        turn(2)
        _settled(pipe, src)
        per_turn = _wakeups_a_turn(pipe, src, view, turn, range(3, 7))
        assert per_turn < 0.5, f"the probe thread woke {per_turn:.2f} times a turn during the tool runs"
        _journals_agree(pipe, src, view)
    finally:
        pipe.close()


def test_a_pause_after_the_tool_results_sends_the_reply_with_the_turn(rtdir: Path) -> None:
    """A quick model and quick tools, then a pause before the next request (the agent doing something
    else): the reply is not sent on its own (a tool run is timed from the reply to the tools' first
    result, not from the outcome to the next request), so a turn is still one send on the agent's
    thread. Timed from the outcome, the pause made every reply a send of its own (two a turn)."""
    from engine.probe.fold_send import LONG_WAIT

    pipe = _pipeline(rtdir)
    probe = pipe.probe
    pause = LONG_WAIT + 0.1
    try:
        _close(pipe, 0)
        _reply(pipe, 0)
        src, view = _attach(pipe)
        for t in range(1, 3):  # (what the agent learns from these)
            _close(pipe, t)
            _reply(pipe, t)
            time.sleep(pause)
        sends = probe.agent_sends
        turns = range(3, 7)
        for t in turns:
            _close(pipe, t)
            _reply(pipe, t)
            time.sleep(pause)
        per_turn = (probe.agent_sends - sends) / len(turns)
        assert per_turn == 1.0, f"{per_turn:.2f} sends a turn on the agent's thread"
        view.wait_for(turns[-1])
        view.stop()
    finally:
        pipe.close()


def _wakeups_a_turn(pipe: Any, src: Any, view: Any, turn: Callable[[int], None], turns: range) -> float:
    """The probe thread's wake-ups a turn over `turns`, each run by `turn`, until the view has the last."""
    wakeups = pipe.probe.wakeups
    for t in turns:
        turn(t)
    view.wait_for(turns[-1])
    return float(pipe.probe.wakeups - wakeups) / len(turns)


def _journals_agree(pipe: Any, src: Any, view: Any) -> None:
    """The last turn closed and settled: the inspector holds the agent's journal, event for event."""
    pipe.close_turn()
    _settled(pipe, src)
    src._load_events()
    assert [dict(e) for e in src.events] == [dict(e) for e in pipe.probe._journal()]
    view.stop()
