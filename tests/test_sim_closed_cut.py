"""simulate's gates-closed builds with the history cut carried between turns (engine/sim/closed_cut.py).

Held here: on varied sessions (one to three tool calls a round, user messages between rounds, outputs
too large for any round cut, windows that trim every turn, both policy revisions, four providers), every
turn's gates-closed build with the carried cut equals the build through trim_sections over the whole
conversation, and the Pipeline.decide reference; simulate's report is the same either way; the carried
cut is what builds most trimming turns (the equality is not vacuous); and a closed build's work no
longer grows with the session: the history it assembles is the window it sends, not the conversation.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.pipeline_assembly as assembly_mod
import engine.sim.simulate_pass as sim_mod
from engine.pipeline import Pipeline
from engine.policy.state import CompactionState
from engine.recording.replay import Replayer
from engine.sim import closed_cut
from engine.sim.blocks import SimBuilder
from engine.sim.simulate import SimSettings, simulate_events
from engine.sim.simulate_read import load_recording_events
from tests.support.sim_builds import CLOSED, closed_builds, round_sessions, rounds_session
from tests.test_simulate import COUNTER

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=round_sessions, window=st.sampled_from([2500, 4000, 8000, 200_000]))
def test_carried_cut_builds_equal_the_rule_builds(session: dict[str, Any], window: int) -> None:
    events = rounds_session(**session)
    got = closed_builds(events, window, carry=True)
    want = closed_builds(events, window, carry=False)
    assert len(got) == len(want) == session["turns"] + 1
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, f"turn {k}"


def _counting_trims(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Per call of the carried cut (ClosedCut.trim, and ClosedCut.carried where it built the request
    from the last one), whether it built the turn."""
    taken: list[bool] = []
    real, real_carried = closed_cut.ClosedCut.trim, closed_cut.ClosedCut.carried

    def counted(self: closed_cut.ClosedCut, *a: Any, **kw: Any) -> Any:
        out = real(self, *a, **kw)
        taken.append(out is not None)
        return out

    def carried(self: closed_cut.ClosedCut, *a: Any, **kw: Any) -> Any:
        out = real_carried(self, *a, **kw)
        if out is not None:
            taken.append(True)
        return out

    monkeypatch.setattr(closed_cut.ClosedCut, "trim", counted)
    monkeypatch.setattr(closed_cut.ClosedCut, "carried", carried)
    return taken


def test_carried_cut_is_taken_also_where_a_result_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """The equality above is not vacuous: the carried cut builds every trimming turn of a session whose
    newest outputs are at times too large for any round cut (the rule then cuts inside them)."""
    taken = _counting_trims(monkeypatch)
    events = rounds_session("anthropic", 40, [1, 2], [8, 40, 120, 1500], 2, 11, 3)
    got = closed_builds(events, 4000, carry=True)
    trims = sum("trim_sections" in g[1] for g in got)
    assert trims >= 30 and sum(taken) == trims
    cut_inside = [
        g for g in got if any("tokens omitted..." in str(getattr(m, "parts", "")) for m in g[5][-1].items[1:])
    ]
    assert len(cut_inside) >= 3
    assert got == closed_builds(events, 4000, carry=False)


