"""simulate's gates-closed builds without cost_aware's decision (engine/sim/blocks.py, `closed_uncut`).

With the policy's gates closed and no compaction cut, SimBuilder builds a turn as the budget guarantee
and the markers over the assembled conversation instead of through Pipeline.decide. Held here: every
turn of varied sessions (providers with and without breakpoints, both policy revisions, windows that
trim every turn, tool outputs too large for any round cut, latch flips) gives the same Blocks, actions,
latch flips, ceiling, state and request as the reference build through Pipeline.decide, on pipelines
that also build a what-if column in between (as simulate does); simulate's report is the same either
way; and simulate runs cost_aware's decision once a turn (the what-if column), not twice.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.pipeline import Pipeline
from engine.policy import cost_aware
from engine.policy.settings import WAVE1, PolicySettings
from engine.policy.state import CompactionState
from engine.sim import blocks as blocks_mod
from engine.sim.blocks import SimBuilder, closed_uncut
from engine.sim.simulate import SimSettings, simulate_events
from tests.support.sim_builds import CLOSED, coding_session, columns
from tests.test_simulate import COUNTER


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    provider=st.sampled_from(["anthropic", "deepseek", "openai", "bedrock"]),
    turns=st.integers(3, 22),
    sizes=st.lists(st.sampled_from([2, 20, 60, 150, 900]), min_size=1, max_size=4),
    revision=st.sampled_from([1, 2]),
    latch_at=st.none() | st.integers(1, 10),
    window=st.sampled_from([3000, 6000, 12000, 200_000]),
    seed=st.integers(0, 10**6),
    task=st.sampled_from([30, 300]),
)
def test_closed_builds_equal_the_decide_builds(
    provider: str,
    turns: int,
    sizes: list[int],
    revision: int,
    latch_at: int | None,
    window: int,
    seed: int,
    task: int,
) -> None:
    events = coding_session(provider, turns, sizes, revision, latch_at, seed, task)
    fast = columns(events, window, closed_fast=True)
    ref = columns(events, window, closed_fast=False)
    assert len(fast) == len(ref) == 2 * (turns + 1)
    for got, want in zip(fast, ref, strict=True):
        assert got == want


def test_the_closed_builds_cover_trims_markers_and_flips() -> None:
    """The equality above is not vacuous: on one such session the gates-closed column trims the history
    (an action), places breakpoints (Anthropic), one of them on the task (revision 2), and sees a latch
    flip, through the closed path."""
    events = coding_session("anthropic", 16, [60, 150], 2, 5, 7, task=300)
    got = columns(events, 9000, closed_fast=True)[1::2]
    assert sum("trim_sections" in g[1] for g in got) >= 5
    assert sum(any(b.marker for b in g[0]) for g in got) >= 10
    # The task's breakpoint: a marked history block before the last one.
    assert sum(any(b.marker and b.section == "history" for b in g[0][:-1]) for g in got) >= 8
    assert any(g[2] for g in got)


def test_closed_uncut_only_where_the_decision_is_held() -> None:
    base = Pipeline("deepseek-chat", "deepseek", 10_000, serve=False, counter=COUNTER).config
    closed = replace(base, limits=CLOSED)
    assert closed_uncut(closed, CompactionState())
    assert not closed_uncut(base, CompactionState())  # gates open: the policy decides
    assert not closed_uncut(closed, CompactionState(cut=5, dropped_rounds=2))  # a cut to apply
    assert not closed_uncut(replace(closed, policy=PolicySettings(name=WAVE1)), CompactionState())
    for gate in ("reorder", "spill", "drop_rounds"):  # any gate cost_aware reads open: not closed
        assert not closed_uncut(replace(closed, limits=replace(CLOSED, **{gate: True})), CompactionState())
    # Gates cost_aware never reads may be open.
    assert closed_uncut(replace(closed, limits=replace(CLOSED, trim_schemas=True)), CompactionState())


@pytest.mark.parametrize("window", [None, 6000])
def test_simulate_decides_once_a_turn_and_reports_the_same(
    window: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """simulate's gates-closed column no longer runs cost_aware's decision (a run a turn fewer than the
    reference builds, and than the code before), and its report is the one the reference builds give."""
    events = coding_session("anthropic", 14, [20, 150], 2, None, 3)
    s = SimSettings(window=window)
    runs = [0]
    real_run = cost_aware.run

    def counted(*a: Any, **kw: Any) -> Any:
        runs[0] += 1
        return real_run(*a, **kw)

    monkeypatch.setattr(cost_aware, "run", counted)
    fast = simulate_events(events, s, counter=COUNTER).to_json(per_turn=True)
    turns = sum(1 for e in events if e.get("k") == "request")
    # What-if columns decided: the pipeline's, and at another window than the recorded one the recorded
    # settings' too (as_sent, for a recording with no `actual` events).
    columns = 1 if window is None else 2
    assert runs[0] == columns * turns

    class Reference(SimBuilder):
        def __init__(self, pipe: Pipeline) -> None:
            super().__init__(pipe, closed_fast=False)

    monkeypatch.setattr(blocks_mod, "SimBuilder", Reference)
    import engine.sim.simulate_pass as sim_mod

    monkeypatch.setattr(sim_mod, "SimBuilder", Reference)
    runs[0] = 0
    ref = simulate_events(events, s, counter=COUNTER).to_json(per_turn=True)
    assert runs[0] == (columns + 1) * turns
    fast.pop("elapsed_s")
    ref.pop("elapsed_s")
    assert fast == ref
    if window is not None:  # tight: the columns differ (at the recorded 200k window they need not)
        assert fast["policies"]["gates_closed"]["per_turn"] != fast["policies"]["pipeline"]["per_turn"]
