"""A sliding window: LangChain's `trim_messages(strategy="last")`, run before every call.

As documented: keep the most recent messages whose total fits `max_tokens`, whole messages only
(`allow_partial=False`), keeping the system message (`include_system=True`). Here `max_tokens` is
what the window leaves for the conversation (the ceiling minus tools and system prompt).

`start_on`: the documentation recommends `start_on="human"` so the kept history starts on a human
turn. In a single-task agent loop the only human message is the task, so once it scrolls out that
would keep nothing but the system prompt; the window instead starts at a whole round (an AI message
with its tool results), which is what keeps every tool result paired with its call: trim_messages with
`start_on="ai"` once it has to trim (given while nothing is trimmed, it would drop the task as well).
tests/test_sim_policies.py holds this equal to langchain_core's own trim_messages.

Trimming is recomputed from the full history every call, so once the conversation outgrows the window
the first kept message moves on almost every turn and the cached prefix ends at the system prompt.

The window is moved from where the last call's started (base.FittingWindow), not read again from the
newest message back: the conversation only grows, so the start moves forward by what the new messages
push out (read back every call, a 3,000-turn what-if read ~210 messages a call, 609k counts).
"""

from __future__ import annotations

from engine.sim.policies.base import (
    FittingWindow,
    Messages,
    PeerRequest,
    TurnView,
    system_tokens,
    with_tail_marker,
)

NAME = "sliding_window"
DOC = (
    'LangChain trim_messages(strategy="last", include_system=True, allow_partial=False; '
    'start_on="ai" once it trims)'
)


class SlidingWindow:
    name = NAME

    def __init__(self) -> None:
        self._window = FittingWindow()
        self._was: Messages | None = None  # the last call's conversation

    def reset(self) -> None:
        self._window.reset()
        self._was = None

    def request(self, v: TurnView) -> PeerRequest:
        budget = v.ceiling - system_tokens(v)
        # Carried with the conversation's Blocks, not summed again; the Blocks themselves are read only
        # when the whole conversation is sent (a copy of all of them a call, for a window of ~180).
        full = v.history.tokens(v.messages, v.measure)
        was, self._was = self._was, v.messages
        if full <= budget:
            kept = v.messages
            self._window.reset()
        else:
            # The last call's window moved on, when this conversation appended to that one (checked:
            # the view's conversation is the recording's, which only grows between its own rewrites).
            if was is not None and not (
                v.history.extends(v.messages, was)
                or (len(v.messages) >= len(was) and v.messages[: len(was)] == was)
            ):
                was = None
            kept = self._window.window(v, v.messages, budget, was)
        # The store's own list (copy=False), copied once into the request.
        blocks = list(v.system) + v.history.of(kept, v.measure, copy=False)
        trimmed = len(kept) < len(v.messages)
        return PeerRequest(with_tail_marker(blocks, v.markers), ["trim_messages"] if trimmed else [], trimmed)
