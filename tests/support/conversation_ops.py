"""A conversation as a simulate's peers meet it turn by turn, from a list of operations: each turn's
messages appended to, copied (equal messages, new objects), cut from the end, or one message edited.
The differential tests of engine/sim/turn_views.py and HistoryBlocks run random lists of these."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from engine.artifacts import Message, Text, ToolCall, ToolResult


def conversations(ops: list[tuple[str, int]], msg: Callable[[int], Message]) -> Iterator[tuple[Message, ...]]:
    """Each turn's conversation after its operation (`msg(i)` makes the i-th new message); "same" and
    any other name leave it as it was."""
    msgs: tuple[Message, ...] = ()
    n = 0
    for op, k in ops:
        if op == "append":
            msgs = msgs + tuple(msg(n + j) for j in range(k))
            n += k
        elif op == "copy":  # equal messages, new objects: a run of its own
            msgs = tuple(Message(x.role, x.parts) for x in msgs)
        elif op == "cut":
            msgs = msgs[: max(0, len(msgs) - k)]
        elif op == "edit" and msgs:
            i = k % len(msgs)
            msgs = msgs[:i] + (msg(1000 + n),) + msgs[i + 1 :]
            n += 1
        yield msgs


def tool_rounds(turns: int, size: int = 400) -> list[tuple[Message, ...]]:
    """Each turn's conversation of a session that appends one tool round a turn (a call, then its result of
    `size` characters) to the task: what the peers' carry tests clear and window."""
    msgs = [Message("user", (Text("the task"),))]
    out = []
    for k in range(turns):
        msgs += [
            Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)),
            Message("user", (ToolResult(f"c{k}", "r" * size),)),
        ]
        out.append(tuple(msgs))
    return out
