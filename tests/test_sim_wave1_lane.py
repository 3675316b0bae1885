"""simulate's wave-1 builds from the conversation's running sums (engine/sim/wave1_lane.py).

Held here: on varied sessions (one to three tool calls a round, user asides, outputs of many sizes, four
providers, both policy revisions, several windows), every turn's wave-1 build through the lane equals
the build through Pipeline.decide (the Blocks, actions, latch flips, ceiling, state, the request's
sections and its total); simulate's report is the same either way; the lane builds most turns of a long
session (the equality is not vacuous); and a lane build assembles the window it sends, not the
conversation.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.sim.simulate_pass as sim_mod
from engine.pipeline import Pipeline
from engine.policy.settings import WAVE1, PolicySettings
from engine.recording.replay import Replayer
from engine.sim import wave1_lane
from engine.sim.blocks import SimBuilder
from engine.sim.simulate import SimSettings, simulate_events
from tests.support.sim_builds import observed, round_sessions, rounds_session
from tests.test_simulate import COUNTER

WAVE1_SETTINGS = PolicySettings(name=WAVE1)


def wave1_builds(events: list[dict[str, Any]], window: int, lane: bool) -> list[tuple[Any, ...]]:
    """Every turn's wave-1 build at `window` (every gate open), as `observed` tuples: through the lane
    where it builds the turn (`lane`), else through Pipeline.decide."""
    pipe = Replayer(events, COUNTER).new_pipeline()
    builder = SimBuilder(pipe, wave1_lane=lane)
    out: list[tuple[Any, ...]] = []
    cfgs: tuple[Any, Any] | None = None
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            if cfgs is None or cfgs[0] is not pipe.config:
                cfgs = (
                    pipe.config,
                    replace(pipe.config.with_overrides(window=window), policy=WAVE1_SETTINGS),
                )
            out.append(observed(builder.build(ev.get("bound", {}), cfgs[1])))
        pipe.fold(ev)
    return out


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Per call of the lane, whether it built the turn."""
    taken: list[bool] = []
    real = wave1_lane.Wave1Lane.build

    def counted(self: wave1_lane.Wave1Lane, *a: Any, **kw: Any) -> Any:
        out = real(self, *a, **kw)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(wave1_lane.Wave1Lane, "build", counted)
    return taken


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=round_sessions, window=st.sampled_from([2000, 3000, 6000, 200_000]))
def test_lane_builds_equal_the_decide_builds(session: dict[str, Any], window: int) -> None:
    events = rounds_session(**session)
    got = wave1_builds(events, window, lane=True)
    want = wave1_builds(events, window, lane=False)
    assert len(got) == len(want) == session["turns"] + 1
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, f"turn {k}"


