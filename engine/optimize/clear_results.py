"""CompactHistory: clear the oldest tool results, each replaced by a provider-shaped placeholder.

The result block stays (same call id, so pairing holds); only its content becomes a one-line note.
The most recent `keep_recent_results` stay intact, and a circuit breaker caps tokens cleared per turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import islice

from engine.artifacts import Message, SectionItem, ToolResult
from engine.assembly import Assembly, Measure
from engine.optimize.context import OptimizeContext, OptimizeLimits, RuleOutcome
from engine.optimize.history_scans import carried_results
from engine.types import Form, SectionKind

NAME = "clear_tool_results"
CLEAR_BATCH = 4
CLEARED_MEMO = 4096  # remembered cleared forms (Measure.cleared); a turn clears up to max_clear_tokens' worth
MIN_WORTH_CLEARING = 64  # tokens: a placeholder costs ~20, clearing tiny results only churns the cache


def placeholder(r: ToolResult, tokens: int) -> ToolResult:
    note = f"[tool result cleared to save context: {tokens} tokens, call {r.call_id}]"
    return ToolResult(r.call_id, note, r.is_error, "cleared")


def _cleared(msg: Message, j: int, m: Measure) -> tuple[Message | None, int]:
    """`msg` with its part `j` (a full tool result) cleared and the tokens that frees, or (None, 0) when
    the result is too small to be worth clearing."""
    part = msg.parts[j]
    assert isinstance(part, ToolResult)
    before = m.part(part)
    if before < MIN_WORTH_CLEARING:
        return None, 0
    new_part = placeholder(part, before)
    parts = list(msg.parts)
    parts[j] = new_part
    return replace(msg, parts=tuple(parts), sha=""), before - m.part(new_part)


def clear_places(
    raw: Sequence[SectionItem],
    positions: Sequence[tuple[int, int]],
    found: int,
    m: Measure,
    limits: OptimizeLimits,
) -> tuple[dict[int, Message], list[tuple[int, int]], int, int, bool]:
    """What the rule clears in the history `raw`, whose full results are the first `found` of
    `positions` (message index, part index; oldest first): (the cleared messages by index, the places
    cleared in order, the tokens that frees, how many results, whether the circuit breaker stopped it).
    simulate's wave-1 lane (engine/sim/wave1_lane.py) asks it of the conversation without a tuple of it."""
    keep_n = limits.keep_recent_results
    # Clear in batches: the boundary moves CLEAR_BATCH results at a time, so the cache breaks once
    # per batch instead of every turn as the oldest kept result slides forward.
    n = max(0, found - keep_n)
    saved = 0
    cleared = 0
    tripped = False
    at: list[tuple[int, int]] = []  # the places cleared, in order
    done: dict[int, Message] = {}  # the messages cleared so far, by index (a message may hold two results)
    # Wave 1 clears the same oldest results from the raw history every turn: each message's cleared
    # form and what it frees are made once and remembered on the Measure (same values, same objects).
    memo = m.cleared
    for i, j in islice(positions, n - n % CLEAR_BATCH):  # oldest first (not sliced out: a copy a turn)
        msg = done.get(i)
        if msg is None:
            it = raw[i]
            assert isinstance(it, Message)
            msg = it
        key = (msg.sha, j)
        got = memo.get(key)
        if got is None:
            got = _cleared(msg, j, m)
            if len(memo) >= CLEARED_MEMO:
                memo.clear()
            memo[key] = got
        new_msg, gain = got
        if new_msg is None:
            continue
        if saved + gain > limits.max_clear_tokens:
            tripped = True
            break
        done[i] = new_msg
        at.append((i, j))
        saved += gain
        cleared += 1
    return done, at, saved, cleared, tripped


def apply(asm: Assembly, ctx: OptimizeContext) -> RuleOutcome:
    m = ctx.measure
    idx = next((i for i, s in enumerate(asm) if s.kind == SectionKind.HISTORY), None)
    if idx is None:
        return RuleOutcome(asm, False, "no history section")
    hist = asm[idx]
    # Every full result's place, oldest first: carried from last turn's history (wave 1 hands this
    # rule the whole raw history every turn; only the appended messages are read).
    positions, found = carried_results(m, hist.items)  # (the first `found` of `positions`)
    done, at, saved, cleared, tripped = clear_places(hist.items, positions, found, m, ctx.limits)
    if cleared == 0:
        reason = f"circuit breaker: max_clear_tokens={ctx.limits.max_clear_tokens}" if tripped else ""
        return RuleOutcome(asm, False, "nothing old enough to clear", reason_not_applied=reason)
    # The history cleared last (wave 1: last turn's) at these same places, when this one only appended
    # to the history it was cleared from: then it is that history and what was appended (cleared past
    # it), one copy of the conversation, not a list of it, the tuple and the list freed (O(session) a
    # turn, three passes over every message).
    raw = hist.items
    before = m.cleared_before(raw, at)
    k = 0 if before is None else len(before)
    tail = list(raw[k:])
    for i, msg in done.items():
        if i >= k:
            tail[i - k] = msg
    items = tuple(tail) if before is None else before + tuple(tail)
    new_hist = hist.with_items(items, Form.CLEARED if hist.form == Form.FULL else hist.form, saved)
    # Its total is the old one less what the placeholders saved (each message's count is the sum of its
    # parts'), its rounds are the old ones (every message keeps its role), and it holds no full result
    # the old one did not: the rules after this one measure, split and search it without reading every
    # item again.
    m.derived(new_hist, m.section(hist) - saved)
    m.cleared_from(new_hist.items, hist.items, tuple(at))
    detail = f"cleared {cleared} oldest tool results"
    if tripped:
        detail += f" (circuit breaker stopped at max_clear_tokens={ctx.limits.max_clear_tokens})"
    return RuleOutcome(asm[:idx] + (new_hist,) + asm[idx + 1 :], True, detail, saved)
