"""simulate's conversion of a sliding window's request (engine/sim/simulate_column.py, `_stretch`).

The gates-closed column's request is a new first message (the task with its omission note), then a
stretch the previous request sent from a later point on, then the newest round. `_simulate` converts
each distinct Block for the cache simulator once, and takes the stretch's conversions from the previous
call as a slice instead of looking each Block up again. Held here: over varied request sequences
(windows that slide by any amount, heads of new Blocks, the same Block object at several positions,
equal but distinct Blocks, markers), the calls handed to the simulator are the very same objects and the
figures the same as with the stretch off; on a real gates-closed column nearly every Block after the
shared prefix comes from a stretch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.providers.base import Block
from engine.sim import cachesim
from engine.sim import simulate_column as sim_mod
from engine.sim.cachesim import STRETCH_MIN
from engine.sim.pricing import load_prices
from engine.sim.simulate_column import _simulate, _stretch
from engine.sim.simulate_marks import _marks_after, _marks_shifted
from engine.sim.simulate_requests import _Req

TABLE = load_prices()


def _run(
    reqs: list[_Req], rules: str, monkeypatch: pytest.MonkeyPatch, stretch: bool, conv: dict[Any, Any]
) -> tuple[Any, list[Any]]:
    seen: list[Any] = []
    real = cachesim.CacheSimulator.simulate

    def capture(self: cachesim.CacheSimulator, calls: Any) -> Any:
        seen.extend(calls)
        return real(self, calls)

    with monkeypatch.context() as mp:
        mp.setattr(cachesim.CacheSimulator, "simulate", capture)
        if not stretch:
            mp.setattr(sim_mod, "_stretch", lambda *_a: (0, 0, 0))
        fig = _simulate(
            "x", reqs, rules=rules, model="deepseek-chat", table=TABLE, outputs={},
            options={}, link_outputs=rules == "deepseek", automatic_prefix=rules != "anthropic",
            converted=conv,
        )  # fmt: skip
    return fig, seen


@st.composite
def _sessions(draw: Any, markers: bool = False) -> list[_Req]:
    """Requests over a pool of Blocks: a fixed head, then a window that slides by a drawn amount each
    call behind a head of new Blocks, the newest Blocks appended; some Blocks repeat (the same object
    at several positions) and some are equal copies of earlier ones."""
    pool: list[Block] = []

    def block(i: int) -> Block:
        if pool and draw(st.integers(0, 9)) == 0:
            old = draw(st.sampled_from(pool))
            return old if draw(st.booleans()) else replace(old)  # the same object, or an equal copy
        b = Block("history", "messages", f"m{i}", 10 + i % 7, markers and draw(st.integers(0, 9)) == 0)
        pool.append(b)
        return b

    head = [Block("tools", "tools", "T", 50, False), Block("identity", "system", "S", 40, False)]
    window = [block(i) for i in range(draw(st.integers(0, 60)))]
    n = 60
    reqs: list[_Req] = []
    for k in range(draw(st.integers(1, 12))):
        lead = [
            Block("history", "messages", f"note{k}.{j}", 8, False) for j in range(draw(st.integers(0, 5)))
        ]
        reqs.append(_Req(k, 1.0 + k, [*head, *lead, *window], [], []))
        drop = draw(st.integers(0, 12))
        window = window[drop:] + [block(n + j) for j in range(draw(st.integers(0, 6)))]
        n += 6
    return reqs


@settings(max_examples=150, deadline=None)
@given(
    reqs=_sessions(),
    rules=st.sampled_from(["deepseek", "openai", "anthropic"]),
)
def test_stretch_gives_the_same_calls_and_figures(reqs: list[_Req], rules: str) -> None:
    _same_with_and_without(reqs, rules)


@settings(max_examples=150, deadline=None)
@given(reqs=_sessions(markers=True), rules=st.sampled_from(["deepseek", "openai"]))
def test_stretch_with_markers_gives_the_same_calls_and_figures(reqs: list[_Req], rules: str) -> None:
    """Blocks marked anywhere (the prefix each request is checked against follows the markers)."""
    _same_with_and_without(reqs, rules)


@settings(max_examples=300, deadline=None)
@given(reqs=_sessions(markers=True))
def test_shifted_markers_equal_a_scan(reqs: list[_Req]) -> None:
    prev: list[Block] = []
    marks: list[int] = []
    for r in reqs:
        common = cachesim.shared_prefix_len(prev, r.blocks)
        new = r.blocks[common:]
        h, a, m = _stretch(prev, new, common)
        want = _marks_after(marks, common, new)
        if m:
            assert _marks_shifted(marks, common, new[:h], new[h + m :], a, m) == want
        prev, marks = r.blocks, want


def _same_with_and_without(reqs: list[_Req], rules: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        # One conversion table for both (as simulate shares it between columns): each distinct Block's
        # simulator Block is one object, so the calls can be compared object by object.
        conv: dict[Any, Any] = {}
        ref_fig, ref_calls = _run(reqs, rules, mp, False, conv)
        fig, calls = _run(reqs, rules, mp, True, conv)
    assert fig == ref_fig
    assert len(calls) == len(ref_calls)
    for c, r in zip(calls, ref_calls, strict=True):
        assert c == r
        assert all(x is y for x, y in zip(c.blocks, r.blocks, strict=True))  # the very same objects


def test_stretch_finds_a_sliding_window() -> None:
    blocks = [Block("history", "messages", f"m{i}", 10, False) for i in range(100)]
    prev = blocks[:2] + blocks[10:60]
    new = [Block("history", "messages", "note", 5, False), *blocks[14:60], *blocks[60:63]]
    h, a, m = _stretch(prev, new, 0)
    assert (h, a, m) == (1, 6, 46)
    assert new[h : h + m] == prev[a : a + m]
    assert _stretch(prev, new[: STRETCH_MIN - 1], 0) == (0, 0, 0)  # too short to look for one
    assert _stretch(prev, [Block("history", "messages", f"x{i}", 1, False) for i in range(40)], 0) == (
        0,
        0,
        0,
    )


def test_the_gates_closed_column_converts_by_stretch(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a session whose gates-closed column slides every turn, the stretches cover nearly every Block
    of the requests that send more than a few new Blocks (the code before looked each of them up: ~180
    a call on the 930-call synthetic session)."""
    from engine.sim.simulate import SimSettings, simulate_events
    from tests.support.sim_builds import coding_session
    from tests.test_simulate import COUNTER

    events = coding_session("deepseek", 80, [2, 5], 2, None, 3)
    after = [0]
    stretched = [0]
    real = sim_mod._stretch

    def counted(prev: Any, new: Any, common: int) -> tuple[int, int, int]:
        out = real(prev, new, common)
        if len(new) >= STRETCH_MIN:
            after[0] += len(new)
            stretched[0] += out[2]
        return out

    monkeypatch.setattr(sim_mod, "_stretch", counted)
    simulate_events(events, SimSettings(window=6000), counter=COUNTER)
    assert after[0] > 1000
    assert stretched[0] >= 0.9 * after[0]
