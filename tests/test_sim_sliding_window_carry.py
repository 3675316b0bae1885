"""The sliding window peer (LangChain trim_messages, strategy "last") moves its window from where the last
call's started, not reading the conversation back from the newest message every call.

Once the conversation outgrows the window, last_fitting_window read every message the window keeps
each call (a 3,000-turn what-if: ~210 messages a call, 609k counts). The conversation only grows, so the
window's start moves forward by what the new messages push out (base.FittingWindow). Differential: every
call's request is the one a peer with nothing carried makes, whatever the budget does."""

from __future__ import annotations

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.policies import TurnView
from engine.sim.policies.base import HistoryBlocks
from engine.sim.policies.sliding_window import SlidingWindow
from engine.tokens import CharTokenizer, TokenCounter
from tests.support.counting import CountingMeasure

M = Measure(TokenCounter(CharTokenizer()))
SYSTEM = (Block("identity", "system", "s" * 64, 100, True),)


def _session(turns: int, size: int) -> list[tuple[Message, ...]]:
    msgs = [Message("user", (Text("the task"),))]
    out = []
    for k in range(turns):
        msgs += [
            Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)),
            Message("user", (ToolResult(f"c{k}", "r" * (size + k % 13)),)),
        ]
        out.append(tuple(msgs))
    return out


def test_the_sliding_window_moves_instead_of_reading_every_message_it_keeps() -> None:
    """600 turns whose window keeps ~100 rounds once it fills: a call weighs its new messages and the
    few its window's start moves past (old code: 127,681 items weighed; now under 8 a turn)."""
    m = CountingMeasure(TokenCounter(CharTokenizer()))
    history = HistoryBlocks()
    p = SlidingWindow()
    turns = 600
    CountingMeasure.weighed = 0
    for k, msgs in enumerate(_session(turns, 100)):
        got = p.request(TurnView(k, SYSTEM, msgs, 40_000, 20_000, False, m, history))
    weighed = CountingMeasure.weighed
    assert got.actions == ["trim_messages"]
    assert 150 < len(got.blocks) < len(msgs)  # the window keeps many rounds, not all
    fresh = SlidingWindow().request(TurnView(k, SYSTEM, msgs, 40_000, 20_000, False, M))
    assert (got.blocks, got.actions) == (fresh.blocks, fresh.actions)
    assert weighed <= 8 * turns, weighed


def test_a_moving_sliding_window_gives_a_fresh_peers_requests() -> None:
    """Budgets that shrink and grow from call to call (each turn's ceiling), a conversation that is
    rewritten once (another recording's, then the first's again) and calls that fit whole: every call's
    request is the one a peer with nothing carried makes."""
    history = HistoryBlocks()
    carrying = SlidingWindow()
    other = _session(60, 250)
    trims = 0
    for k, msgs in enumerate(_session(250, 300)):
        if k == 120:
            msgs = other[-1]
        ceiling = 2_000 + (k * 7_919) % 3_000 if k % 50 else 10**6
        v = TurnView(k, SYSTEM, msgs, 12_000, ceiling, False, M, history)
        fresh = TurnView(k, SYSTEM, msgs, 12_000, ceiling, False, M, HistoryBlocks())
        got, want = carrying.request(v), SlidingWindow().request(fresh)
        assert (got.blocks, got.actions, got.compaction) == (want.blocks, want.actions, want.compaction), k
        trims += bool(got.actions)
    assert trims > 200
