"""engine/sim/turn_views.py: the peers' per-turn views of one simulate, held as runs of messages.

Each turn's view holds the whole conversation so far; held as a tuple per turn, a 3,000-turn what-if
held ~4.5 million message references (69 MB). Differential: the views handed out are the ones added
(the same message objects, in order, whatever the conversations); counted: the message references a
simulate's build pass leaves held."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.sim.simulate as sim
from engine.artifacts import Message, Text
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.policies.base import HistoryBlocks, TurnView
from engine.sim.simulate import SimSettings, load_recording_events, simulate_events
from engine.sim.turn_views import TurnViews
from engine.tokens import CharTokenizer, TokenCounter
from tests.support.conversation_ops import conversations
from tests.support.recordings import record_coding_session

M = Measure(TokenCounter(CharTokenizer()))
H = HistoryBlocks()


def _msg(i: int) -> Message:
    return Message("user" if i % 2 else "assistant", (Text(f"m{i}"),))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["append", "same", "copy", "cut", "edit"]), st.integers(0, 5))))
def test_the_views_handed_out_are_the_views_added(ops: list[tuple[str, int]]) -> None:
    views = TurnViews()
    want: list[TurnView] = []
    for t, msgs in enumerate(conversations(ops, _msg)):
        system = (Block("identity", "system", f"s{t}", t, False),)
        views.add(t, system, msgs, 1000 + t, 900 + t, bool(t % 2), M, H)
        want.append(TurnView(t, system, msgs, 1000 + t, 900 + t, bool(t % 2), M, H))
    for _ in range(2):  # every pass hands out the same views (each peer makes one)
        got = list(views)
        assert len(views) == len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g == w
            assert all(map(lambda a, b: a is b, g.messages, w.messages))
            assert g.system is w.system and g.history is w.history and g.measure is w.measure


def _record(path: Path, turns: int) -> None:
    record_coding_session(
        path, turns, arguments=lambda t: {"t": t}, output=lambda t: f"output of step {t}", with_tool=False
    )


def test_a_simulate_holds_each_message_of_its_views_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 turns, ~600 messages: the build pass leaves the views' messages held once each, not once per
    turn that saw them (a tuple per turn: ~90,000 references)."""
    path = tmp_path / "v.cpsession"
    _record(path, 300)
    held: list[int] = []
    build_pass = sim._build_pass

    def counted(*args: Any, **kw: Any) -> Any:
        bp = build_pass(*args, **kw)
        held.append(_message_references() - before)
        return bp

    monkeypatch.setattr(sim, "_build_pass", counted)
    events = load_recording_events(path)[0]
    # What earlier tests of the process left alive is not this simulate's: counted from here.
    before = _message_references()
    report = simulate_events(events, SimSettings(policies=["all"]))
    assert report.simulated_turns == 300
    assert held and held[0] <= 20 * 601, held  # the memos of a few recent histories, and the runs


def _message_references() -> int:
    gc.collect()
    return sum(len(o) for o in gc.get_objects() if type(o) in (tuple, list) and o and type(o[0]) is Message)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["append", "other", "same", "copy", "cut", "edit"]), st.integers(0, 5)),
        max_size=30,
    )
)
def test_views_added_from_history_items_are_the_views_of_their_messages(ops: list[tuple[str, int]]) -> None:
    """add_items (the build pass: a history's items, which may hold other items than messages, checked
    only past the last run) gives the views add() gives for the messages among the items."""
    by_items, by_msgs = TurnViews(), TurnViews()
    items: tuple[Any, ...] = ()
    n = 0
    for t, (op, k) in enumerate(ops):
        if op == "append":
            items = items + tuple(_msg(n + j) for j in range(k))
            n += k
        elif op == "other":  # an item that is not a message (a system text) among them
            items = items + (Text(f"t{n}"),) + tuple(_msg(n + 1 + j) for j in range(k % 2))
            n += 2
        elif op == "copy":
            items = tuple(Message(x.role, x.parts) if isinstance(x, Message) else x for x in items)
        elif op == "cut":
            items = items[: max(0, len(items) - k)]
        elif op == "edit" and items:
            i = k % len(items)
            items = items[:i] + (_msg(1000 + n),) + items[i + 1 :]
            n += 1
        system = (Block("identity", "system", f"s{t}", t, False),)
        msgs = tuple(x for x in items if isinstance(x, Message))
        by_items.add_items(t, system, items, 1000, 900, False, M, H)
        by_msgs.add(t, system, msgs, 1000, 900, False, M, H)
    got, want = list(by_items), list(by_msgs)
    assert got == want
    for g, w in zip(got, want, strict=True):
        assert all(map(lambda a, b: a is b, g.messages, w.messages))
