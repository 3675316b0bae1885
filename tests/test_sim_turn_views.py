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
from engine.sim.simulate import SimSettings, simulate_events
from engine.sim.simulate_read import load_recording_events
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


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["append", "pending", "close", "reclose", "copy", "newlog", "otherlog", "unknown"]
            ),
            st.integers(0, 3),
        ),
        max_size=30,
    )
)
def test_views_backed_by_the_log_are_the_views_of_their_messages(ops: list[tuple[str, int]]) -> None:
    """add_items told that the items start with an append-only log's own messages (`own`, as the build
    pass's whole-conversation build says: blocks._log_own) compares only the run past what an earlier
    turn's items had from the same log, and gives the views add() gives. A turn's pending message is a
    new object after the log's; it is closed into the log as that object ("close") or as another one
    ("reclose": then the last run does not go on, and a version that trusted the whole run as the
    log's hands out the stale object)."""
    by_items, by_msgs = TurnViews(), TurnViews()
    log: list[Message] = []
    n = 0
    pending: Message | None = None
    for t, (op, k) in enumerate(ops):
        own = -1
        if op == "append":
            log += [_msg(n + j) for j in range(k)]
            n += k
        elif op == "pending":
            pending = _msg(n)
            n += 1
        elif op == "close" and pending is not None:
            log.append(pending)
            pending = None
        elif op == "reclose" and pending is not None:
            log.append(Message(pending.role, pending.parts))
            pending = None
        elif op == "copy":  # the log's messages made again: not the log's own objects (own unknown)
            log[:] = [Message(m.role, m.parts) for m in log]
        elif op == "newlog":  # another log whose first messages are the same objects
            log = list(log)
        elif op == "otherlog":  # another log of other objects: what the last run was backed by says nothing
            log = [Message(m.role, m.parts) for m in log]
        items: tuple[Any, ...] = (*log, pending) if pending is not None else tuple(log)
        if op not in ("copy", "unknown"):
            own = len(log)
        system = (Block("identity", "system", f"s{t}", t, False),)
        by_items.add_items(t, system, items, 1000, 900, False, M, H, log, own)
        by_msgs.add(t, system, items, 1000, 900, False, M, H)
    got, want = list(by_items), list(by_msgs)
    assert got == want
    for g, w in zip(got, want, strict=True):
        assert all(map(lambda a, b: a is b, g.messages, w.messages))


def test_the_build_pass_views_are_backed_by_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build pass's whole-conversation build says its history starts with the log's own messages
    (blocks._log_own) on the turns of a recorded session, and the views it adds so are those of the
    same items added with every run compared (the scan add_items did before)."""
    path = tmp_path / "b.cpsession"
    _record(path, 200)
    shadow = TurnViews()
    owns: list[int] = []
    added = TurnViews.add_items

    def both(self: TurnViews, *args: Any) -> None:
        added(self, *args)
        owns.append(args[-1])
        added(shadow, *args[:-2])  # no log, no own: compared in full

    monkeypatch.setattr(TurnViews, "add_items", both)
    got: list[TurnViews] = []
    build_pass = sim._build_pass

    def kept(*args: Any, **kw: Any) -> Any:
        bp = build_pass(*args, **kw)
        got.append(bp.views)
        return bp

    monkeypatch.setattr(sim, "_build_pass", kept)
    events = load_recording_events(path)[0]
    report = simulate_events(events, SimSettings(policies=["all"], window=8_000))
    assert report.simulated_turns == 200
    assert len(got) == 1 and len(owns) == 200
    assert sum(o >= 0 for o in owns) >= 150, owns  # the wave-1 build's turns (the first, uncut, do not say)
    views, want = list(got[0]), list(shadow)
    assert views == want
    for g, w in zip(views, want, strict=True):
        assert all(map(lambda a, b: a is b, g.messages, w.messages))
