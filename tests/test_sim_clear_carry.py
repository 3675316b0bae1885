"""clear_tool_uses (engine/sim/policies/clear_tool_uses.py) carries its edit from turn to turn.

Each turn's conversation is the last one's and a few more messages, and the results it clears the last
turn's and a few more; the edit (the cleared conversation, the tokens freed) was made again over the
whole conversation every turn, a dictionary look-up per message (a session-wide what-if on a 1,500-turn
recording: ~2 million). Now a turn makes the new messages and those with a newly cleared result.
Differential: over random sessions and settings, a peer that carries gives every turn the request a new
peer gives (which edits the whole conversation, as before)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.policies import TurnView
from engine.sim.policies.base import HistoryBlocks
from engine.sim.policies.clear_tool_uses import ClearToolUses
from engine.tokens import CharTokenizer, TokenCounter

SYSTEM = (Block("identity", "system", "s" * 64, 100, True),)


@st.composite
def _round(draw: Any, k: int) -> list[Message]:
    names = draw(st.lists(st.sampled_from(("bash", "grep")), max_size=2))
    calls = tuple(ToolCall(f"c{k}.{i}", n, "{}") for i, n in enumerate(names))
    out = [Message("assistant", (Text(f"step {k}"),) + calls)]
    if calls:
        sizes = draw(st.lists(st.sampled_from((1, 30, 400, 2000)), min_size=len(calls), max_size=len(calls)))
        parts: tuple[Any, ...] = tuple(ToolResult(c.id, "r" * n) for c, n in zip(calls, sizes, strict=True))
        out.append(Message("user", parts + ((Text("note"),) if draw(st.booleans()) else ())))
    return out


@settings(max_examples=60)
@given(st.data())
def test_a_carrying_peer_sends_what_a_new_peer_sends(data: Any) -> None:
    kw = {
        "trigger": data.draw(st.sampled_from((0, 500, 3000))),
        "keep": data.draw(st.integers(0, 4)),
        "clear_at_least": data.draw(st.sampled_from((0, 0, 300, 5000))),
        "exclude_tools": data.draw(st.sampled_from(((), ("grep",)))),
    }
    window = data.draw(st.sampled_from((4_000, 20_000, 200_000)))
    m = Measure(TokenCounter(CharTokenizer()))
    carrying, blocks = ClearToolUses(**kw), HistoryBlocks()
    convos: list[list[Message]] = [
        [Message("user", (Text("the task"),))],
        [Message("user", (Text("other"),))],
    ]
    c = 0
    for turn in range(data.draw(st.integers(1, 25))):
        op = data.draw(st.sampled_from(("append", "append", "append", "same", "switch", "copy")))
        if op == "append":
            convos[c] += data.draw(_round(turn))
        elif op == "switch":
            c = 1 - c
            convos[c] += data.draw(_round(turn))
        elif op == "copy":  # equal messages, new objects
            convos[c] = [Message(x.role, x.parts) for x in convos[c]]
        msgs = tuple(convos[c])
        v = TurnView(turn, SYSTEM, msgs, window, int(window * 0.9), True, m, blocks)
        fresh = TurnView(turn, SYSTEM, msgs, window, int(window * 0.9), True, m, HistoryBlocks())
        got, want = carrying.request(v), ClearToolUses(**kw).request(fresh)
        assert (got.blocks, got.actions, got.compaction) == (want.blocks, want.actions, want.compaction)


class _Looks(dict):  # type: ignore[type-arg]
    """The peer's own memo dict, counting its look-ups."""

    n = 0

    def get(self, key: Any, default: Any = None) -> Any:
        _Looks.n += 1
        return super().get(key, default)


def test_a_turn_edits_the_new_messages_not_the_whole_conversation() -> None:
    """300 rounds, clearing from early on: the last 100 turns look up a few entries each (new messages,
    newly cleared ones), where each looked up every message of the conversation again (~60,000)."""
    m = Measure(TokenCounter(CharTokenizer()))
    msgs = [Message("user", (Text("the task"),))]
    views = []
    history = HistoryBlocks()
    for k in range(300):
        msgs += [
            Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)),
            Message("user", (ToolResult(f"c{k}", "r" * 400),)),
        ]
        views.append(TurnView(k, SYSTEM, tuple(msgs), 1_000_000, 900_000, True, m, history))
    p = ClearToolUses(trigger=1000)
    p._cleared, p._rehashed = _Looks(), _Looks()  # type: ignore[assignment]
    for v in views[:200]:
        p.request(v)
    _Looks.n = 0
    for v in views[200:]:
        assert "clear_tool_uses" in p.request(v).actions
    assert _Looks.n <= 100 * 8, _Looks.n


def test_the_compaction_peers_hand_out_a_message_s_block_once() -> None:
    """server_compaction and threshold_compaction lay out the messages they send from the session's
    HistoryBlocks: the same Block object for a message every turn (they made a new one per message
    sent, every turn)."""
    from engine.sim.policies import PEERS

    m = Measure(TokenCounter(CharTokenizer()))
    history = HistoryBlocks()
    msgs = [Message("user", (Text("the task"),))]
    views = []
    for k in range(80):
        msgs += [
            Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)),
            Message("user", (ToolResult(f"c{k}", "r" * 300),)),
        ]
        views.append(TurnView(k, SYSTEM, tuple(msgs), 8_000, 7_200, True, m, history))
    for name in ("server_compaction", "threshold_compaction"):
        p = PEERS[name]()
        made: dict[str, Block] = {}
        for v in views:
            for b in p.request(v).blocks[1:-1]:
                if b.section == "history" and not b.marker:
                    assert made.setdefault(b.sha, b) is b, f"{name}: turn {v.turn} made a Block again"
        assert len(made) > 40, name
