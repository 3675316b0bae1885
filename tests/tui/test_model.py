"""The pure parts: Timeline stepping rules and the synthetic source's determinism."""

from __future__ import annotations

from engine.whatif import Overrides
from inspector.sources import Source
from inspector.sources.synthetic import TIERS, SyntheticSource, make_trace
from inspector.timeline import Timeline


def test_timeline_follow_and_step_back() -> None:
    src = SyntheticSource(10)
    tl = Timeline(src.load_initial()[:5])
    assert tl.current == 4 and tl.follow
    tl.extend([src.trace(5)])
    assert tl.current == 5  # following
    tl.step(-2)
    assert not tl.follow
    tl.extend([src.trace(6)])
    assert tl.current == 3  # stepped back: stays
    tl.go(tl.last)
    assert tl.follow
    assert tl.index_of_turn(6) == 6 and tl.index_of_turn(99) is None


def test_interesting_turns_cover_every_kind() -> None:
    traces = SyntheticSource(40).load_initial()
    tl = Timeline(traces)
    assert {t["tier"] for t in traces} == set(TIERS)
    breaks = [i for i, t in enumerate(traces) if t["cache_break"]]
    assert breaks and set(breaks) <= set(tl.interesting)
    tl.go(0)
    assert tl.next_interesting() == tl.interesting[0]
    assert tl.prev_interesting() is None


def test_synthetic_is_deterministic_and_replan_reproduces() -> None:
    src = SyntheticSource(40)
    assert isinstance(src, Source)
    assert src.load_initial() == SyntheticSource(40).load_initial()
    assert src.replan(17, Overrides()) == src.trace(17)
    bigger = src.replan(30, Overrides(window=64000))
    assert bigger["limit"] == 64000 and TIERS.index(bigger["tier"]) < TIERS.index(src.trace(30)["tier"])
    assert make_trace(31, 40, overrides=Overrides(gates={"spill": False}))["skipped"][0]["step"] in ("spill", "llm_summary")
    forms = {s["form"] for t in src.load_initial() for s in t["sections"]}
    assert {"full", "trimmed", "cleared", "spilled", "dropped"} <= forms
    assert "tokens omitted" in src.section_content(35, "history")
