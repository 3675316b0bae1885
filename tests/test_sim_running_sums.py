"""simulate's carried scans (engine/sim/running_sums.py, shared by closed_cut and wave1_lane) go on from
what they summed while the conversation only grows, and start over, to the same sums as a fresh scan,
when it did not: an agent's edit (HistoryLog.replace), another Measure, a shorter history; and their
bisection over the sums chooses the rounds history_ops.oldest_to_drop chooses."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.history_rounds import history_rounds
from engine.optimize.history_ops import oldest_to_drop
from engine.recording.history_log import HistoryLog
from engine.sim.wave1_lane import Wave1Lane
from engine.tokens import CharTokenizer, TokenCounter


def _round(k: int, size: int) -> list[Message]:
    return [
        Message("assistant", (ToolCall(f"c{k}", f"tool{k % 3}", "x" * k),)),
        Message("user", (ToolResult(f"c{k}", "y" * size),)),
    ]


def _fresh(log: HistoryLog, m: Measure) -> tuple[list[int], list[int], set[str], list[tuple[int, int]]]:
    lane = Wave1Lane()
    lane.extend(log, m)
    return lane.cum, lane.starts, lane.names, lane.results


def test_appends_extend_and_an_edit_starts_over() -> None:
    m = Measure(TokenCounter(CharTokenizer()))
    log = HistoryLog(None)
    log.append(Message("user", (Text("the task"),)))
    lane = Wave1Lane()
    for k in range(1, 6):
        for msg in _round(k, 40 * k):
            log.append(msg)
        lane.extend(log, m)
        assert (lane.cum, lane.starts, lane.names, lane.results) == _fresh(log, m)
    summed = lane.cum
    for msg in _round(6, 10):
        log.append(msg)
    lane.extend(log, m)
    assert lane.cum is summed  # went on from what it had (extended in place)

    # An agent's edit of an earlier reply: the sums before the newest message change, and are redone.
    log.replace(1, Message("assistant", (Text("reworded " * 30), ToolCall("c1", "tool1", "x"))))
    lane.extend(log, m)
    assert lane.cum is not summed
    assert (lane.cum, lane.starts, lane.names, lane.results) == _fresh(log, m)

    # Another Measure (a swapped tokenizer's, say) starts over too.
    other = Measure(TokenCounter(CharTokenizer()))
    lane.extend(log, other)
    assert lane.cum == _fresh(log, other)[0]


def test_a_history_that_did_not_just_grow_starts_over() -> None:
    m = Measure(TokenCounter(CharTokenizer()))
    long = [Message("user", (Text("the task"),)), *_round(1, 300), *_round(2, 20)]
    lane = Wave1Lane()
    lane.extend(long, m)
    short = [long[0], *_round(3, 5)]  # another conversation of its own
    lane.extend(short, m)
    fresh = Wave1Lane()
    fresh.extend(short, m)
    assert (lane.cum, lane.starts, lane.names, lane.results) == (
        fresh.cum,
        fresh.starts,
        fresh.names,
        fresh.results,
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 400), min_size=3, max_size=30), st.data())
def test_oldest_rounds_is_oldest_to_drops_choice(sizes: list[int], data: st.DataObject) -> None:
    """The bisection simulate's lanes share (closed_cut over every droppable round, wave1_lane over
    those drop_rounds kept) chooses as the budget guarantee's own, over the whole history's tuple."""
    m = Measure(TokenCounter(CharTokenizer()))
    items = [Message("user", (Text("the task"),))]
    for k, size in enumerate(sizes):
        items += _round(k, size)
    lane = Wave1Lane()
    lane.extend(items, m)
    droppable = history_rounds(tuple(items))[1:-1]  # every round but the task and the newest
    assert [r[0] for r in droppable] == lane.starts[:-1]
    lo = data.draw(st.integers(0, len(droppable) - 1))
    hi = data.draw(st.integers(lo + 1, len(droppable)))
    held = lane.cum[lane.starts[hi]] - lane.cum[lane.starts[lo]]
    need = data.draw(st.integers(1, held + 50))
    count, tokens = oldest_to_drop(tuple(items), droppable[lo:hi], lane.cum[-1], need, m)
    assert lane.oldest_rounds(lo, hi, need) == (lo + count, tokens)
