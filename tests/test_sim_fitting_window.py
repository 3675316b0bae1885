"""last_fitting_window (engine/sim/policies/base.py): the peers' fallback when a request outgrows the
window. It measures rounds from the newest back and stops at the first that does not fit: measuring
every message first read the whole conversation every turn (a session-wide what-if on a long recording
runs it for several policies a turn). Differential against the measure-everything version."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.sim.policies.base import TurnView, last_fitting_window, round_starts
from engine.tokens import CharTokenizer, TokenCounter


def _view(m: Measure, msgs: tuple[Message, ...]) -> TurnView:
    return TurnView(1, (), msgs, 200_000, 180_000, True, m)


def _reference(m: Measure, messages: tuple[Message, ...], budget: int) -> tuple[Message, ...]:
    sizes = [m.item(x) for x in messages]
    acc = 0
    start = len(messages)
    for s in reversed(round_starts(messages) or [0]):
        if acc + sum(sizes[s:start]) > budget and start < len(messages):
            break
        acc += sum(sizes[s:start])
        start = s
    return messages[start:]


def _session(spec: list[tuple[int, int]], task: bool) -> tuple[Message, ...]:
    msgs: list[Message] = [Message("user", (Text("Fix the failing test."),))] if task else []
    for k, (calls, size) in enumerate(spec):
        cs = tuple(ToolCall(f"c{k}.{i}", "bash", "{}") for i in range(calls))
        msgs.append(Message("assistant", (Text(f"step {k}"),) + cs))
        if cs:
            msgs.append(Message("user", tuple(ToolResult(c.id, "x" * size) for c in cs)))
    return tuple(msgs)


@settings(max_examples=150)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 900)), max_size=25),
    st.booleans(),
    st.integers(0, 3000),
)
def test_equals_measuring_every_message(spec: list[tuple[int, int]], task: bool, budget: int) -> None:
    msgs = _session(spec, task)
    m = Measure(TokenCounter(CharTokenizer()))
    expected = _reference(Measure(TokenCounter(CharTokenizer())), msgs, budget)
    assert last_fitting_window(_view(m, msgs), msgs, budget) == expected
    assert last_fitting_window(_view(m, msgs), msgs, budget) == expected  # counts remembered


class _Counting(Measure):
    measured = 0

    def item(self, it: Any) -> int:
        _Counting.measured += 1
        return super().item(it)

    def items(self, items: Any) -> int:
        seq = tuple(items)
        _Counting.measured += len(seq)
        return sum(Measure.item(self, i) for i in seq)


def test_reads_only_the_rounds_it_weighs() -> None:
    """2,001 messages, a budget that holds about ten rounds: the messages measured are those rounds and
    the one that did not fit (before: all 2,001)."""
    msgs = _session([(1, 400)] * 1000, True)
    m = _Counting(TokenCounter(CharTokenizer()))
    per_round = m.items(msgs[1:3])
    _Counting.measured = 0
    kept = last_fitting_window(_view(m, msgs), msgs, 10 * per_round + 5)
    assert len(kept) == 20
    assert _Counting.measured <= 22, _Counting.measured
