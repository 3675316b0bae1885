"""simulate's gates-closed builds at a provider that caches prefixes by itself (DeepSeek, OpenAI).

Such a provider gets no marker whatever the request, so after the carried history cut the closed build
(engine/sim/blocks.py, SimBuilder._closed) neither runs the markers rule nor looks for a free breakpoint
for the task: neither can change the request. Held here: on a session that trims every turn, no closed
build runs either (the code before ran both on every trimming turn) and every build equals the
reference build through Pipeline.decide; at a provider with breakpoints both still run. And the gates a
config closes are read once per config, not on every build.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.optimize import markers as marker_rule
from engine.optimize.context import OptimizeLimits
from engine.policy.state import CompactionState
from engine.recording.replay import Replayer
from engine.sim import blocks as blocks_mod
from engine.sim.blocks import SimBuilder
from tests.support.counting import count_calls
from tests.support.sim_builds import coding_session, columns
from tests.test_simulate import COUNTER


@pytest.mark.parametrize("provider", ["deepseek", "openai"])
def test_no_markers_rule_after_the_cut_at_an_automatic_provider(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = coding_session(provider, 18, [60, 150], 2, None, 11)
    ref = columns(events, 6000, closed_fast=False)
    rule = count_calls(monkeypatch, blocks_mod, "optimize")
    task = count_calls(monkeypatch, marker_rule, "task_marker")
    got = columns(events, 6000, closed_fast=True)
    closed = got[1::2]
    assert sum("trim_sections" in c[1] for c in closed) >= 12  # the carried cut took these turns
    assert rule[0] == 0
    assert task[0] == 0
    assert got == ref


def test_markers_still_placed_at_a_provider_with_breakpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    events = coding_session("anthropic", 18, [60, 150], 2, None, 11, task=300)
    ref = columns(events, 9000, closed_fast=False)
    rule = count_calls(monkeypatch, blocks_mod, "optimize")
    # The rule decides on every trimming build: placing from the sections, or taking a placement an
    # earlier build made on the same sections (markers._carried: tried, not always taken).
    placed = count_calls(monkeypatch, marker_rule, "_placed")
    carried = count_calls(monkeypatch, marker_rule, "_carried")
    got = columns(events, 9000, closed_fast=True)
    trims = sum("trim_sections" in c[1] for c in got[1::2])
    assert trims >= 5
    assert rule[0] >= trims and placed[0] + carried[0] >= trims
    assert got == ref


def test_a_config_s_gates_are_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """As simulate builds (each column's config derived once): closed_uncut runs once per config."""
    events = coding_session("deepseek", 10, [20, 150], 2, None, 5)
    checks = count_calls(monkeypatch, blocks_mod, "closed_uncut")
    replayer = Replayer(events, COUNTER)
    pipe = replayer.new_pipeline()
    builder = SimBuilder(pipe)
    pcfg = ccfg = None
    st_p = st_c = CompactionState()
    builds = 0
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            if pcfg is None:
                pcfg = pipe.config.with_overrides(window=6000)
                ccfg = replace(pcfg, limits=OptimizeLimits.all_closed())
            assert ccfg is not None
            st_p = builder.build({}, pcfg, st_p).state or st_p
            st_c = builder.build({}, ccfg, st_c).state or st_c
            builds += 2
        pipe.fold(ev)
    assert builds == 22
    assert checks[0] <= 2  # the code before: once a build with no cut (here at least 11)
