"""Where the cost-aware policy cuts the history (a part of engine.policy.cost_aware): the oldest whole rounds
whose tokens reach what must be dropped (`_choose_cut`), counted on from the last turn's cut while the
history only grows (`_counted_on`), or carried whole when it still holds (`_carried_cut`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from engine.artifacts import Message
from engine.assembly import Assembly, Measure
from engine.dropped_history import droppable as droppable_rounds
from engine.optimize.history_ops import cut_holds_after_appends, history_index, oldest_to_drop, task_end
from engine.policy.lineage_carry import CARRY_SLOTS
from engine.policy.state import CompactionState

NOTE_ALLOWANCE = 48  # tokens the note on the task message may add


# The carried memos below are NamedTuples, not frozen dataclasses: one of each is made every held turn,
# and a tuple is built in C (~0.4 us for eleven fields against ~1.4 us through a frozen __init__).
class _Cut(NamedTuple):
    cut: int  # new full-history index of the first kept item
    dropped_items: int  # applied-history items newly dropped
    dropped_tokens: int
    dropped_rounds: int
    after: int  # estimated request tokens after the cut


def _choose_cut(
    asm: Assembly,
    st: CompactionState,
    target: int,
    m: Measure,
    full_len: int,
    carry: dict[str, Any] | None = None,
    slot: Any = None,
    known: tuple[int | None, int] | None = None,
    grown: tuple[Any, ...] | None = None,
) -> _Cut | None:
    """The shallowest cut at a round boundary that brings the request to `target` tokens or below
    (the deepest possible one if none does). None when nothing can be dropped.

    `carry`: the choice is remembered under `slot` and reused while only messages were appended (see
    _carried_cut); None chooses afresh. `known`: the caller's (history_index(asm), m.total(asm)).
    `grown`: a history the caller made this one from by appending messages to it (the express lane's
    applied history is the last turn's plus what was appended, cost_aware._extend): a cut remembered in
    it is carried or counted on without comparing the two histories, and a carried cut is remembered
    again in this one, so the next turn's history grew from the history its memo holds."""
    idx, total = known if known is not None else (history_index(asm), -1)
    if idx is None:
        return None
    items = asm[idx].items
    if total < 0:
        total = m.total(asm)
    need = total + NOTE_ALLOWANCE - target
    slots = carry.setdefault(CUT_CARRY, {}) if carry is not None else None
    if slots is not None:
        memo = slots.get(slot)
        got = _carried_cut(memo, items, st, m, need, full_len, grown)
        if got is not None:
            if grown is not None and memo is not None and memo.items is grown:
                # The same rounds, the same bounds, in the history this one grew from.
                slots[slot] = _CutMemo(items, memo.state_cut, m, memo.below, got, memo.task_end)
            return _Cut(
                got.cut,
                got.dropped_items,
                got.dropped_tokens,
                got.dropped_rounds,
                total - got.dropped_tokens + NOTE_ALLOWANCE,
            )
    counted = _counted_on(slots.get(slot), items, st, m, need, grown) if slots is not None else None
    below: float | None = None
    if counted is not None:
        te, e, k, acc, below = counted
    else:
        te = task_end(items)
        droppable = droppable_rounds(m.rounds(items))  # not the task, not the newest round (all start >= te)
        if not droppable:
            return None
        # The fewest oldest rounds (at least one) that bring the request to the target, found from the
        # newest end so a long uncompacted history (gates closed) costs what is kept, not all of it.
        k, acc = oldest_to_drop(items, droppable, m.section(asm[idx]), need, m, at_least_one=True)
        e = droppable[k - 1][1]
    # Applied positions p >= te map to full-history index base + (p - te).
    base = st.cut if st.cut > te else te
    new_cut = base + (e - te)
    if new_cut > full_len:
        return None
    out = _Cut(new_cut, e - te, acc, k, total - acc + NOTE_ALLOWANCE)
    if slots is not None and acc >= need:
        # Remember the choice only when it reached the target (else a round appended later may be the
        # one that does). `below`: what one round fewer drops, the tokens of items [first, start of
        # round k) of the history (all rounds are contiguous).
        if below is None:
            cum = m.cumulative(items)
            below = cum[droppable[k - 1][0]] - cum[droppable[0][0]] if k > 1 else -math.inf
        if len(slots) >= CARRY_SLOTS and slot not in slots:
            slots.clear()
        slots[slot] = _CutMemo(items, st.cut, m, below, out, te)
    return out


class _CutMemo(NamedTuple):
    items: tuple[Any, ...]  # the history the cut was chosen in
    state_cut: int
    measure: Measure
    below: float  # tokens the k-1 oldest droppable rounds hold (-inf when k = 1)
    cut: _Cut
    task_end: int = -1  # task_end(items) (-1: not remembered)


def _counted_on(
    memo: _CutMemo | None,
    items: tuple[Any, ...],
    st: CompactionState,
    m: Measure,
    need: int,
    grown: tuple[Any, ...] | None = None,
) -> tuple[int, int, int, int, float] | None:
    """What _choose_cut computes from scratch (task end, count, end and tokens of the oldest rounds to
    drop, and the tokens of one round fewer), counted on from the cut an earlier build chose when this
    history only appended to that one (the same state cut and Measure) and `need` outgrew it. An append
    changes only the newest round, which is never droppable, so the rounds droppable then are the same
    rounds with the same tokens now (see history_ops.cut_holds_after_appends) and the task ends where it
    ended; the k rounds chosen then hold fewer than `need`, and the tokens of the oldest rounds only grow
    with their count, so the fewest that reach `need` are more than k: the first count on from k + 1
    whose running sum reaches it, or all of them when none does (what oldest_to_drop's bisection finds).

    Walked round by round from the end of the k rounds (rounds start at assistant messages), each
    round's tokens its items' (Measure.item, remembered), not from the whole history's rounds and
    running sums: a held turn counts on one or two rounds, and splitting and summing a history of a
    few hundred messages cost more than the rest of the choice. None when the turn is not like that,
    or when no round after the k is droppable. `grown`: see _choose_cut (a memo of that very history
    needs no comparison)."""
    if memo is None or memo.measure is not m or memo.state_cut != st.cut or memo.task_end < 0:
        return None
    prev, cut = memo.items, memo.cut
    n0 = len(prev)
    if need <= cut.dropped_tokens or not 0 < n0 <= len(items) or cut.dropped_rounds <= 0:
        return None
    if prev is not grown and not m.starts_with(items, prev):
        return None
    n = len(items)
    te = memo.task_end
    start = te + cut.dropped_items  # where droppable round k starts (0-based: the one after the k)
    end = _next_assistant(items, start + 1)  # and ends: where the round after it starts
    if end >= n:  # the round at `start` is the newest: only the k rounds are droppable
        return None
    item = m.item
    c, acc = cut.dropped_rounds, cut.dropped_tokens  # c rounds hold acc tokens
    while True:
        got = acc + sum(map(item, items[start:end]))  # the c + 1 oldest rounds
        c += 1
        after = _next_assistant(items, end + 1)
        # The round at `end` is the newest (not droppable): c are all the droppable rounds, taken
        # whether they reach `need` or not. Else the first c that reaches it.
        if after >= n or got >= need:
            return te, end, c, got, acc
        start, end, acc = end, after, got


def _next_assistant(items: tuple[Any, ...], i: int) -> int:
    """Index of the first assistant message in items[i:] (len(items) when there is none)."""
    n = len(items)
    while i < n:
        it = items[i]
        if isinstance(it, Message) and it.role == "assistant":
            return i
        i += 1
    return n


CUT_CARRY = "compaction cut"


def _carried_cut(
    memo: _CutMemo | None,
    items: tuple[Any, ...],
    st: CompactionState,
    m: Measure,
    need: int,
    full_len: int,
    grown: tuple[Any, ...] | None = None,
) -> _Cut | None:
    """The cut chosen at an earlier build, when it is the one _choose_cut would choose now: this
    history only appended to that one under the same state cut and Measure, the same rounds reach
    `need` (history_ops.cut_holds_after_appends; the task is the same, so their positions are), and the
    cut is still inside the history. Only `after` (the request's tokens after the cut) is the caller's
    to recompute. `grown`: see _choose_cut (the history of a memo made in it is known to be a prefix:
    what cut_holds_after_appends checks of the tokens, without the comparison)."""
    if memo is None or memo.measure is not m or memo.state_cut != st.cut:
        return None
    cut = memo.cut
    if cut.cut > full_len:
        return None
    if memo.items is grown:
        return cut if memo.below < need <= cut.dropped_tokens and len(grown) <= len(items) else None
    if not cut_holds_after_appends(memo.items, items, memo.below, cut.dropped_tokens, need, m):
        return None
    return cut
