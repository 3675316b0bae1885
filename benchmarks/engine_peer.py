"""bench_engine's peer: the LangChain agent set beside the engine (trim_messages under the engine's ceiling,
its history kept as LangChain messages: LcPlan, LcAgent), the memoized counter a careful user writes, and
the timer both sides' regions are read with."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from engine.importers import ImportedSession, MessageRec


# ----------------------------------------------------------------------------- langchain
def langchain_messages(msgs: Sequence[MessageRec]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for m in msgs:
        if m.role == "system":
            out.append(SystemMessage(m.content))
        elif m.role == "assistant":
            calls = []
            for c in m.tool_calls:
                try:
                    args = json.loads(c.arguments) if c.arguments else {}
                except ValueError:
                    args = {"_raw": c.arguments}
                calls.append(
                    {"name": c.name, "args": args if isinstance(args, dict) else {"_": args}, "id": c.id}
                )
            out.append(AIMessage(m.content, tool_calls=calls))
        elif m.role == "tool":
            out.append(ToolMessage(m.content, tool_call_id=m.tool_call_id or ""))
        else:
            out.append(HumanMessage(m.content))
    return out


def memo_counter(count_one: Callable[[Any], int]) -> Callable[[list[Any]], int]:
    """trim_messages calls its counter on many prefixes of the history per turn; a careful user
    counts each message once (keyed by the message object, which the agent keeps across turns)."""
    memo: dict[int, tuple[Any, int]] = {}

    def count(messages: list[Any]) -> int:
        n = 3
        for m in messages:
            hit = memo.get(id(m))
            if hit is None or hit[0] is not m:
                hit = memo[id(m)] = (m, count_one(m))
            n += hit[1]
        return n

    return count


Clock = Callable[[], float]


WALL: Clock = time.perf_counter


CPU: Clock = time.thread_time


class Timer:
    """Wall and thread-CPU time of one region."""

    __slots__ = ("w", "c")

    def __init__(self) -> None:
        self.w = WALL()
        self.c = CPU()

    def stop(self) -> tuple[float, float]:
        return WALL() - self.w, CPU() - self.c


def time_trim(trim_messages: Any, history: list[Any], limit: int, counter: Callable[[list[Any]], int]) -> tuple[float, float]:
    """One trim_messages call as the docs show it, under the engine's ceiling for that turn."""
    t = Timer()
    trim_messages(history, max_tokens=limit, token_counter=counter, strategy="last", include_system=True, start_on="human")
    return t.stop()


def _lc_key(m: MessageRec) -> tuple[Any, ...]:
    return (m.role, m.content, m.tool_call_id, tuple((c.id, c.name, c.arguments) for c in m.tool_calls))


class LcPlan:
    """What trim+memo's agent is handed each turn, worked out before any timing: per call, the
    messages new since the previous call's history and its reply (which the agent appended itself),
    or, for a call whose history is not that one extended (an importer's rewritten history), the whole
    list (the agent then reuses the objects it has for messages it saw before, by content)."""

    def __init__(self, imp: ImportedSession) -> None:
        self.steps: list[tuple[list[tuple[MessageRec, tuple[Any, ...]]], bool]] = []  # (messages, whole)
        self.replies: list[tuple[MessageRec, tuple[Any, ...]] | None] = []
        prev: list[tuple[Any, ...]] = []
        for call in imp.calls:
            keys = [_lc_key(m) for m in call.messages]
            pairs = list(zip(call.messages, keys, strict=True))
            if keys[: len(prev)] == prev:
                self.steps.append((pairs[len(prev) :], False))
            else:
                self.steps.append((pairs, True))
            reply = call.response
            self.replies.append((reply, _lc_key(reply)) if reply is not None else None)
            prev = keys + ([_lc_key(reply)] if reply is not None else [])
        # LangChain's first messages of a process pay for its lazy set-up (pydantic validators): paid
        # here, so no repeat's first turn does.
        first = imp.calls[0]
        langchain_messages(list(first.messages) + ([first.response] if first.response is not None else []))


class LcAgent:
    """trim+memo's agent over one repeat: it holds its history as LangChain messages, built as they come
    (one object per message, kept across turns: the memo keys on it) and appended to one list."""

    def __init__(self, plan: LcPlan) -> None:
        self.plan = plan
        self.history: list[Any] = []
        self.seen: dict[tuple[Any, ...], Any] = {}
        self.rows: list[list[Any]] = []  # each turn's history as trimmed (for the naive trim's pass)

    def _obj(self, m: MessageRec, key: tuple[Any, ...]) -> Any:
        o = self.seen.get(key)
        if o is None:
            o = self.seen[key] = langchain_messages([m])[0]
        return o

    def turn(
        self, k: int, trim_messages: Any, limit: int, counter: Callable[[list[Any]], int]
    ) -> tuple[tuple[float, float], list[Any]]:
        """Turn k's timed region: the new messages' LangChain objects, trim_messages under the engine's
        ceiling of the turn, the reply's AIMessage. Returns the time and what trim kept."""
        pairs, whole = self.plan.steps[k]
        reply = self.plan.replies[k]
        t = Timer()
        if whole:
            self.history = [self._obj(m, key) for m, key in pairs]
        else:
            for m, key in pairs:
                self.history.append(self._obj(m, key))
        n = len(self.history)
        kept = trim_messages(self.history, max_tokens=limit, token_counter=counter, strategy="last",
                             include_system=True, start_on="human")  # fmt: skip
        if reply is not None:
            self.history.append(self._obj(*reply))
        took = t.stop()
        self.rows.append(self.history[:n])
        return took, kept
