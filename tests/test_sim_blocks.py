"""simulate's own build of a turn (engine/sim/blocks.py) against Pipeline.build.

SimBuilder lays out what Pipeline.decide chose through a serializer that writes no fragment and hashes
no section; everything simulate reads must be what `Pipeline.build(..., body=False, lean=True)` gives:
the Blocks, the optimize steps, the latch flips, the ceiling and the next compaction state, and the
token-count check must raise exactly where the trace-based check did.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.assembly import wire_order
from engine.hashing import sha256_hex
from engine.optimize.context import OptimizeLimits
from engine.policy.settings import WAVE1, PolicySettings
from engine.recording.replay import Replayer
from engine.sim.blocks import CountsDisagree, SimBuilder
from engine.sim.simulate import simulate_events
from engine.sim.simulate_pass import UNBOUNDED
from tests.test_simulate import COUNTER, _synthetic

TRAJ = Path(
    os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    or Path(__file__).resolve().parents[2] / "shared" / "trajectories"
)
PYDICOM = TRAJ / "mini-swe-agent-pr816" / "deepseek_chat_dev__pydicom__pydicom-1413.traj.json"


@pytest.fixture(scope="module")
def synth_events() -> list[dict[str, Any]]:
    return list(_synthetic(turns=24).journal.events)


def _old_check(recorded: dict[str, tuple[str, int, int]], trace: dict[str, Any]) -> bool:
    """Whether the trace-based check (simulate before SimBuilder) raised: a section with the recorded
    hash and another token total."""
    for sec in trace["sections"]:
        rec = recorded.get(sec["id"])
        if rec is not None and rec[0] == sec["sha256"] and rec[1] != sec["tokens"]:
            return True
    return False


def _raises(built: Any, turn: int, recorded: dict[str, tuple[str, int, int]]) -> bool:
    try:
        built.check_counts(turn, recorded)
    except CountsDisagree:
        return True
    return False


def _compare_every_turn(events: list[dict[str, Any]], windows: tuple[int, ...]) -> tuple[int, int]:
    """(builds compared, of them with optimize steps taken)"""
    replayer = Replayer(events, COUNTER)
    pipe = replayer.new_pipeline()
    builder = SimBuilder(pipe)
    compared = acted = 0
    states: dict[int, Any] = {}
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            bound = ev.get("bound", {})
            cfgs = [pipe.config]
            for w in windows:
                tight = pipe.config.with_overrides(window=w)
                cfgs += [tight, replace(tight, limits=OptimizeLimits.all_closed())]
            cfgs.append(replace(pipe.config, window=UNBOUNDED, policy=PolicySettings(name=WAVE1)))
            for i, cfg in enumerate(cfgs):
                # Each column its own chain of states, as simulate runs them.
                st_ = states.get(i)
                ref = pipe.build(bound, cfg, st_, body=False, lean=True)
                got = builder.build(bound, cfg, st_)
                assert got.blocks == ref.serialized.blocks
                assert got.actions == [str(a["step"]) for a in ref.trace["actions"]]
                assert got.latch_flips == ref.trace["latch_flips"]
                assert got.ceiling == ref.trace["ceiling"]
                assert got.state == ref.state
                assert tuple(got.asm) == tuple(ref.asm)
                states[i] = ref.state or st_
                # The check on the recorded sections, and on each one's total moved by one.
                recorded = {
                    s["id"]: (s["sha256"], s["tokens"], s["items"])
                    for s in replayer.recorded_traces.get(ev["turn"], {}).get("sections", ())
                }
                for sid in [None, *recorded]:
                    rec = dict(recorded)
                    if sid is not None:
                        rec[sid] = (rec[sid][0], rec[sid][1] + 1, rec[sid][2])
                    assert _raises(got, ev["turn"], rec) == _old_check(rec, ref.trace)
                compared += 1
                acted += bool(got.actions)
        pipe.fold(ev)
    return compared, acted


def test_sim_builds_are_pipeline_builds_on_a_synthetic_session(synth_events: list[dict[str, Any]]) -> None:
    compared, acted = _compare_every_turn(synth_events, (9000, 6000))
    assert compared >= 25 * 6 and acted >= 25


def test_sim_builds_are_pipeline_builds_on_pydicom(tmp_path: Path) -> None:
    if not PYDICOM.exists():
        pytest.skip(f"real trajectory absent: {PYDICOM} (set CONTEXTPIPE_TRAJECTORIES)")
    from engine.importers import load
    from engine.importers.ingest import ingest
    from engine.sim.simulate_read import load_recording_events

    pipe, _report = ingest(load(PYDICOM), tmp_path / "p.cpsession")
    pipe.close()
    events, _ = load_recording_events(tmp_path / "p.cpsession")
    compared, acted = _compare_every_turn(events, (16000,))
    assert compared >= 90 * 4 and acted >= 40


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_count_check_raises_where_the_trace_check_did(
    synth_events: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Recorded sections with the right or a wrong hash, the right total or one off by a few tokens,
    or absent: the lazy check (hash only where the totals differ) raises exactly when the trace's did.
    (An item count other than the section's comes only with another hash in a real recording.)"""
    replayer = Replayer(synth_events, COUNTER)
    pipe = replayer.new_pipeline()
    builder = SimBuilder(pipe)
    turn = data.draw(st.integers(0, replayer.turns - 1))
    window = data.draw(st.sampled_from([None, 9000, 6000]))
    for ev in synth_events:
        if ev.get("k") == "request" and ev["turn"] == turn:
            pipe.begin_request(turn)
            cfg = pipe.config if window is None else pipe.config.with_overrides(window=window)
            ref = pipe.build(ev.get("bound", {}), cfg, body=False, lean=True)
            got = builder.build(ev.get("bound", {}), cfg)
            recorded: dict[str, tuple[str, int, int]] = {}
            for sec in ref.trace["sections"]:
                how = data.draw(st.sampled_from(["absent", "same", "tokens", "sha", "both"]))
                sha, tokens = sec["sha256"], sec["tokens"]
                # Item counts as recorded or not recorded (older traces); another count only beside
                # another hash (the same content has the same items).
                items = data.draw(st.sampled_from([sec["items"], -1]))
                if how in ("sha", "both"):
                    sha = "0" * 64
                    items = data.draw(st.sampled_from([items, sec["items"] + 1]))
                if how in ("tokens", "both"):
                    tokens += data.draw(st.integers(-3, 3).filter(bool))
                if how != "absent":
                    recorded[sec["id"]] = (sha, tokens, items)
            assert _raises(got, turn, recorded) == _old_check(recorded, ref.trace)
            # It names the section the check in wire order named (the first that disagrees there).
            first = next(
                (
                    s.id
                    for s in wire_order(got.asm)
                    if s.id in recorded
                    and recorded[s.id][1] != got.measure.section(s)
                    and recorded[s.id][2] in (-1, len(s.items))
                    and recorded[s.id][0] == sha256_hex("".join(i.sha for i in s.items))
                ),
                None,
            )
            try:
                got.check_counts(turn, recorded)
            except CountsDisagree as exc:
                assert f"section {first}:" in str(exc)
            else:
                assert first is None
            return
        pipe.fold(ev)
    raise AssertionError(f"turn {turn} not found")


