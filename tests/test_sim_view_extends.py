"""A pass over the peers' views says which view was made from the last one by appending, so each peer's
"does this turn's conversation start with the last one's?" is one identity check, not a copy and a
comparison of the whole conversation (engine/sim/turn_views.py, HistoryBlocks.note_extends / extends).

Measured on the synthetic sessions (`bench_whatif_scaling.py --columns`): at a constant request size a
peer's per-call cost grew with the call's index (sliding_window 71 -> 691 us a call from the first to the
last tenth of a 3,000-turn session), several whole-history copies and comparisons a call.

Differential: on random sequences of conversations (appended, copied, cut, edited), a HistoryBlocks says
`extends` only where it holds (the same objects), consecutive views of a run are said to extend, and each
peer's Blocks and carried scans equal those made from scratch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.policies.base import HistoryBlocks, message_block
from engine.sim.policies.clear_tool_uses import ClearToolUses
from engine.sim.policies.sliding_window import SlidingWindow
from engine.sim.turn_views import TurnViews
from engine.tokens import CharTokenizer, TokenCounter
from tests.support.conversation_ops import conversations

M = Measure(TokenCounter(CharTokenizer()))


def _msg(i: int) -> Message:
    if i % 2:
        return Message("user", (ToolResult(f"c{i - 1}", "r" * (i % 7 + 20)),))
    return Message("assistant", (Text(f"m{i}"), ToolCall(f"c{i}", "bash", "{}")))


OPS = st.lists(
    st.tuples(
        st.sampled_from(["append", "append", "append", "same", "copy", "cut", "edit"]), st.integers(0, 5)
    ),
    max_size=40,
)


def _views(ops: list[tuple[str, int]], history: HistoryBlocks) -> tuple[TurnViews, list[tuple[Message, ...]]]:
    views = TurnViews()
    added: list[tuple[Message, ...]] = []
    for t, msgs in enumerate(conversations(ops, _msg)):
        system = (Block("identity", "system", "s", 3, False),)
        views.add(t, system, msgs, 400, 300, False, M, history)
        added.append(msgs)
    return views, added


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_extends_is_said_only_where_it_holds(ops: list[tuple[str, int]]) -> None:
    history = HistoryBlocks()
    views, added = _views(ops, history)
    for _ in range(2):  # each peer's pass
        last: tuple[Message, ...] | None = None
        for v, want in zip(views, added, strict=True):
            assert v.messages == want and all(map(lambda a, b: a is b, v.messages, want))
            if last is not None:
                holds = len(v.messages) >= len(last) and all(map(lambda a, b: a is b, v.messages, last))
                if history.extends(v.messages, last):
                    assert holds, "said to extend a conversation it does not start with"
            last = v.messages


def test_consecutive_views_of_a_run_are_said_to_extend() -> None:
    history = HistoryBlocks()
    views, _ = _views([("append", 3)] * 6 + [("same", 0), ("append", 2)], history)
    last = None
    for v in views:  # said as each view is made (only the newest pair is held)
        if last is not None:
            assert history.extends(v.messages, last)
        last = v.messages
    # A copy (equal messages, other objects) starts a run: not said, though equal by value.
    copied, _ = _views([("append", 3), ("copy", 0)], history)
    it = iter(copied)
    a = next(it)
    b = next(it)
    assert a.messages == b.messages and not history.extends(b.messages, a.messages)


@settings(max_examples=120, deadline=None)
@given(OPS)
def test_peers_answer_as_from_scratch(ops: list[tuple[str, int]]) -> None:
    """Each peer's Blocks over the views (the carried, certified path) equal those of the same peer run
    on fresh views whose conversations are copies (nothing can be certified or carried by identity)."""
    history = HistoryBlocks()
    views, added = _views(ops, history)
    for peer in (SlidingWindow(), ClearToolUses(trigger=60)):
        peer.reset()
        got = [peer.request(v).blocks for v in views]
        peer.reset()
        ref_history = HistoryBlocks()
        ref = []
        for v, msgs in zip(views, added, strict=True):
            fresh = tuple(Message(x.role, x.parts) for x in msgs)
            ref.append(
                peer.request(
                    type(v)(v.turn, v.system, fresh, v.window, v.ceiling, v.markers, v.measure, ref_history)
                ).blocks
            )
        assert [[(b.sha, b.tokens) for b in r] for r in got] == [[(b.sha, b.tokens) for b in r] for r in ref]
        # And the plain layout of each view is its messages' Blocks.
        for v in views:
            assert history.of(v.messages, M) == [message_block(m, M) for m in v.messages]
