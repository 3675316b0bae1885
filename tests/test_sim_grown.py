"""Requests made as extensions of the last one (engine/sim/grown.py) and what reads them.

The paper column and clear_tool_uses (until its window fills) send the last request with a few Blocks
changed near its end and some appended; made whole each call (and copied again in the simulator), their
per-call work grew with the session. A `Grown` is run[:k] + a short tail on a run only appended to.
Held here, against plain lists: whatever sequence of extensions (from the newest view or an older one,
keeping any prefix, appending anything), every view made reads as the list it stands for, then and after
the later ones were made; simulate's shared length of two views is shared_prefix_len's; the peers'
requests are the ones made from scratch; the simulator's calls of a paper column share one run.
"""

from __future__ import annotations

import operator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.providers.base import Block
from engine.sim import cachesim, simulate_column
from engine.sim.grown import TAIL, Grown
from engine.sim.policies.base import HistoryBlocks, TurnView, message_block, with_tail_marker
from engine.sim.policies.clear_tool_uses import ClearToolUses
from engine.sim.policies.paper import Paper
from engine.sim.simulate_column import _shared_len, _simulate
from engine.sim.simulate_requests import _Req
from tests.test_sim_peer_work import SYSTEM, ClearToolUsesFromScratch, M, convo
from tests.test_sim_shared_len import TABLE


@st.composite
def _extensions(draw: Any) -> list[tuple[int, int, list[str]]]:
    """(view to extend from, items it keeps, items appended) per step; the items are strings made once
    each, an equal copy now and then (equal by value, another object)."""
    n = 0
    steps = []
    for s in range(draw(st.integers(1, 25))):
        frm = draw(st.one_of(st.just(s), st.integers(0, s)))  # mostly the newest view
        keep = draw(st.integers(0, 80))
        new = []
        for _ in range(draw(st.integers(0, 2 * TAIL))):
            n += 1
            new.append(f"x{n}")
        steps.append((frm, keep, new))
    return steps


@settings(max_examples=300, deadline=None)
@given(first=st.integers(0, 3 * TAIL), steps=_extensions(), probe=st.integers(-100, 100))
def test_every_view_reads_as_the_list_it_stands_for(first: int, steps: list[Any], probe: int) -> None:
    start = [f"s{i}" for i in range(first)]
    views: list[Grown[str]] = [Grown.of(start)]
    lists = [start]
    for frm, keep, new in steps:
        keep = min(keep, len(lists[frm]))
        views.append(views[frm].extended(keep, new))
        lists.append(lists[frm][:keep] + new)
    # Every view as it stands for its list, after every later view was made on (maybe) the same run.
    for g, want in zip(views, lists, strict=True):
        assert_reads_as(g, want, probe)
    for a, b, la, lb in zip(views, views[1:], lists, lists[1:], strict=False):
        k = a.shared_run(b)
        if k >= 0:  # known shared: the very objects
            assert all(x is y for x, y in zip(la[:k], lb[:k], strict=True))


def assert_reads_as(g: Any, want: list[str], probe: int) -> None:
    """`g` (a Grown or a Window) reads as the list `want` every way it is read: length, items (the same
    objects), indices from either end, slices (tuples), items(i, j) (a list), iteration, equality."""
    assert len(g) == len(want) and list(g) == want and g == want and g == tuple(want)
    assert all(map(operator.is_, g, want))
    if want:
        i = probe % len(want)
        assert g[i] is want[i] and g[i - len(want)] is want[i]
    lo, hi = probe // 3, probe % 7 + len(want) // 2
    assert g[lo:hi] == tuple(want[lo:hi])
    assert g[::2] == tuple(want[::2])
    i, j = sorted((abs(probe) % (len(want) + 1), abs(probe // 3) % (len(want) + 1)))
    got = g.items(i, j)
    assert type(got) is list and got == want[i:j] and all(map(operator.is_, got, want[i:j]))
    with pytest.raises(IndexError):
        g[len(want)]


def test_a_view_extended_from_its_end_is_made_without_copying_its_run() -> None:
    g = Grown.of([f"m{i}" for i in range(1000)])
    run = g._run
    for i in range(200):
        # One of the last few items changed (so those after it are made again), then one appended.
        d = i % 9
        g = g.extended(len(g) - d, [*(f"e{i}.{j}" for j in range(d)), f"n{i}"])
        assert g._run is run
    # Changed below its tail: copied (a run is never written below a view's part).
    h = g.extended(len(g) - TAIL - 1, ["z"])
    assert h._run is not run and list(h) == [*list(g)[: len(g) - TAIL - 1], "z"]


def _block(i: int, marker: bool = False) -> Block:
    return Block("history", "messages", f"m{i}", 3 + i % 5, marker)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 6), st.booleans(), st.booleans()), max_size=20
    )
)
def test_shared_len_of_two_views_is_shared_prefix_len(steps: list[tuple[int, int, bool, bool]]) -> None:
    """Extensions that keep a part, append new Blocks or equal copies of the ones they dropped, or mark
    their last Block (a rolling marker): the shared length is the lists' by value."""
    n = 100
    cur: Grown[Block] = Grown.of([_block(i) for i in range(50)])
    for back, more, copies, mark in steps:
        keep = max(0, len(cur) - back)
        dropped = list(cur)[keep:]
        new = [replace(b) for b in dropped] if copies else []
        new += [_block(n + i) for i in range(more)]
        n += more
        if mark and new:
            new[-1] = replace(new[-1], marker=True)
        nxt = cur.extended(keep, new)
        want = cachesim.shared_prefix_len(list(cur), list(nxt))
        assert _shared_len(cur, nxt) == want
        # Two Grown compared through their runs (on one run, or each on its own: the same objects).
        assert cachesim.shared_prefix_len(cur, nxt) == want
        assert cachesim.shared_prefix_len(Grown.of(list(cur)), nxt) == want
        assert cachesim.shared_prefix_len(nxt, Grown.of(list(cur))) == want
        cur = nxt


