"""The tool-call pairing check the serializer runs on the history it sends: every tool result answers a
call of the assistant message right before it, and every call but the newest message's has its result
in the user message right after it (`check_pairing`). Its scan's state and steps are kept apart so a
history that grows by appending is checked only where it changed (`base.Serializer`, and the
simulator's layouts, engine/sim/block_layout.py, resume it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.artifacts import (
    Message,
    SectionItem,
    ToolCall,
    ToolResult,
)
from engine.errors import UnpairedToolResultError

if TYPE_CHECKING:
    pass

# Tool-call pairing. The scan's state (the calls of the last assistant message, and those of them still
# waiting for a result) is set by every assistant message and reset by every user message with parts;
# a user message without parts leaves it as it is. So each state-setting message is checked against
# the one state-setting message before it, and nothing else: a stretch of items that was checked in an
# earlier request is checked again only at its first state-setting message.
_PairState = tuple[frozenset[str], frozenset[str]]  # (calls of the last assistant message, pending)
_EMPTY: frozenset[str] = frozenset()
_START: _PairState = (_EMPTY, _EMPTY)
# What the scan needs from one message, a pure function of its content (memoized by its hash):
# (is assistant, its call ids, its result call ids, sets the state).
_PairInfo = tuple[bool, frozenset[str], tuple[str, ...], bool]


def _pair_info(m: Message) -> _PairInfo:
    # Plain loops: a generator is a frame and a resume a part, and a turn's new messages all come here.
    ids: list[str] = []
    if m.role == "assistant":
        for p in m.parts:
            if isinstance(p, ToolCall):
                ids.append(p.id)
        return True, frozenset(ids), (), True
    for p in m.parts:
        if isinstance(p, ToolResult):
            ids.append(p.call_id)
    return False, _EMPTY, tuple(ids), bool(m.parts)


def _info(it: Message, memo: dict[str, _PairInfo]) -> _PairInfo:
    info = memo.get(it.sha)
    if info is None:
        info = memo[it.sha] = _pair_info(it)
    return info


def _pair_one(info: _PairInfo, state: _PairState) -> _PairState:
    """The state after one message, given the state before it; raises if the message breaks pairing."""
    assistant, calls, results, sets = info
    prev_calls, pending = state
    if assistant:
        if pending:
            cid = sorted(pending)[0]
            raise UnpairedToolResultError(cid, "the call has no result before the next assistant message")
        return calls, calls
    if results:
        for cid in results:
            if cid not in prev_calls:
                raise UnpairedToolResultError(
                    cid,
                    "result without a matching call in the preceding assistant message; "
                    "add the assistant's tool call first, or drop the result",
                )
        left = pending.difference(results)
        if left:
            cid = sorted(left)[0]
            raise UnpairedToolResultError(cid, "the call has no result in the following user message")
    return _START if sets else state


def _pair_state(items: tuple[SectionItem, ...], end: int, memo: dict[str, _PairInfo]) -> _PairState:
    """The scan's state after items[:end] when they are known to pass: set by the last state-setting
    message among them (usually items[end - 1])."""
    for x in range(end - 1, -1, -1):
        it = items[x]
        if isinstance(it, Message):
            info = memo.get(it.sha)  # _info(it, memo) in line: a frame fewer, every append turn
            if info is None:
                info = memo[it.sha] = _pair_info(it)
            assistant, calls, _results, sets = info
            if sets:
                return (calls, calls) if assistant else _START
    return _START


def _pair_checked(
    items: tuple[SectionItem, ...], i: int, end: int, state: _PairState, memo: dict[str, _PairInfo]
) -> _PairState:
    """The state after items[i:end], a stretch that passed in an earlier request: only its first
    state-setting message meets a state it has not met before."""
    for x in range(i, end):
        it = items[x]
        if isinstance(it, Message):
            info = _info(it, memo)
            if info[3]:
                _pair_one(info, state)
                return _pair_state(items, end, memo)
    return state


def _pair_stretched(items: tuple[SectionItem, ...], h: int, e: int, memo: dict[str, _PairInfo]) -> _PairState:
    """The scan's state after a sliding window's items (see find_stretch): the head items[:h] and the
    tail items[e:] scanned, the stretch items[h:e] between them, which passed in the earlier run it was
    taken from, checked at its first state-setting message only (_pair_checked)."""
    state = _pairing_step(items[:h], _START, memo)
    state = _pair_checked(items, h, e, state, memo)
    return _pairing_step(items[e:], state, memo)


def _pairing_step(
    items: Any, state: _PairState = _START, memo: dict[str, _PairInfo] | None = None
) -> _PairState:
    """check_pairing's scan of `items` from a given state."""
    infos: dict[str, _PairInfo] = {} if memo is None else memo
    for it in items:
        if isinstance(it, Message):
            state = _pair_one(_info(it, infos), state)
    return state


def check_pairing(history: tuple[SectionItem, ...]) -> None:
    """Every tool result answers a call made in the assistant message right before it, and every
    call (except in the newest message) has its result in the user message right after it."""
    _pairing_step(history)