@pytest.mark.parametrize(
    ("args", "window", "least"),
    [
        (("anthropic", 120, [1, 2], [20, 60, 8, 200], 2, 3, 4), 6000, 60),
        (("deepseek", 120, [1], [20, 60, 8], 2, 3, 0), 3000, 8),
        (("openai", 80, [1], [40], 1, 5, 0), 3000, 8),
    ],
)
def test_the_lane_builds_turns_and_they_equal_decide(
    args: tuple[Any, ...], window: int, least: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not vacuous: the lane builds many turns of these sessions (where drop_rounds' cut holds every
    cleared result and trim cuts what it kept, or leaves it within its budget), each equal to decide's."""
    taken = _counting(monkeypatch)
    events = rounds_session(*args)
    got = wave1_builds(events, window, lane=True)
    assert sum(taken) >= least
    assert got == wave1_builds(events, window, lane=False)


@pytest.mark.parametrize("window", [3000, 6000])
def test_simulate_reports_the_same_with_and_without_the_lane(
    window: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = rounds_session("anthropic", 60, [1, 2], [20, 60, 8, 200], 2, 3, 4)
    s = SimSettings(window=window, policies=["all"])
    taken = _counting(monkeypatch)
    fast = simulate_events(events, s, counter=COUNTER).to_json(per_turn=True)
    assert any(taken)

    class Reference(SimBuilder):
        def __init__(self, pipe: Pipeline) -> None:
            super().__init__(pipe, wave1_lane=False)

    monkeypatch.setattr(sim_mod, "SimBuilder", Reference)
    ref = simulate_events(events, s, counter=COUNTER).to_json(per_turn=True)
    fast.pop("elapsed_s")
    ref.pop("elapsed_s")
    assert fast == ref


def test_a_lane_build_assembles_the_window_not_the_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work a turn that does not grow with the session: every build the lane makes assembles the task
    and the conversation from a cut (never the whole conversation, as Pipeline.decide's wave 1 does),
    and in the last third of a 150-round session what it assembles is no longer than in the middle
    third, and a small part of the conversation."""
    cuts: list[tuple[int, int]] = []  # (the cut asked for, the conversation's length), per assembly
    real = Pipeline.assembled

    def recorded(self: Pipeline, bound: Any, cut: int = 0) -> Any:
        cuts.append((cut, len(self.history)))
        return real(self, bound, cut)

    monkeypatch.setattr(Pipeline, "assembled", recorded)
    taken = _counting(monkeypatch)
    events = rounds_session("anthropic", 150, [1], [20, 60, 8, 200], 2, 3, 0)
    pipe = Replayer(events, COUNTER).new_pipeline()
    builder = SimBuilder(pipe)
    sent: list[int] = []  # per lane build: the messages it assembled (after the cut, beside the task)
    cfg = None
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            if cfg is None:
                cfg = replace(pipe.config.with_overrides(window=6000), policy=WAVE1_SETTINGS)
            cuts.clear()
            builder.build(ev.get("bound", {}), cfg)
            if taken[-1]:
                assert cuts and all(c > 0 for c, _ in cuts)
                sent.append(max(n - c for c, n in cuts))
        pipe.fold(ev)
    assert len(sent) >= 60
    third = len(sent) // 3
    middle, last = sent[third : 2 * third], sent[2 * third :]
    assert max(last) <= max(middle)
    assert max(last) < len(pipe.history) // 4


def _edited_session(turns: int, edit_at: int) -> list[dict[str, Any]]:
    """A tool-calling agent (outputs of 200 to 800 lines at Claude) whose turn-1 reply is edited before
    turn `edit_at` (Pipeline.edit_text: the log's message replaced where it stood)."""
    now = [1000.0]
    pipe = Pipeline(
        "claude-sonnet-4", "anthropic", 200_000, serve=False, counter=COUNTER, clock=lambda: now[0]
    )
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run a command.", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user("Fix the failing test. " + "Context. " * 40)
    reply_at = -1
    for k in range(turns):
        if k == edit_at:
            assert pipe.edit_text(reply_at, "Round 1, reworded at length by the agent.")
        pipe.next_request()
        pipe.record_usage({"input_tokens": 800 + 500 * k, "output_tokens": 20})
        (call,) = pipe.assistant(
            f"Round {k}.", [{"id": f"c{k}", "name": "bash", "arguments": {"cmd": f"cat f{k}"}}]
        )
        if k == 1:
            reply_at = len(pipe.history) - 1
        pipe.tool_result(call.id, "".join(f"out {k}.{i}: v = g({i})\n" for i in range(200 + 300 * (k % 3))))
        now[0] += 6.0
    pipe.next_request()
    return list(pipe.journal.events)


def test_an_edit_in_the_conversation_is_read_by_the_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent's edit of an early reply (its tokens change under the lane's running sums): every build
    after it through the lane equals decide's, and the lane builds turns after the edit too."""
    taken = _counting(monkeypatch)
    events = _edited_session(80, 60)
    got = wave1_builds(events, 4000, lane=True)
    assert sum(taken[61:]) >= 5
    assert got == wave1_builds(events, 4000, lane=False)
