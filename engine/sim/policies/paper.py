"""The paper baseline: no compaction at all, at the recorded window.

The whole conversation is sent every turn, as it grew; with a prefix cache every request extends the
previous one. For an imported trajectory the simulator uses the requests exactly as the agent sent
them (the `as_sent` column, which is this policy as the agent ran it); for a recording made through
the engine, this module rebuilds it from the uncompacted conversation.
"""

from __future__ import annotations

from operator import is_

from engine.providers.base import Block
from engine.sim.grown import Grown
from engine.sim.policies.base import Messages, PeerRequest, TurnView, with_tail_marker

NAME = "paper"
DOC = "no compaction, recorded window (as the agent sent it)"


class Paper:
    name = NAME

    def __init__(self) -> None:
        # The last request: its system Blocks, its conversation and its Blocks (see request).
        self._last: tuple[tuple[Block, ...], Messages, Grown[Block]] | None = None

    def reset(self) -> None:
        self._last = None

    def request(self, v: TurnView) -> PeerRequest:
        # The store's own list (copy=False): read here, never kept.
        conv = v.history.of(v.messages, v.measure, copy=False)
        last, n = self._last, len(v.system)
        if (
            last is not None
            and len(last[0]) == n
            and all(map(is_, last[0], v.system))
            and v.history.extends(v.messages, last[1])
        ):
            # This conversation is the last one with messages appended (the same message objects: the
            # same Blocks): the last request's Blocks up to its newest message (which went with the
            # rolling marker, a Block of its own) are kept, and only the rest is made. A list of the
            # whole conversation a call, then a copy of it and a tuple in the simulator, was the growth
            # of this column's per-call work with the session.
            k = len(last[1])
            keep = k - 1 if v.markers and k else k
            blocks = last[2].extended(n + keep, with_tail_marker(conv[keep:], v.markers))
        else:
            blocks = Grown.of(with_tail_marker([*v.system, *conv], v.markers), own=True)
        self._last = (v.system, v.messages, blocks)
        return PeerRequest(blocks)
