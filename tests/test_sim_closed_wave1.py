"""simulate's wave-1 builds with every gated rule closed (engine/sim/blocks.py, `closed_wave1`).

The peers' view of a session-wide what-if is the whole uncompacted conversation built under wave 1 with
every gate closed, every turn. SimBuilder builds such a turn with the always-on rules only (the budget
guarantee, the markers) instead of through Pipeline.decide, whose `optimize` also dry-runs each closed
rule over the whole conversation for the trace's skipped steps. Held here: every turn of varied sessions
(providers with and without breakpoints, windows that trim every turn and the unbounded one, latch flips,
with and without the history's Blocks apart) gives the same Blocks, other Blocks, actions, latch flips,
ceiling, state and request as the reference build through Pipeline.decide; the equality is not vacuous
(trims and markers happen on that path); and no closed rule is dry-run there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.optimize as optimize_mod
from engine.optimize.context import OptimizeLimits
from engine.policy.settings import WAVE1, PolicySettings
from engine.recording.replay import Replayer
from engine.sim.blocks import SimBuilder, closed_wave1
from engine.sim.simulate_pass import UNBOUNDED
from tests.support.sim_builds import CLOSED, coding_session, observed
from tests.test_simulate import COUNTER

WAVE1_SETTINGS = PolicySettings(name=WAVE1)


def _wave1_columns(events: list[dict[str, Any]], closed_fast: bool, window: int) -> list[tuple[Any, ...]]:
    """Every turn's wave-1 gates-closed build at `window` and the peers' view (unbounded, history apart),
    with a cost_aware what-if build between them as simulate interleaves columns on one pipeline."""
    replayer = Replayer(events, COUNTER)
    pipe = replayer.new_pipeline()
    builder = SimBuilder(pipe, closed_fast=closed_fast)
    out: list[tuple[Any, ...]] = []
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            bound = ev.get("bound", {})
            pcfg = pipe.config.with_overrides(window=window)
            wcfg = replace(pcfg, limits=CLOSED, policy=WAVE1_SETTINGS)
            full = replace(pcfg, window=UNBOUNDED, limits=CLOSED, policy=WAVE1_SETTINGS)
            built = [
                builder.build(bound, wcfg),
                builder.build(bound, pcfg),
                builder.build(bound, full, apart="history"),
            ]
            out.extend((*observed(b), b.others) for b in built)  # (others last: [-1])
        pipe.fold(ev)
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    provider=st.sampled_from(["anthropic", "deepseek", "openai", "bedrock"]),
    turns=st.integers(3, 18),
    sizes=st.lists(st.sampled_from([2, 20, 60, 150, 900]), min_size=1, max_size=4),
    revision=st.sampled_from([1, 2]),
    latch_at=st.none() | st.integers(1, 10),
    window=st.sampled_from([3000, 6000, 12000, 200_000]),
    seed=st.integers(0, 10**6),
)
def test_closed_wave1_builds_equal_the_decide_builds(
    provider: str, turns: int, sizes: list[int], revision: int, latch_at: int | None, window: int, seed: int
) -> None:
    events = coding_session(provider, turns, sizes, revision, latch_at, seed)
    fast = _wave1_columns(events, True, window)
    ref = _wave1_columns(events, False, window)
    assert len(fast) == len(ref) == 3 * (turns + 1)
    for got, want in zip(fast, ref, strict=True):
        assert got == want


def test_the_closed_wave1_builds_cover_trims_and_markers() -> None:
    """The equality above is not vacuous: on such a session the tight wave-1 column trims the history
    (an action) and places breakpoints (Anthropic), and the peers' view places them too."""
    events = coding_session("anthropic", 16, [60, 150], 2, 5, 7)
    got = _wave1_columns(events, True, 6000)
    tight, peers = got[0::3], got[2::3]
    assert sum("trim_sections" in g[1] for g in tight) >= 5
    assert sum(any(b.marker for b in g[0]) for g in tight) >= 10
    assert sum(any(b.marker for b in g[0]) for g in peers) >= 10
    assert all(g[-1] for g in peers)  # the system and tool Blocks, apart


def test_closed_wave1_only_with_every_gate_closed() -> None:
    events = coding_session("deepseek", 2, [2], 2, None, 1)
    cfg = Replayer(events, COUNTER).new_pipeline().config
    wave1 = replace(cfg, limits=CLOSED, policy=WAVE1_SETTINGS)
    assert closed_wave1(wave1)
    assert not closed_wave1(replace(cfg, limits=CLOSED))  # cost_aware: closed_uncut's business
    for gate in OptimizeLimits.GATES:  # any gated rule open: decide's optimize runs it
        assert not closed_wave1(replace(wave1, limits=replace(CLOSED, **{gate: True})))


@pytest.mark.parametrize("window", [6000, UNBOUNDED])
def test_closed_wave1_builds_dry_run_no_rule(window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the path leaves out: the closed rules' dry runs (each a walk over the whole conversation
    for a skipped step nobody reads). The reference build through decide makes them."""
    events = coding_session("deepseek", 10, [20, 150], 2, None, 5)
    dry = [0]
    real_replace = optimize_mod.replace

    def counted(obj: Any, **kw: Any) -> Any:
        dry[0] += bool(kw.get("dry_run"))
        return real_replace(obj, **kw)

    monkeypatch.setattr(optimize_mod, "replace", counted)
    for closed_fast, expect_none in ((True, True), (False, False)):
        replayer = Replayer(events, COUNTER)
        pipe = replayer.new_pipeline()
        builder = SimBuilder(pipe, closed_fast=closed_fast)
        dry[0] = 0
        for ev in events:
            if ev.get("k") == "request":
                pipe.begin_request(ev["turn"])
                cfg = replace(pipe.config, window=window, limits=CLOSED, policy=WAVE1_SETTINGS)
                builder.build(ev.get("bound", {}), cfg, apart="history")
            pipe.fold(ev)
        assert (dry[0] == 0) is expect_none
