"""simulate's held turns of a cost_aware column, decided from the turn before (engine/pipeline_held_lane.py).

Held here: every turn of varied sessions (providers with and without breakpoints, both policy
revisions, windows where the policy compacts early, is forced (below the ceiling too) or never needs to, latch flips, tool
outputs large enough to spill) gives the same Blocks, actions, latch flips, ceiling, state and request
through the lane as through Pipeline.decide, with the gates-closed column built in between on the same
pipeline (as simulate does); the lane takes most held turns at a provider that caches prefixes by
itself (so the equality is not vacuous); simulate's report is the same either way; and a lane that
weighs a turn wrongly is caught.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import pipeline_express as express
from engine import pipeline_held_lane as held_lane
from engine.sim import blocks as blocks_mod
from engine.sim import simulate_pass as sim_mod
from engine.sim.blocks import SimBuilder
from engine.sim.simulate import SimSettings, simulate_events
from tests.support.sim_builds import coding_session, columns
from tests.test_simulate import COUNTER


def _columns(
    events: list[dict[str, Any]], held: bool, window: int, early: bool = True, trigger: float = 1.0
) -> tuple[list[tuple[Any, ...]], int]:
    """Every turn's what-if (recorded settings at `window`) and gates-closed builds, interleaved on one
    pipeline as simulate builds them, and how many what-if turns the lane built."""
    lane_turns = [0]
    real_turn = held_lane.turn

    def counted(*a: Any, **kw: Any) -> Any:
        got = real_turn(*a, **kw)
        lane_turns[0] += got is not None
        return got

    held_lane.turn = counted  # type: ignore[assignment]
    try:
        out = columns(events, window, early, trigger, held=held)
    finally:
        held_lane.turn = real_turn  # type: ignore[assignment]
    return out, lane_turns[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    provider=st.sampled_from(["deepseek", "openai", "deepseek", "anthropic"]),
    turns=st.integers(3, 26),
    sizes=st.lists(st.sampled_from([2, 20, 60, 150, 900]), min_size=1, max_size=4),
    revision=st.sampled_from([1, 2]),
    latch_at=st.none() | st.integers(1, 10),
    window=st.sampled_from([3000, 6000, 12000, 30000, 200_000]),
    early=st.booleans(),
    trigger=st.sampled_from([1.0, 0.6]),
    seed=st.integers(0, 10**6),
)
def test_lane_builds_equal_the_decide_builds(
    provider: str,
    turns: int,
    sizes: list[int],
    revision: int,
    latch_at: int | None,
    window: int,
    early: bool,
    trigger: float,
    seed: int,
) -> None:
    events = coding_session(provider, turns, sizes, revision, latch_at, seed)
    fast, _n = _columns(events, True, window, early, trigger)
    ref, none = _columns(events, False, window, early, trigger)
    assert none == 0
    assert len(fast) == len(ref) == 2 * (turns + 1)
    for got, want in zip(fast, ref, strict=True):
        assert got == want


def test_the_lane_takes_held_turns_between_compactions() -> None:
    """Not vacuous: on a DeepSeek session that compacts, most what-if turns are the lane's, and the
    what-if column's state moves (compactions, through the general path) between them."""
    events = coding_session("deepseek", 40, [60, 150], 2, None, 11)
    out, lane = _columns(events, True, 9000)
    states = {o[4] for o in out[0::2]}
    assert len(states) >= 3  # at least two compactions
    assert lane >= 25


def test_a_wrong_lane_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lane that never lets the early rule compact (its weighing skipped) gives other builds than
    decide on a session where the early rule compacts: the comparison above would fail."""
    events = coding_session("deepseek", 40, [60, 150], 2, None, 11)
    ref, _ = _columns(events, False, 30000)
    assert len({o[4] for o in ref[0::2]}) >= 2  # the what-if column compacts at this window

    class _Never:
        def __init__(self, *a: Any) -> None:
            pass

        def compacts(self, *a: Any) -> bool:
            return False

    # (The lanes' shared first-turn setup, pipeline_express.lane_fixed, makes the rule; simulate's builds
    # never take the express lane itself.)
    monkeypatch.setattr(express, "EarlyRule", _Never)
    wrong, lane = _columns(events, True, 30000)
    assert lane > 0
    assert wrong != ref


@pytest.mark.parametrize("window", [None, 9000])
def test_simulate_reports_the_same_with_the_lane(window: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    events = coding_session("deepseek", 30, [20, 150], 2, None, 5)
    s = SimSettings(window=window)
    fast = simulate_events(events, s, counter=COUNTER).to_json(per_turn=True)

    class Reference(SimBuilder):
        def __init__(self, pipe: Any) -> None:
            super().__init__(pipe, held=False)

    monkeypatch.setattr(blocks_mod, "SimBuilder", Reference)
    monkeypatch.setattr(sim_mod, "SimBuilder", Reference)
    ref = simulate_events(events, s, counter=COUNTER).to_json(per_turn=True)
    fast.pop("elapsed_s")
    ref.pop("elapsed_s")
    assert fast == ref
