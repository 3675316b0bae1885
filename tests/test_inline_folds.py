"""The per-turn calls that fold their own events in line (tool_result's part, the express lane's request,
record_usage's usage: Pipeline._learn_usage with the Usage it normalized) leave the state that folding
their journal leaves: a replay of the live pipeline's journal, event by event through Pipeline.fold,
ends with the same statistics (completion samples, calibration, recovery), turn, history and pending
parts, and goes on to the same next request."""

from __future__ import annotations

from typing import Any

import pytest

from engine.pipeline import Pipeline
from engine.tokens import CharTokenizer, TokenCounter
from tests.support.counting import LaneTurns
from tests.turn_session import coding_task, tool_round


def _pipe(provider: str, replay: bool = False) -> Pipeline:
    return Pipeline(
        "claude-sonnet-4-5" if provider == "anthropic" else "deepseek-chat",
        provider,
        200_000,
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        clock=lambda: 0.0,
        replay=replay,
    )


def _state(p: Pipeline) -> tuple[Any, ...]:
    return (
        p.stats,  # a dataclass: its memos are left out of ==
        p.turn,
        [m.sha for m in p.history],
        [part.sha for part in p.pending],
        p.compaction,
        p.flipped,
    )


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_steady_turns_fold_as_a_replay_does(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lane = LaneTurns(monkeypatch)
    live = coding_task(_pipe(provider))
    for t in range(14):
        tool_round(live, t, f"output of step {t}\n" * (5 + t))
        live.next_request()
        if t == 6:
            # A refused call starts a recovery: the usages after it count its turns down (turn_succeeded).
            live.record_error("prompt_too_long", "too long")
        else:
            # Our own dict; an estimate to calibrate against (the request's final tokens) on every turn.
            live.record_usage({"input_tokens": 900 + 40 * t, "output_tokens": 30 + t})
    live.assistant("last step", [{"id": "c99", "name": "bash", "arguments": "{}"}])
    live.tool_result("c99", "done\n")
    assert lane.taken >= 8  # the express lane made the steady turns (its in-line request fold ran)
    assert live.stats.calibration_samples and live.stats.recoveries == 1
    rep = _pipe(provider, replay=True)
    for ev in live.journal.events:
        rep.fold(ev.resolve() if hasattr(ev, "resolve") else ev)
    assert _state(rep) == _state(live)
    rep.go_live()
    assert rep.next_request().bytes == live.next_request().bytes
    live.close()
    rep.close()
