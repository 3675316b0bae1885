"""What the provider serializer (engine/providers/base.py) and simulate's Blocks layout
(engine/sim/block_layout.py) share of a section's recent runs: the run of the very same items
(engine/providers/recent_runs.py, `same_run`) and a sliding window's pairing scan (`_pair_stretched`).
test_sim_block_layout.py holds the two layouts equal on random request sequences; these hold the
shared pieces to what each layout wrote before."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.artifacts import Message, SectionItem, Text, ToolCall, ToolResult
from engine.errors import UnpairedToolResultError
from engine.providers.recent_runs import same_run
from engine.providers.stretch import SLICE_MIN
from engine.providers.tool_pairing import _START, _pair_stretched, _pairing_step


@dataclass
class _R:
    tok: str
    items: tuple[SectionItem, ...]
    marks: frozenset[int]


def test_the_same_items_run_is_found_by_identity_and_moved_to_the_front() -> None:
    a, b = (Text("a"),), (Text("b"),)
    r0, r1, r2 = _R("cl100k", a, frozenset()), _R("cl100k", b, frozenset({0})), _R("o200k", b, frozenset({0}))
    runs = [r0, r1, r2]
    assert same_run(runs, b, frozenset({0}), "cl100k") is r1
    assert runs == [r1, r0, r2] and runs[0] is r1
    assert same_run(runs, b, frozenset({0}), "o200k") is r2
    assert runs[0] is r2 and len(runs) == 3
    # Equal items in another tuple, other markers, another tokenizer: none; the order stays.
    assert same_run(runs, (Text("b"),), frozenset({0}), "cl100k") is None
    assert same_run(runs, b, frozenset(), "cl100k") is None
    assert same_run(runs, a, frozenset(), "o200k") is None
    assert runs[0] is r2
    assert same_run([], a, frozenset(), "cl100k") is None


def _round(k: int) -> list[Message]:
    call = f"c{k}"
    return [
        Message("assistant", (Text(f"step {k}"), ToolCall(call, "bash", "{}"))),
        Message("user", (ToolResult(call, f"out {k}"),)),
    ]


def _history(rounds: int) -> list[Message]:
    return [Message("user", (Text("task"),))] + [m for k in range(rounds) for m in _round(k)]


@given(
    rounds=st.integers(6, 14),
    h=st.integers(0, SLICE_MIN),
    tail=st.integers(0, SLICE_MIN),
    orphan=st.sampled_from(["", "head", "tail"]),
)
def test_a_windows_scan_is_the_whole_scan(rounds: int, h: int, tail: int, orphan: str) -> None:
    """The state after a window is the whole items' scan's, and a broken pairing in its head or tail
    raises as the whole scan raises (the stretch passed before: it is checked at its first message)."""
    items = _history(rounds)
    e = len(items) - tail
    if e - h <= 0:
        return
    bad = Message("user", (ToolResult("nobody", "x"),))
    if orphan == "head":
        items.insert(h, bad)
        h, e = h + 1, e + 1
    elif orphan == "tail":
        items.append(bad)
    got: object
    want: object
    try:
        want = _pairing_step(tuple(items), _START, {})
    except UnpairedToolResultError as exc:
        want = ("raises", exc.args)
    try:
        got = _pair_stretched(tuple(items), h, e, {})
    except UnpairedToolResultError as exc:
        got = ("raises", exc.args)
    assert got == want
    if orphan:
        assert isinstance(want, tuple) and want[0] == "raises"


def test_a_broken_stretch_start_is_found() -> None:
    """The stretch's first state-setting message meets the head's state: a result after a head whose
    last assistant message made no such call raises."""
    items = (Message("assistant", (Text("no calls"),)), *_history(8)[2:])  # starts at round 0's result
    with pytest.raises(UnpairedToolResultError):
        _pair_stretched(items, 1, len(items), {})