def _views(markers: bool, k0: int = 1) -> list[TurnView]:
    history = HistoryBlocks()
    whole = convo(70)
    views = [
        TurnView(k, SYSTEM, whole[: 1 + 2 * k], 8_000, 7_200, markers, M, history) for k in range(k0, 71)
    ]
    # A conversation that does not extend the last (another one), then the first again.
    other = convo(3)
    return views[:40] + [TurnView(41, SYSTEM, other, 8_000, 7_200, markers, M, history)] + views[40:]


@pytest.mark.parametrize("markers", [True, False])
def test_paper_requests_are_the_whole_conversation(markers: bool) -> None:
    p = Paper()
    for v in _views(markers):
        got = p.request(v).blocks
        want = with_tail_marker(list(v.system) + [message_block(m, v.measure) for m in v.messages], markers)
        assert list(got) == want


@pytest.mark.parametrize("markers", [True, False])
def test_clear_tool_uses_requests_are_made_from_the_last_as_from_scratch(markers: bool) -> None:
    """The request built on the last one's run (the `same` part kept) equals the request laid out whole
    (each message's Block)."""
    p, ref = ClearToolUses(), ClearToolUsesFromScratch()
    grown = carried = 0
    last: Any = None
    for v in _views(markers):
        pr = p.request(v)
        assert list(pr.blocks) == ref.request(v).blocks
        grown += pr.same is not None and pr.actions == ["clear_tool_uses"]
        # The edited conversation, carried turn to turn, on the last turn's run (not a tuple a turn).
        edited = p._last_edit[3] if p._last_edit is not None else None
        if (
            isinstance(last, Grown)
            and isinstance(edited, Grown)
            and last.shared_run(edited) >= len(last) - TAIL
        ):
            carried += 1
        last = edited
    assert grown > 10 and carried > 10


def test_a_paper_columns_calls_share_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    real = cachesim.CacheSimulator.step

    def capture(self: cachesim.CacheSimulator, call: Any) -> Any:
        seen.append(call.blocks)
        return real(self, call)

    monkeypatch.setattr(cachesim.CacheSimulator, "step", capture)
    monkeypatch.setattr(simulate_column, "GROWN_FROM", 0)  # (these requests are short: as the long ones)
    p = Paper()
    reqs = [_Req(v.turn, 1.0 + v.turn, p.request(v).blocks, [], []) for v in _views(False)[:40]]  # type: ignore[arg-type]
    _simulate(
        "paper", reqs, rules="deepseek", model="deepseek-chat", table=TABLE, outputs={}, options={},
        link_outputs=True, automatic_prefix=True, scale=1.0,
    )  # fmt: skip
    assert len(seen) == 40
    assert all(a.shared_run(b) >= len(a) - TAIL for a, b in zip(seen, seen[1:], strict=False))
    for a, r in zip(seen, reqs, strict=True):
        assert [x.sha for x in a] == [b.sha for b in r.blocks]


@st.composite
def _windowed(draw: Any) -> list[list[Block]]:
    """Requests of a growing conversation: appended to, a Block near the end rewritten, and past a
    point a window whose start moves on and back (to where an earlier request started: the simulator
    takes that one's figures up again), as clear_tool_uses sends them."""
    system = Block("tools", "tools", "T", 50, False)
    conv = [_block(i) for i in range(draw(st.integers(0, 30)))]
    n = 1000
    start = 0
    out = []
    for _ in range(draw(st.integers(2, 30))):
        op = draw(st.sampled_from(["append", "edit", "on", "back"]))
        if op == "append" or not conv:
            conv += [_block(n + i) for i in range(draw(st.integers(1, 5)))]
            n += 5
        elif op == "edit":
            conv[max(0, len(conv) - draw(st.integers(1, 8)))] = _block(n)
            n += 1
        elif op == "on":
            start = min(len(conv) - 1, start + draw(st.integers(1, 6)))
        else:
            start = max(0, start - draw(st.integers(1, 6)))
        out.append([system, *conv[start:]])
    return out


@settings(max_examples=150, deadline=None)
@given(
    reqs=_windowed(),
    rules=st.sampled_from(["deepseek", "openai", "anthropic"]),
    grown_from=st.integers(0, 40),
)
def test_a_column_of_grown_and_tuple_calls_has_the_figures_of_tuples(
    reqs: list[list[Block]], rules: str, grown_from: int
) -> None:
    """Calls handed over as a Grown from `grown_from` Blocks on, as tuples below it (a column's calls
    cross the line both ways): the figures are those of every call a tuple."""
    assert column_figures(reqs, rules, grown_from) == column_figures(reqs, rules, 10**9)


def column_figures(reqs: list[list[Block]], rules: str, grown_from: int) -> Any:
    """simulate's figures of a column of `reqs`, its calls from `grown_from` Blocks on handed to the
    simulator as a Grown (or a Window, shifted), as tuples below it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(simulate_column, "GROWN_FROM", grown_from)
        fig = _simulate(
            "x", [_Req(k, 1.0 + k, r, [], []) for k, r in enumerate(reqs)], rules=rules,
            model="deepseek-chat", table=TABLE, outputs={}, options={}, link_outputs=rules == "deepseek",
            automatic_prefix=rules != "anthropic", scale=1.0,
        )  # fmt: skip
    return fig.to_json(per_turn=True)
