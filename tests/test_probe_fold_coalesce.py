"""A fold client's turns that close closer together than FOLD_COALESCE share one batch.

The agent's thread sent a fold client every turn at its close, one batch frame a turn (~40 us of its
CPU, cold: ormsgpack, the ring's write, the path's calls and checks, nearly all of it fixed per send).
A turn that closes within FOLD_COALESCE of the last such send now waits, held back like the rest of
the turn, for the next close past it; a turn the agent then pauses after is asked for by the inspector
after its idle (the ring's held mark: engine.probe.ring, "Held events"). Real agent (a Pipeline serving
its probe), real socket and ring, the real live source folding the stream: every turn reaches the view,
as the agent's own trace.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.probe.fold_send import FOLD_COALESCE
from tests.support.fold_stream import assert_shown_as_sent, fold_stream
from tests.test_probe_fold import _kinds, _turn

IDLE = 0.15  # the inspector's backfill_idle here
PACE = FOLD_COALESCE / 10  # between turns: an agent whose model answers at once


@pytest.mark.parametrize("record", [False, True])
def test_turns_closer_than_fold_coalesce_share_a_batch_and_every_one_reaches_the_view(
    rtdir: Path, record: bool
) -> None:
    with fold_stream(rtdir, record, backfill_idle=IDLE) as fs:
        pipe, probe, src, view = fs.pipe, fs.probe, fs.src, fs.view
        time.sleep(FOLD_COALESCE)  # (the next close is sent: the last send is that long ago)
        sends, held = probe.agent_sends, probe.fold_closes_held
        turns = list(range(2, 12))
        start = time.monotonic()
        for t in turns:
            time.sleep(PACE)
            _turn(pipe, t)
        took = time.monotonic() - start
        sent = probe.agent_sends - sends
        # At most one batch every FOLD_COALESCE (and the first turn's at its close): before, one a turn.
        assert 1 <= sent <= 1 + took / FOLD_COALESCE, (sent, took)
        assert sent < len(turns), f"{sent} sends for {len(turns)} turns {PACE:g} s apart"
        assert probe.fold_closes_held - held == len(turns) - sent
        pipe.close_turn()
        # The turns held back since the last send come when the inspector, idle, asks for them.
        view.wait_for(turns[-1])
        if not record:
            assert _kinds(pipe, 2) == {"TurnRecord"}  # still unbuilt: the fold client does not trace
        assert_shown_as_sent(fs, turns)
        assert src.asked_traces == 0


def test_a_turn_past_fold_coalesce_is_sent_at_its_close(rtdir: Path) -> None:
    """The bound on what the inspector waits for a turn while the agent goes on: a close FOLD_COALESCE
    after the last send goes at once, with every turn held back before it."""
    with fold_stream(rtdir, record=False, backfill_idle=None) as fs:  # (it never asks)
        pipe, probe, view = fs.pipe, fs.probe, fs.view
        time.sleep(FOLD_COALESCE)
        _turn(pipe, 2)  # sent at its close
        view.wait_for(2)
        held = probe.fold_closes_held
        _turn(pipe, 3)  # within FOLD_COALESCE of turn 2's send: held back
        _turn(pipe, 4)
        assert probe.fold_closes_held - held == 2
        time.sleep(FOLD_COALESCE)
        sends = probe.agent_sends
        _turn(pipe, 5)  # past it: sent, turns 3 and 4 with it
        assert probe.agent_sends == sends + 1
        view.wait_for(5)
        assert {3, 4} <= {t.get("turn") for t in view.turns}
        assert_shown_as_sent(fs, [3, 4, 5], key_order=False)
