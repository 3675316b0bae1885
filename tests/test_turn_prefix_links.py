"""A history's prefix, verified once per pair of tuples (Measure.starts_with).

Every memo of a build asks whether this build's history starts with one an earlier build saw (section
runs, running sums, rounds, first_over, the remembered cuts of the budget guarantee and of cost_aware,
cost_aware's lineage). By value each question copies and compares the whole prefix; the gates-closed
column of a long simulate asked it of its whole uncompacted conversation several times a build. Now
the first answer is by value and the later ones (and those about an older prefix of a verified one)
follow the remembered links. The answers must be the comparison's: a property test against slicing,
the append-only side-by-side test (tests/test_turn_lineage.py) with links for every prefix against
none, and a count of element comparisons that fails on d85e1a7 (three full comparisons, now one).
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.optimize.history_ops import cut_holds_after_appends
from engine.tokens import CharTokenizer, TokenCounter


def _round(t: int) -> tuple[Message, Message]:
    return (
        Message("assistant", (Text(f"step {t}"), ToolCall(f"c{t}", "bash", "{}"))),
        Message("user", (ToolResult(f"c{t}", f"output {t} " + "x" * (t % 7)),)),
    )


def _history(rounds: int) -> tuple[Message, ...]:
    out: list[Message] = [Message("user", (Text("the task"),))]
    for t in range(rounds):
        out += _round(t)
    return tuple(out)


def _measure(prefix_min: int) -> Measure:
    m = Measure(TokenCounter(CharTokenizer()))
    m.prefix_min = prefix_min
    return m


# Operations on a pool of tuples: append a round, copy (equal items, none the same object), replace the
# last item by an equal copy (the message a build closes from pending parts), edit an item, drop the tail.
OPS = ("append", "append", "append", "copy", "last_copy", "edit", "drop")


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 50)), min_size=1, max_size=40),
    queries=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), min_size=1, max_size=60),
    prefix_min=st.sampled_from((1, 2, 5)),
)
def test_starts_with_answers_as_the_comparison(
    ops: list[tuple[str, int]], queries: list[tuple[int, int]], prefix_min: int
) -> None:
    m = _measure(prefix_min)
    pool: list[tuple[Any, ...]] = [_history(2)]
    for op, r in ops:
        base = pool[r % len(pool)]
        if op == "append":
            new = base + _round(100 + r)
        elif op == "copy":
            new = tuple(copy.copy(x) for x in base)
        elif op == "last_copy":
            new = base[:-1] + (copy.copy(base[-1]),) if base else base
        elif op == "edit" and base:
            i = r % len(base)
            new = base[:i] + (Message("user", (Text(f"edited {r}"),)),) + base[i + 1 :]
        else:
            new = base[: max(0, len(base) - 1 - r % 3)]
        pool.append(new)
        # Ask as the memos do, in the order the operations made them (links form along the way).
        for a, b in queries[: r % 4]:
            x, y = pool[a % len(pool)], pool[b % len(pool)]
            assert m.starts_with(x, y) == (x[: len(y)] == y)
    for a, b in queries:
        x, y = pool[a % len(pool)], pool[b % len(pool)]
        assert m.starts_with(x, y) == (x[: len(y)] == y)
        if y:  # (a remembered cut's history holds at least the task)
            assert cut_holds_after_appends(y, x, 0, 5, 5, m) == cut_holds_after_appends(y, x, 0, 5, 5)


class _Counted(Message):
    """A message whose value comparisons are counted (a by-value prefix check of copies compares each)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Counted.compared += 1
        return super().__eq__(other)

    __hash__ = Message.__hash__


def _counted_history(n: int) -> tuple[_Counted, ...]:
    out = [_Counted("user", (Text("the task"),))]
    for t in range(n):
        a, u = _round(t)
        out += [_Counted(a.role, a.parts), _Counted(u.role, u.parts)]
    return tuple(out)


def test_a_builds_memos_compare_a_long_prefix_once() -> None:
    # The memos of one build ask about the same pair (this build's history, the last build's): running
    # sums, rounds, the first result over a limit. `items` holds equal copies of `prev`'s messages, so
    # each by-value check compares every one of them: d85e1a7 compared the 601 messages in each of the
    # three (1,803 comparisons, and more for the ends it checked first); now the first check does.
    prev = _counted_history(300)
    items = tuple(copy.copy(x) for x in prev) + _round(300)
    m = Measure(TokenCounter(CharTokenizer()))
    m.cumulative(prev)
    m.rounds(prev)
    m.first_over(prev, sys.maxsize)
    _Counted.compared = 0
    got = (m.cumulative(items), m.rounds(items), m.first_over(items, sys.maxsize))
    assert _Counted.compared <= len(prev) + 6, _Counted.compared  # (and the two ends of each check)
    fresh = Measure(TokenCounter(CharTokenizer()))
    assert got == (fresh.cumulative(items), fresh.rounds(items), fresh.first_over(items, sys.maxsize))


def test_an_older_prefix_is_reached_through_the_links() -> None:
    # Three builds' histories, each appending to the one before: once each link is verified, a check
    # of the newest against the oldest (a cut remembered two builds ago) compares no message.
    h0 = _counted_history(300)
    h1 = tuple(copy.copy(x) for x in h0) + _round(300)
    h2 = tuple(copy.copy(x) for x in h1) + _round(301)
    m = Measure(TokenCounter(CharTokenizer()))
    assert m.starts_with(h1, h0) and m.starts_with(h2, h1)
    _Counted.compared = 0
    assert m.starts_with(h2, h0)
    assert _Counted.compared <= 2  # the two ends, checked before the links are followed
    edited = h1[:5] + (Message("user", (Text("edited"),)),) + h1[6:]
    assert not m.starts_with(edited, h0)


@pytest.mark.parametrize("prefix_min", [1, 10**9])
def test_links_never_outlive_their_tuples(prefix_min: int) -> None:
    # A link holds both tuples, so an id is never reused for another tuple while its link lives; the
    # memo stays a few builds' worth (PREFIX_LINKS).
    m = _measure(prefix_min)
    h = _history(3)
    for t in range(100):
        nxt = h + _round(t)
        assert m.starts_with(nxt, h)
        h = nxt
    assert m.cache_sizes()["verified prefixes"] <= 16
