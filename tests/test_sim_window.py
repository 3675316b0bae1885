"""A shifted request made as a Window on the run of the conversation's items (engine/sim/grown.py).

clear_tool_uses past its window sends the system Blocks, then the conversation from a start that moves
on or back by a round or two a call, then the newest items (a result cleared near the end). simulate made
each such call's ~4,800 Blocks as a list, the stretch kept from the last call copied; `shifted` makes it a
Window on the last call's run. Held here, against plain lists, on random sequences of moves, appends and
edits near the end: every view made reads as the list it stands for, then and after the later ones were
made on the same run; the shared length of two views is shared_prefix_len's; a window that only moves
is made on one run, never copied; and a column of such calls has the figures of the same calls as tuples.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.providers.base import Block
from engine.sim import cachesim
from engine.sim.grown import HEAD_MAX, TAIL, Grown, Window, shifted
from engine.sim.policies.clear_tool_uses import ClearToolUses
from tests.test_sim_grown import assert_reads_as, column_figures
from tests.test_sim_peer_work import ClearToolUsesFromScratch, session_views

SYSTEM = ("sys0", "sys1")


@st.composite
def _moves(draw: Any) -> list[tuple[str, int]]:
    return draw(
        st.lists(
            st.tuples(st.sampled_from(["on", "back", "append", "edit", "same"]), st.integers(1, 2 * TAIL)),
            min_size=1,
            max_size=40,
        )
    )


def _requests(first: int, moves: list[tuple[str, int]]) -> list[list[str]]:
    """The requests of a window over a growing conversation: the system items, then conv[start:]."""
    conv = [f"c{i}" for i in range(first)]
    n = first
    start = 0
    out = [[*SYSTEM, *conv]]
    for op, x in moves:
        if op == "on":
            start = min(len(conv), start + x)
        elif op == "back":
            start = max(0, start - x)
        elif op == "append":
            conv += [f"c{n + i}" for i in range(x)]
            n += x
        elif op == "edit" and conv:  # an item near the end made again (a result cleared)
            conv[max(0, len(conv) - 1 - x % 9)] = f"e{n}"
            n += 1
        out.append([*SYSTEM, *conv[start:]])
    return out


def made_shifted(prev: Any, want: list[Any]) -> tuple[Any, int, tuple[int, int, int]]:
    """`want` made from `prev` as simulate makes a long shifted call: a Window when `shifted` can, else
    a Grown of its own list; with the length it shares with `prev` and the stretch found (h, a, m)."""
    common = cachesim.shared_prefix_len(list(prev), want)
    h, a, m = cachesim.find_stretch(list(prev), want[common:], common)
    if m:
        s = common + h
        view = shifted(prev, common, want[common:s], a, m, want[s + m :])
        if view is not None:
            return view, common, (h, a, m)
    return Grown.of(want), common, (h, a, m)


def _made(prev: Any, want: list[str]) -> tuple[Any, bool]:
    """made_shifted's view, and whether it was a Window."""
    view = made_shifted(prev, want)[0]
    return view, type(view) is Window


@settings(max_examples=300, deadline=None)
@given(first=st.integers(0, 4 * TAIL), moves=_moves(), probe=st.integers(-200, 200))
def test_every_window_reads_as_the_list_it_stands_for(first: int, moves: list[Any], probe: int) -> None:
    reqs = _requests(first, moves)
    views: list[Any] = [Grown.of(reqs[0])]
    for want in reqs[1:]:
        views.append(_made(views[-1], want)[0])
    # Every view as it stands for its list, after every later view was made on (maybe) the same run.
    for g, want in zip(views, reqs, strict=True):
        assert_reads_as(g, want, probe)
    # Two views: the shared length of their items, as shared_prefix_len of the lists reads it.
    for a, b, la, lb in zip(views, views[1:], reqs, reqs[1:], strict=False):
        assert cachesim.shared_prefix_len(a, b) == cachesim.shared_prefix_len(la, lb)
        if type(a) is Window and type(b) is Window:
            k = a.shared_run(b)
            if k >= 0:  # known shared: the very objects
                assert all(x is y for x, y in zip(la[:k], lb[:k], strict=False))


def test_a_window_that_moves_on_and_back_is_made_on_one_run() -> None:
    conv = [f"c{i}" for i in range(1000)]
    first = Grown.of([*SYSTEM, *conv])
    run = first._run
    prev: Any = first
    start = 50
    for i in range(300):
        # On by a few, back by a few (a cleared result frees room), a new message now and then.
        start = max(0, start + (5 if i % 3 else -7))
        if i % 4 == 0:
            conv.append(f"n{i}")
        want = [*SYSTEM, *conv[start:]]
        view, was_window = _made(prev, want)
        assert was_window and view._run is run and list(view) == want
        prev = view
    # The run holds the conversation once, as it grew: not a copy a call.
    assert len(run) <= len(SYSTEM) + len(conv)


def test_what_a_window_cannot_stand_for_is_left_to_the_caller() -> None:
    g = Grown.of([f"c{i}" for i in range(200)])
    items = list(g)
    # The stretch's items past it were the last call's, inside its run: the run is not cut.
    assert shifted(g, 2, (), 10, 100, ["z"]) is None
    # `fresh` that are not the run's items before the stretch (another conversation's).
    assert shifted(g, 2, ["y"], 10, len(g) - 10, []) is None
    # A head longer than HEAD_MAX, a plain list, a view not at its run's end.
    assert shifted(g, HEAD_MAX + 1, (), HEAD_MAX + 1, len(g) - HEAD_MAX - 1, []) is None
    assert shifted(items, 2, (), 10, len(g) - 10, []) is None
    w = shifted(g, 2, items[8:10], 10, len(g) - 10, ["a"])
    assert w is not None and list(w) == [*items[:2], *items[8:], "a"]
    assert shifted(g, 2, (), 20, len(g) - 20, []) is None  # (g's run was appended to by w)


def _block(name: str) -> Block:
    return Block("history", "messages", name, 3 + sum(map(ord, name)) % 5, False)


@settings(max_examples=100, deadline=None)
@given(first=st.integers(0, 60), moves=_moves(), rules=st.sampled_from(["deepseek", "openai", "anthropic"]))
def test_a_column_of_window_calls_has_the_figures_of_tuples(first: int, moves: list[Any], rules: str) -> None:
    """simulate's calls from `GROWN_FROM` Blocks on as Grown and Window (every shifted one made on the last
    call's run), else tuples: the figures are those of every call a tuple."""
    blocks: dict[str, Block] = {}
    reqs = [[blocks.setdefault(x, _block(x)) for x in r] for r in _requests(first, moves)]
    assert column_figures(reqs, rules, 0) == column_figures(reqs, rules, 10**9)


@pytest.mark.parametrize("markers", [True, False])
def test_clear_tool_uses_past_its_window_sends_windows_on_one_run(markers: bool) -> None:
    """clear_tool_uses' own requests past its window (engine/sim/policies/clear_tool_uses.py _shifted):
    each equals the request laid out whole, and those that move are Windows on one run."""
    p, ref = ClearToolUses(), ClearToolUsesFromScratch()
    windows = 0
    runs = set()
    for v in session_views(400, 6_000):
        v = replace(v, markers=markers)
        pr = p.request(v)
        assert list(pr.blocks) == ref.request(v).blocks
        if type(pr.blocks) is Window:
            windows += 1
            runs.add(id(pr.blocks.parts()[1]))
    assert windows > 100 and len(runs) == 1
