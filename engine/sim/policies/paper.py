"""The paper baseline: no compaction at all, at the recorded window.

The whole conversation is sent every turn, as it grew; with a prefix cache every request extends the
previous one. For an imported trajectory the simulator uses the requests exactly as the agent sent
them (the `as_sent` column, which is this policy as the agent ran it); for a recording made through
the engine, this module rebuilds it from the uncompacted conversation.
"""

from __future__ import annotations

from engine.sim.policies.base import PeerRequest, TurnView, with_tail_marker

NAME = "paper"
DOC = "no compaction, recorded window (as the agent sent it)"


class Paper:
    name = NAME

    def reset(self) -> None:
        pass

    def request(self, v: TurnView) -> PeerRequest:
        # The store's own list (copy=False), copied once into the request.
        blocks = list(v.system) + v.history.of(v.messages, v.measure, copy=False)
        return PeerRequest(with_tail_marker(blocks, v.markers))
