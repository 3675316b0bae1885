"""The compaction peers weigh the conversation since their cut from running sums, not message by message.

server_compaction and threshold_compaction check every call whether the conversation since their cut
fits the window (`_fit`) and whether the request crossed their trigger. The first summed every message
since the cut, the second every Block of the request, every call (a 3,000-turn what-if: the whole
session two or three times a turn per column, before the first compaction ever fired). Both now read
the conversation's running sums (Measure.cumulative), extended by what each turn appended."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.policies import PEERS, TurnView, compaction
from engine.sim.policies.base import HistoryBlocks
from engine.tokens import CharTokenizer, TokenCounter

SYSTEM = (Block("identity", "system", "s" * 64, 100, True),)


class _Reads(dict):  # type: ignore[type-arg]
    """Measure's message counts, counting the look-ups of a message's tokens."""

    n = 0

    def __getitem__(self, k: Any) -> Any:
        _Reads.n += 1
        return super().__getitem__(k)

    def get(self, k: Any, default: Any = None) -> Any:
        _Reads.n += 1
        return super().get(k, default)


def _views(m: Measure, turns: int, window: int) -> Iterator[TurnView]:
    """A growing session's views, one a turn, each let go once asked (as simulate hands them out)."""
    history = HistoryBlocks()
    msgs = [Message("user", (Text("the task"),))]
    for k in range(turns):
        msgs += [
            Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)),
            Message("user", (ToolResult(f"c{k}", "r" * 300),)),
        ]
        yield TurnView(k, SYSTEM, tuple(msgs), window, window - 800, True, m, history)


@pytest.mark.parametrize("name", ["server_compaction", "threshold_compaction"])
def test_the_fit_check_reads_what_a_turn_appended(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing to compact (a window the session never fills), the last 200 turns of 600 read about
    their own new messages' tokens, not the whole conversation each (600 turns: ~240,000 reads)."""
    m = Measure(TokenCounter(CharTokenizer()))
    m._msg = _Reads()
    p = PEERS[name]()
    fit_reads = 0
    cls: Any = type(p)
    fit = cls._fit

    def counted(self: Any, v: TurnView, msgs: tuple[Message, ...], actions: list[str]) -> Any:
        nonlocal fit_reads
        before = _Reads.n
        try:
            return fit(self, v, msgs, actions)
        finally:
            fit_reads += _Reads.n - before

    summed = 0

    def total(blocks: list[Block]) -> int:  # what the trigger checks summed before (base.total)
        nonlocal summed
        summed += len(blocks)
        return sum(b.tokens for b in blocks)

    monkeypatch.setattr(cls, "_fit", counted)
    monkeypatch.setattr(compaction, "total", total, raising=False)
    for v in _views(m, 600, 10_000_000):
        if v.turn == 400:
            fit_reads = summed = 0
        assert not p.request(v).actions
    assert fit_reads <= 200 * 2 * 4, fit_reads
    # The trigger checks weigh the request from the same sums, not block by block (600 turns: ~1,200
    # Blocks a call before).
    assert summed == 0, summed


@pytest.mark.parametrize("name", ["server_compaction", "threshold_compaction"])
def test_the_fit_check_drops_the_rounds_it_dropped(name: str) -> None:
    """Where the conversation since the cut outgrows the window, the peer compacts or drops the oldest
    rounds exactly as when the check summed every message (a fresh Measure per call: no sums carried)."""
    m = Measure(TokenCounter(CharTokenizer()))
    fresh_peer = PEERS[name]()
    p = PEERS[name]()
    acted: set[str] = set()
    for v in _views(m, 200, 8_000):
        got = p.request(v)
        acted.update(got.actions)
        want = fresh_peer.request(
            TurnView(v.turn, v.system, v.messages, v.window, v.ceiling, v.markers, Measure(m.counter))
        )
        assert (got.blocks, got.actions) == (want.blocks, want.actions)
    assert "compact" in acted
