"""The Replayer keeps the states before the last few turns asked for (RECENT_STATES).

The inspector prepares the next turn's content while a person looks at one turn, which moves the
fold cursor past the turn on screen; a what-if of the turn on screen must then start from that turn's
own state, not fold again from the last checkpoint (from the start, in a session under 128 turns)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.pipeline import Pipeline
from engine.recording.replay import RECENT_STATES, Replayer
from engine.tokens import CharTokenizer, TokenCounter

COUNTER = TokenCounter(CharTokenizer())


def _session(turns: int) -> list[dict[str, Any]]:
    pipe = Pipeline("test-model", "anthropic", 6_000, counter=COUNTER, serve=False,
                    clock=lambda: 1_700_000_000.0, default_response_reserve=0)
    pipe.identity("IDENTITY: a careful agent.")
    pipe.add_tool("bash", "Run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user("TASK: fix the failing test.")
    for k in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 50})
        calls = pipe.assistant(f"step {k}", tool_calls=[{"id": f"c{k}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, f"r{k} " + "y" * (300 + 40 * k))
    return list(pipe.journal.events)


def _count_folds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    folded: list[int] = []
    original = Pipeline.fold

    def counting(self: Pipeline, ev: dict[str, Any]) -> None:
        folded.append(1)
        original(self, ev)

    monkeypatch.setattr(Pipeline, "fold", counting)
    return folded


def test_a_turn_just_asked_for_is_not_folded_again_after_the_cursor_moved_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    events = _session(40)
    fresh = Replayer(events, COUNTER)
    want = {t: fresh.replan(t).serialized.request_sha256 for t in (20, 21, 22, 30)}
    rep = Replayer(events, COUNTER)
    rep.replan(20)
    rep.replan(21)  # the next turn prepared: the cursor is past turn 20
    folded = _count_folds(monkeypatch)
    assert rep.replan(20).serialized.request_sha256 == want[20]
    assert folded == [], "turn 20's state was kept: nothing folded"
    # From the kept state, stepping on folds only the new events (not from the start).
    assert rep.replan(22).serialized.request_sha256 == want[22]
    assert 0 < len(folded) < 20
    assert rep.replan(21).serialized.request_sha256 == want[21]
    assert rep.replan(30).serialized.request_sha256 == want[30]


def test_recent_states_are_bounded_and_the_oldest_goes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    events = _session(30)
    rep = Replayer(events, COUNTER)
    for t in range(5, 5 + RECENT_STATES + 3):
        rep.state_before(t)
    rep.state_before(6 + RECENT_STATES)  # asked again: moved to the newest end, no new entry
    assert len(rep._recent) == RECENT_STATES
    kept = sorted(rep.request_index[t] for t in range(8, 8 + RECENT_STATES))
    assert sorted(rep._recent) == kept
    folded = _count_folds(monkeypatch)
    rep.state_before(5)  # forgotten: folded again from the start (the checkpoint at turn 0)
    assert len(folded) > rep.request_index[5] // 2
