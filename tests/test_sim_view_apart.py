"""The peers' view of a simulate turn without a tuple of the whole conversation (SimBuilder.view_apart).

Held here: on varied sessions (four providers, markers or none, both policy revisions, user asides) and
the demo recordings, every turn view_apart answers gives the peers the same system Blocks, the same
count of the log's own messages and the same messages as the whole conversation's build
(build(..., apart="history", whole=False)); it answers nearly every turn (not vacuous); and simulate's
report with every policy is the same with it and without it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from engine.optimize.context import OptimizeLimits
from engine.pipeline import Pipeline
from engine.policy.settings import WAVE1, PolicySettings
from engine.recording.replay import Replayer
from engine.sim.blocks import SimBuilder
from engine.sim.simulate import SimSettings, simulate_events
from engine.sim.simulate_pass import UNBOUNDED
from engine.sim.simulate_read import load_recording_events
from tests.support.sim_builds import round_sessions, rounds_session
from tests.test_simulate import COUNTER

DEMOS = Path(__file__).resolve().parents[1] / "demo_sessions"


def peer_views(events: list[dict[str, Any]], fast: bool) -> tuple[list[tuple[Any, ...]], int]:
    """Per turn (system Blocks, the log's own count, the messages) of the peers' view, through
    view_apart where it answers (`fast`) else the whole conversation's build; and how many it answered."""
    pipe = Replayer(events, COUNTER).new_pipeline()
    builder = SimBuilder(pipe)
    out: list[tuple[Any, ...]] = []
    taken = 0
    closed = OptimizeLimits.all_closed()
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            bound = ev.get("bound", {})
            cfg = replace(pipe.config, window=UNBOUNDED, limits=closed, policy=PolicySettings(name=WAVE1))
            view = builder.view_apart(bound, cfg) if fast else None
            if view is not None:
                taken += 1
                out.append((view[0], view[1], tuple(pipe.history)))
            else:
                full = builder.build(bound, cfg, apart="history", whole=False)
                out.append((full.others, full.log_own, tuple(full.asm[-1].items)))
        pipe.fold(ev)
    return out, taken


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=round_sessions)
def test_view_apart_equals_the_whole_conversations_build(session: dict[str, Any]) -> None:
    got, _ = peer_views(rounds_session(**session), fast=True)
    want, _ = peer_views(rounds_session(**session), fast=False)
    assert got == want


def long_system_session(provider: str, turns: int, system: int) -> list[dict[str, Any]]:
    """A coding agent whose system prompt (identity, constraints, a tool) is long enough for the
    provider's breakpoints on it (`system` repeats of each part): the markers rule places them by the
    sections before the history, which the view's Blocks carry."""
    now = [1000.0]
    model = {"anthropic": "claude-sonnet-4", "bedrock": "claude-sonnet-4"}.get(provider, "gpt-4o")
    pipe = Pipeline(model, provider, 200_000, serve=False, counter=COUNTER, clock=lambda: now[0])
    pipe.identity("You are a careful agent. " + "Rules of the house, stated at length. " * system)
    pipe.constraints("Never delete files. " * system)
    schema = {"type": "object", "properties": {"cmd": {"type": "string"}}}
    pipe.add_tool("bash", "Run a shell command. " * (system // 4), schema)
    pipe.user("Fix the failing test. " + "Context. " * 50)
    for k in range(turns):
        pipe.next_request()
        pipe.record_usage({"input_tokens": 5000 + 300 * k, "output_tokens": 20})
        calls = pipe.assistant(
            f"Step {k}.", [{"id": f"c{k}", "name": "bash", "arguments": {"cmd": f"cat f{k}"}}]
        )
        pipe.tool_result(calls[0].id, "".join(f"line {k}.{i}\n" for i in range(30)))
        now[0] += 5.0
    pipe.next_request()
    return list(pipe.journal.events)


@pytest.mark.parametrize("provider", ["anthropic", "bedrock", "openai"])
@pytest.mark.parametrize("system", [30, 300])
def test_view_apart_carries_the_system_breakpoints(provider: str, system: int) -> None:
    events = long_system_session(provider, 12, system)
    got, taken = peer_views(events, fast=True)
    assert taken >= len(got) - 2
    assert got == peer_views(events, fast=False)[0]
    if provider != "openai" and system == 300:  # (not vacuous: breakpoints on the system's Blocks)
        assert any(b.marker for b in got[-1][0])


@pytest.mark.parametrize("name", ["scout-anthropic", "scout-openai"])
def test_view_apart_answers_the_demo_turns_alike(name: str) -> None:
    events, _ = load_recording_events(DEMOS / f"{name}.cpsession")
    got, taken = peer_views(events, fast=True)
    assert taken >= len(got) - 2  # all but the turns before a round follows the task's
    assert got == peer_views(events, fast=False)[0]


def test_simulate_with_every_policy_reports_the_same_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    events = rounds_session("anthropic", 40, [1, 2], [20, 60, 8, 200], 2, 3, 4)
    s = SimSettings(window=6000, policies=["all"])
    fast = simulate_events(events, s, counter=COUNTER).to_json(per_turn=True)
    monkeypatch.setattr(SimBuilder, "view_apart", lambda self, bound, cfg: None)
    ref = simulate_events(events, s, counter=COUNTER).to_json(per_turn=True)
    fast.pop("elapsed_s")
    ref.pop("elapsed_s")
    assert fast == ref
