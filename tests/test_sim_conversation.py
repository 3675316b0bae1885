"""engine/sim/conversation.py: a view's conversation read in place from its run, not a tuple copied per
view (the five peer passes of a 3,000-turn what-if copied and freed the whole conversation per view).

Differential: a Conversation reads as the tuple of its run's first n messages (length, indexing, slices,
iteration, equality with tuples and other Conversations), and a view handed out by TurnViews reads as
the conversation added; counted: iterating the views copies no conversation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text
from engine.assembly import Measure
from engine.sim.conversation import Conversation
from engine.sim.policies.base import HistoryBlocks
from engine.sim.turn_views import TurnViews
from engine.tokens import CharTokenizer, TokenCounter

M = Measure(TokenCounter(CharTokenizer()))


def _msgs(k: int) -> list[Message]:
    return [Message("user" if i % 2 else "assistant", (Text(f"m{i % 5}"),)) for i in range(k)]


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 12),
    st.integers(0, 12),
    st.lists(st.one_of(st.none(), st.integers(-15, 15)), min_size=3, max_size=3),
    st.integers(-15, 15),
)
def test_a_conversation_reads_as_the_tuple_of_its_runs_first_messages(
    extra: int, n: int, sl: list[int | None], at: int
) -> None:
    run = _msgs(n + extra)  # (messages repeat their text: equal messages that are other objects)
    c, t = Conversation(run, n), tuple(run[:n])
    assert len(c) == len(t) and list(c) == list(t) and all(map(lambda a, b: a is b, c, t))
    if -n <= at < n:
        assert c[at] is t[at]
    else:
        with pytest.raises(IndexError):
            c[at]
    start, stop, step = sl
    if step == 0:
        with pytest.raises(ValueError):
            c[start:stop:step]
    else:
        got = c[start:stop:step]
        assert tuple(got) == t[start:stop:step] and all(map(lambda a, b: a is b, got, t[start:stop:step]))
    assert c[:] is c and c[0:n] is c  # the whole of it is itself, as a tuple's whole slice is the tuple
    assert c == t and t == c and not (c != t)
    assert c == Conversation(run, n) and c == Conversation(list(run), n)
    assert c == Conversation(_msgs(n), n)  # equal messages, other objects: equal by value
    if extra:
        assert c != Conversation(run, n + 1)
    assert c != t + (Message("user", (Text("x"),)),)
    if n:
        assert c != t[:-1]
        other = run[:n]
        other[-1] = Message("user", (Text("y"),))
        assert c != Conversation(other, n) and Conversation(other, n) != c


def test_iterating_the_views_copies_no_conversation() -> None:
    """3,000 views of a conversation growing by two messages a view: each view's conversation is its
    run read in place (the same list), not a tuple of it (old code: a tuple per view, ~9 million
    message references copied a pass)."""
    run = _msgs(6_001)
    views, history = TurnViews(), HistoryBlocks()
    for t in range(3_000):
        views.add(t, (), tuple(run[: 2 * t + 1]), 1000, 900, False, M, history)
    got = list(views)
    assert [len(v.messages) for v in got] == [2 * t + 1 for t in range(3_000)]
    assert all(type(v.messages) is Conversation for v in got)
    runs = {id(v.messages._run) for v in got}  # type: ignore[attr-defined]
    assert len(runs) == 1
    assert got[-1].messages == tuple(run[:5_999])
