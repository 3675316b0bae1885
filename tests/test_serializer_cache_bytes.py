"""The serializer's per-item fragment cache is bounded in bytes as well as entries: it kept at least 512
entries whatever their size, so a session whose tool outputs run to a hundred KB each held ~50 MB of
fragments of messages long gone from its window. Its requests are the same bytes either way (a pruned
fragment is made again on its next use: tests/test_serializer_memo.py holds that)."""

from __future__ import annotations

import json

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure, Section
from engine.providers import make_serializer
from engine.providers.base import CACHE_FLOOR_BYTES
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind

BIG = 100_000  # bytes of each tool output


def _history(rounds: range) -> tuple[Message, ...]:
    out: list[Message] = [Message("user", (Text("Fix the failing test."),))]
    for t in rounds:
        call = ToolCall(f"c{t}", "bash", json.dumps({"cmd": f"cat f{t}"}))
        out.append(Message("assistant", (Text(f"step {t}"), call)))
        out.append(Message("user", (ToolResult(f"c{t}", f"output {t}\n" + "y" * BIG),)))
    return tuple(out)


def test_large_fragments_are_bounded_by_bytes_not_only_by_entries() -> None:
    ser = make_serializer("openai")
    measure = Measure(TokenCounter(CharTokenizer()))
    most = 0
    for t in range(300):
        # A sliding window of the last 8 rounds: ~800 KB sent a turn, 30 MB over the session.
        hist = _history(range(max(0, t - 7), t + 1))
        asm = (Section("history", "history", SectionKind.HISTORY, CacheScope.SESSION, Priority.NORMAL, hist),)
        req = ser.serialize(asm, (), "m", 100, measure)
        assert len(req.body) > BIG * min(t + 1, 8)
        most = max(most, ser.cache_bytes())
    # The floor plus a few requests' worth; the count bound alone let it reach ~25 MB.
    assert most <= CACHE_FLOOR_BYTES + 4 * 8 * BIG, most
    assert ser.cache_sizes()["items"] < 512
