"""LLM summary: at CompactHistory and above, the oldest rounds become one summary via a callback.

The engine holds no model key: the application passes `summarizer(texts) -> summary`. Without one the
step is skipped and logged. The summary replaces the rounds inside the first kept user message so the
conversation still starts with a user turn and no call/result pair is split.
"""

from __future__ import annotations

from engine.artifacts import Message, Text
from engine.assembly import Assembly
from engine.optimize.context import OptimizeContext, RuleOutcome
from engine.types import Form, SectionKind
from engine.wording import counted

NAME = "llm_summary"
MIN_ROUNDS = 6  # summarizing fewer rounds saves too little to pay for a cache break


def apply(asm: Assembly, ctx: OptimizeContext) -> RuleOutcome:
    if ctx.summarizer is None:
        return RuleOutcome(asm, False, "", reason_not_applied="no summarizer callback configured")
    idx = next((i for i, s in enumerate(asm) if s.kind == SectionKind.HISTORY), None)
    if idx is None:
        return RuleOutcome(asm, False, "no history section")
    hist = asm[idx]
    rounds = ctx.measure.rounds(hist.items)
    # Keep the task (round 0) and the newest half; summarize the old middle.
    middle = rounds[1 : len(rounds) // 2]
    if len(middle) < MIN_ROUNDS:
        return RuleOutcome(asm, False, f"only {len(middle)} old rounds (< {MIN_ROUNDS})")
    start, end = middle[0][0], middle[-1][1]
    old = hist.items[start:end]
    texts = [i.text() for i in old if isinstance(i, Message)]
    if ctx.dry_run:
        summary = "[summary]"
    else:
        summary = ctx.summarizer(texts)
    before = ctx.measure.items(old)
    first = hist.items[0]
    note = Text(f"[summary of {len(middle)} earlier rounds, {before} tokens]\n{summary}")
    if not isinstance(first, Message) or first.role != "user":
        return RuleOutcome(asm, False, "", reason_not_applied="history does not start with a user message")
    new_first = Message("user", first.parts + (note,))
    items = (new_first,) + hist.items[1:start] + hist.items[end:]
    saved = before - ctx.measure.item(new_first) + ctx.measure.item(first)
    new_hist = hist.with_items(items, Form.TRIMMED, saved)
    return RuleOutcome(
        asm[:idx] + (new_hist,) + asm[idx + 1 :], True, f"summarized {counted(len(middle), 'round')}", saved
    )