def test_carried_cut_falls_back_where_another_section_is_trimmed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn where a section besides the history is over its budget (the scout demo's environment,
    budget 0 at a 9k window) is built through the rule, and is the same."""
    taken = _counting_trims(monkeypatch)
    events, _ = load_recording_events(DEMO)
    got = closed_builds(events, 9000, carry=True)
    assert taken and not any(taken)
    assert got == closed_builds(events, 9000, carry=False)


@pytest.mark.parametrize("window", [None, 5000])
def test_simulate_reports_the_same_with_and_without_the_carry(
    window: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = rounds_session("deepseek", 30, [1, 3], [8, 120, 40], 2, 5, 4)
    s = SimSettings(window=window)
    fast = simulate_events(events, s, counter=COUNTER).to_json(per_turn=True)

    class Reference(SimBuilder):
        def __init__(self, pipe: Pipeline) -> None:
            super().__init__(pipe, carry_cut=False)

    monkeypatch.setattr(sim_mod, "SimBuilder", Reference)
    ref = simulate_events(events, s, counter=COUNTER).to_json(per_turn=True)
    fast.pop("elapsed_s")
    ref.pop("elapsed_s")
    assert fast == ref


def test_a_closed_build_assembles_the_window_not_the_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work a turn that does not grow with the session: the largest history a gates-closed build
    assembles in the last third of a 150-round session is no longer than in its middle third, and a
    small part of the conversation (before the carried cut, every closed build assembled the whole
    conversation: ~300 messages at the end against ~200 in the middle)."""
    sizes: list[tuple[int, int]] = []  # (messages assembled, conversation length), per closed build
    real = assembly_mod.history_section
    closed_build = [False]

    def recorded(history: Any, pending: Any) -> Any:
        if closed_build[0]:
            sizes.append((len(history), len(pipe_ref[0].history)))
        return real(history, pending)

    monkeypatch.setattr(assembly_mod, "history_section", recorded)
    real_closed = SimBuilder._closed

    def flagged(self: SimBuilder, *a: Any, **kw: Any) -> Any:
        closed_build[0] = True
        try:
            return real_closed(self, *a, **kw)
        finally:
            closed_build[0] = False

    monkeypatch.setattr(SimBuilder, "_closed", flagged)
    events = rounds_session("deepseek", 150, [1], [20], 2, 3, 0)
    pipe_ref: list[Pipeline] = []
    replayer = Replayer(events, COUNTER)
    pipe = replayer.new_pipeline()
    pipe_ref.append(pipe)
    builder = SimBuilder(pipe)
    per_build: list[int] = []
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            cfg = replace(pipe.config.with_overrides(window=3000), limits=CLOSED)
            sizes.clear()
            builder.build(ev.get("bound", {}), cfg, CompactionState())
            per_build.append(max(n for n, _ in sizes))
        pipe.fold(ev)
    third = len(per_build) // 3
    middle, last = per_build[third : 2 * third], per_build[2 * third :]
    assert len(pipe.history) > 290
    assert max(last) <= max(middle)
    assert max(last) < len(pipe.history) // 4


def test_a_closed_build_whose_cut_holds_assembles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trimming turn whose cut holds (it drops what the last turn dropped, plus nothing) plans and
    sends one assembly, made from that cut: before, every trimming build assembled twice (first from the
    newest round, for the plan, then from the cut it found). Counted over a 150-round session with
    outputs of 5 to 150 lines at an 8k window: the builds that assemble once are at least the ones
    whose cut held (41 of them; 6 assembled once before), and none assembles more than twice."""
    counts: list[int] = []
    real = assembly_mod.history_section
    closed_build = [False]

    def counted(history: Any, pending: Any) -> Any:
        if closed_build[0]:
            counts[-1] += 1
        return real(history, pending)

    monkeypatch.setattr(assembly_mod, "history_section", counted)
    real_closed = SimBuilder._closed

    def flagged(self: SimBuilder, *a: Any, **kw: Any) -> Any:
        closed_build[0] = True
        counts.append(0)
        try:
            return real_closed(self, *a, **kw)
        finally:
            closed_build[0] = False

    monkeypatch.setattr(SimBuilder, "_closed", flagged)
    events = rounds_session("deepseek", 150, [1], [5, 60, 20, 150, 8], 2, 3, 0)
    replayer = Replayer(events, COUNTER)
    pipe = replayer.new_pipeline()
    builder = SimBuilder(pipe)
    cuts: list[int] = []
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            cfg = replace(pipe.config.with_overrides(window=8000), limits=CLOSED)
            builder.build(ev.get("bound", {}), cfg, CompactionState())
            assert builder._cut is not None
            cuts.append(builder._cut._lane(cfg).cut)
        pipe.fold(ev)
    held = sum(1 for a, b in zip(cuts, cuts[1:], strict=False) if a == b and a > 0)
    assert held >= 20  # the cut holds on many turns of this session (outputs of 5 to 150 lines)
    assert max(counts) <= 2
    assert sum(1 for n in counts[1:] if n == 1) >= held