def test_simulate_runs_no_trace_and_writes_no_fragment(
    synth_events: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """simulate builds through SimBuilder: neither the trace nor a message fragment is built (a
    regression here is only slower, so it is held here)."""
    import engine.pipeline_build as build_mod
    from engine.providers import anthropic, openai

    def boom(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("simulate built a trace or a message fragment")

    monkeypatch.setattr(build_mod, "build_trace", boom)
    monkeypatch.setattr(anthropic, "message_blocks", boom)
    monkeypatch.setattr(openai, "message_blocks", boom)
    from engine.sim.simulate import SimSettings

    r = simulate_events(synth_events, SimSettings(window=6000, policies=["all"]), counter=COUNTER)
    assert r.policies["pipeline"] is not None and r.policies["pipeline"].compactions


def test_simulate_writes_no_held_turns_decision_texts(
    synth_events: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn where cost_aware weighed a cut and held it writes why (the pay-back's fields, the reason)
    only for the trace: simulate reads the steps taken and the state, so its builds leave those texts
    to Decided.finish, which nothing calls (~4% of the 930-turn synthetic session's build pass)."""
    from engine.policy import cost_aware
    from engine.sim.simulate import SimSettings

    calls = {"held": 0, "payback": 0}
    real_held, real_payback = cost_aware._held, cost_aware.payback

    def held(*a: Any, **k: Any) -> Any:
        calls["held"] += 1
        return real_held(*a, **k)

    def payback(*a: Any, **k: Any) -> Any:
        calls["payback"] += 1
        return real_payback(*a, **k)

    monkeypatch.setattr(cost_aware, "_held", held)
    monkeypatch.setattr(cost_aware, "payback", payback)
    r = simulate_events(synth_events, SimSettings(window=6000), counter=COUNTER)
    p = r.policies["pipeline"]
    assert p is not None
    # Cuts were weighed on more turns than were compacted: some were held, and none wrote its texts.
    assert calls["payback"] > p.compactions
    assert calls["held"] == 0
