"""A request as a column's cache simulation takes it (`_Req`): its Blocks, time, actions and latch flips,
and what its maker knows of how it extends the last one; an agent's Block with a 1-hour breakpoint
(`SentBlock`); a peer policy's requests made turn by turn (`_peer_requests`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from engine.providers.base import Block


@dataclass(frozen=True)
class SentBlock(Block):
    """A Block of an agent's own request whose cache breakpoint asked for a TTL other than the default
    5 minutes (Anthropic's `"ttl": "1h"`); the engine's own Blocks are always 5-minute ones."""

    ttl: str = "5m"


@dataclass
class _Req:
    """One built request as the simulator and the attribution need it."""

    turn: int
    time: float
    blocks: list[Block]
    actions: list[str]
    latch_flips: list[str]
    # A peer policy's call: the output tokens it bills (None: the turn's reply) and whether the peer
    # compacted on it (None: judged from `actions`, or for an agent's own requests from its prefix).
    output: int | None = None
    compaction: bool | None = None
    # The previous request's first `same` Blocks are this one's first, the same objects, and its Block
    # at `same` (if both have one) is not this one's by value, when the maker knows it (a peer that
    # edits its last request near its end): its shared prefix is then not compared again. None: found.
    same: int | None = None
    # (s, a, m): this request's Blocks [s, s + m) are the previous request's [a, a + m), the same
    # objects, when the maker knows it (PeerRequest.stretch): not searched for. None: found.
    stretch: tuple[int, int, int] | None = None


def _peer_requests(peer: Any, views: Iterable[Any], reqs_p: Sequence[_Req]) -> Iterator[_Req]:
    """A peer policy's requests, turn by turn, from the uncompacted view of each turn (`views`) and the
    pipeline's request of it (its time and latch flips)."""
    peer.reset()
    side = True  # the last request was a side call (or there was none): a peer's `same` is not about it
    for v, r in zip(views, reqs_p, strict=True):
        pr = peer.request(v)
        # A summarizing call goes out first, in the same turn: billed and cached like any request. The
        # session's latch flips are the pipeline's (the same events).
        at, flips = r.time, r.latch_flips
        for sc in pr.side_calls:
            yield _Req(v.turn, at, sc.blocks, pr.actions, flips, sc.output_tokens, False)
        told = not (side or pr.side_calls)
        same = pr.same if told else None
        side = bool(pr.side_calls)
        yield _Req(
            v.turn, at, pr.blocks, pr.actions, flips, None, pr.compaction, same, pr.stretch if told else None
        )
