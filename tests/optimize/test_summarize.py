"""llm_summary (engine/optimize/summarize.py): the old middle becomes one summary via a callback."""

from __future__ import annotations

from engine.artifacts import Message, Text
from engine.optimize import summarize
from engine.types import Tier
from tests.optimize.fixtures import ctx, history, identity, pairs_intact, rounds


def test_old_middle_is_summarized_into_the_task_message() -> None:
    seen: list[list[str]] = []

    def summarizer(texts: list[str]) -> str:
        seen.append(texts)
        return "SUMMARY"

    asm = (identity(), history(rounds(20, result_chars=400)))
    out = summarize.apply(asm, ctx(asm, Tier.COMPACT_HISTORY, summarizer=summarizer))
    assert out.changed and out.tokens_saved > 0
    first = out.asm[-1].items[0]
    assert isinstance(first, Message) and first.role == "user"
    assert any(isinstance(p, Text) and "SUMMARY" in p.text for p in first.parts)
    assert len(seen) == 1 and seen[0]
    assert pairs_intact(out.asm[-1].items)


def test_without_a_callback_it_is_skipped_with_a_reason() -> None:
    asm = (identity(), history(rounds(20)))
    out = summarize.apply(asm, ctx(asm, Tier.COMPACT_HISTORY))
    assert not out.changed and out.reason_not_applied == "no summarizer callback configured"


def test_too_few_rounds_is_not_needed() -> None:
    asm = (identity(), history(rounds(6)))
    out = summarize.apply(asm, ctx(asm, Tier.COMPACT_HISTORY, summarizer=lambda t: "S"))
    assert not out.changed and "old rounds" in out.detail
