"""The peers' work per turn in a session-wide what-if (the TUI's policy comparison runs all eleven).

Each turn a peer lays out the whole conversation: until worker29 it made a new Block per message per
turn, and clear_tool_uses made every cleared message (and every other message) afresh each turn, so a
1,500-turn recording cost ~100 s of CPU where `simulate` without peers took ~1.5 s. The Blocks of a
message are now made once per session and handed out again, and a message's cleared form once. The
figures must not move: the peers' report is compared, column by column and turn by turn, with the
straightforward per-turn implementations below (what the peers did before) on the demo recording.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.policies import PEERS, TurnView
from engine.sim.policies.base import (
    PeerRequest,
    documented_trigger,
    last_fitting_window,
    message_block,
    system_tokens,
    with_tail_marker,
)
from engine.sim.policies.clear_tool_uses import DEFAULT_TRIGGER, PLACEHOLDER, ClearToolUses
from engine.sim.policies.paper import Paper
from engine.sim.policies.sliding_window import SlidingWindow
from engine.sim.simulate import SimSettings, simulate_events
from engine.sim.simulate_read import load_recording_events
from engine.tokens import CharTokenizer, TokenCounter

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
M = Measure(TokenCounter(CharTokenizer()))
SYSTEM = (Block("identity", "system", "s" * 64, 100, True),)


def convo(rounds: int) -> tuple[Message, ...]:
    msgs = [Message("user", (Text("the task"),))]
    for k in range(rounds):
        msgs.append(Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)))
        msgs.append(Message("user", (ToolResult(f"c{k}", f"{k} " + "r" * 400),)))
    return tuple(msgs)


def session_views(rounds: int, window: int) -> list[TurnView]:
    """One view per round, the conversation growing, sharing one HistoryBlocks as simulate's do."""
    from engine.sim.policies.base import HistoryBlocks  # not before worker29: the test fails there

    history = HistoryBlocks()
    whole = convo(rounds)
    return [
        TurnView(k, SYSTEM, whole[: 1 + 2 * k], window, int(window * 0.9), True, M, history)
        for k in range(1, rounds + 1)
    ]


@pytest.mark.parametrize("peer", [Paper, SlidingWindow, ClearToolUses])
def test_a_message_gets_one_block_for_the_whole_session(peer: Any) -> None:
    p = peer()
    made: dict[str, Block] = {}
    views = session_views(60, 8_000)
    for v in views:
        for b in p.request(v).blocks[1:-1]:  # the newest carries the rolling marker: a Block of its own
            assert made.setdefault(b.sha, b) is b, f"{peer.__name__}: turn {v.turn} made a Block again"
    assert len(made) > 60
    if peer is ClearToolUses:  # the cleared messages too: the same Block each turn they are sent
        assert PLACEHOLDER and "clear_tool_uses" in p.request(views[-1]).actions


# ---- what the peers did before: each turn from scratch ------------------------------------------


class PaperFromScratch:
    name = "paper"

    def reset(self) -> None:
        pass

    def request(self, v: TurnView) -> PeerRequest:
        return PeerRequest(
            with_tail_marker(list(v.system) + [message_block(m, v.measure) for m in v.messages], v.markers)
        )


class SlidingWindowFromScratch:
    name = "sliding_window"

    def reset(self) -> None:
        pass

    def request(self, v: TurnView) -> PeerRequest:
        budget = v.ceiling - system_tokens(v)
        full = sum(v.measure.item(m) for m in v.messages)
        kept = v.messages if full <= budget else last_fitting_window(v, v.messages, budget)
        blocks = list(v.system) + [message_block(m, v.measure) for m in kept]
        trimmed = len(kept) < len(v.messages)
        return PeerRequest(with_tail_marker(blocks, v.markers), ["trim_messages"] if trimmed else [], trimmed)


class ClearToolUsesFromScratch:
    name = "clear_tool_uses"

    def reset(self) -> None:
        pass

    def request(self, v: TurnView) -> PeerRequest:
        m, msgs = v.measure, v.messages
        actions: list[str] = []
        if system_tokens(v) + sum(m.item(x) for x in msgs) > documented_trigger(v, DEFAULT_TRIGGER):
            results = [
                (i, j) for i, x in enumerate(msgs) for j, p in enumerate(x.parts) if isinstance(p, ToolResult)
            ]
            clear = results[: max(0, len(results) - 3)]
            new = list(msgs)
            for i, j in clear:
                x = new[i]
                p = x.parts[j]
                assert isinstance(p, ToolResult)
                parts = list(x.parts)
                parts[j] = ToolResult(p.call_id, PLACEHOLDER, p.is_error, "cleared")
                new[i] = replace(x, parts=tuple(parts), sha="")
            if clear:
                msgs = tuple(Message(x.role, x.parts) for x in new)
                actions.append("clear_tool_uses")
        budget = v.ceiling - system_tokens(v)
        if sum(m.item(x) for x in msgs) > budget:
            msgs = last_fitting_window(v, msgs, budget)
            actions.append("drop_oldest_rounds")
        blocks = list(v.system) + [message_block(x, m) for x in msgs]
        return PeerRequest(with_tail_marker(blocks, v.markers), actions, bool(actions))


@pytest.mark.parametrize("window", [8_000, 20_000])
def test_the_peers_figures_are_the_ones_made_from_scratch(
    window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = load_recording_events(DEMO)[0]
    settings = SimSettings(window=window, policies=["all"])

    def report() -> dict[str, Any]:
        got = simulate_events(events, settings, source="demo").to_json(per_turn=True)
        got.pop("elapsed_s", None)
        return got

    now = report()
    for name, ref in (
        ("paper", PaperFromScratch),
        ("sliding_window", SlidingWindowFromScratch),
        ("clear_tool_uses", ClearToolUsesFromScratch),
    ):
        monkeypatch.setitem(PEERS, name, ref)
    before = report()
    assert now == before
    # The window is tight enough that every peer rewrites the conversation on some turn.
    for name in ("sliding_window", "clear_tool_uses"):
        assert now["policies"][name]["compactions"] > 0, name


READS = [0]


class CountedMessage(Message):
    """A Message that counts the reads of its parts: how much of the conversation a peer looks at."""

    def __getattribute__(self, name: str) -> Any:
        if name == "parts":
            READS[0] += 1
        return super().__getattribute__(name)


def test_clear_tool_uses_looks_at_each_message_a_few_times_not_every_turn() -> None:
    from engine.sim.policies.base import HistoryBlocks

    whole = tuple(CountedMessage(m.role, m.parts) for m in convo(60))
    history = HistoryBlocks()
    views = [TurnView(k, SYSTEM, whole[: 1 + 2 * k], 8_000, 7_200, True, M, history) for k in range(1, 61)]
    p = ClearToolUses()
    READS[0] = 0
    cleared = sum("clear_tool_uses" in p.request(v).actions for v in views)
    assert cleared > 20
    # Each message's parts are read for its size, its results and its cleared form: a few reads each,
    # where each turn read every message of the conversation again (~60 turns x ~60 messages).
    assert READS[0] < 6 * len(whole), READS[0]
