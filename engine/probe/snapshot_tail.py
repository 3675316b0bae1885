"""The snapshot's tail, skipped on the live stream: a newly attached client's snapshot is the journal
as the I/O thread read it, and its last few events may also be in the live stream (published while
the snapshot was taken, or journaled before it and published after). The live stream starts with
them; the client's cursor steps past them once, so none is sent twice (see handshake._attach for
how they are remembered: by identity, `Client.skip_ids`, with `Client.skip_hold` keeping them alive).

A mixin of the ProbeServer's queues (queues.ClientQueues), run by the I/O thread's fill only: the
agent's publish never calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.probe.elide import ELIDED_STAND_IN
from engine.recording.event_log import Deferred

if TYPE_CHECKING:
    from engine.probe.client_state import Client


def _lazy_twin(ev: Any, held: list[tuple[Any, Any]] | None) -> bool:
    """Whether live event `ev` is what one of the snapshot's last events held as a Deferred (not built
    when the snapshot was taken: see handshake._attach) was published as: its marker (a fresh dict
    each time, so by what it says) or, built since, the event itself.

    The marker compared is the one the Deferred had when the snapshot was taken (`held` pairs each
    event with it): the agent takes a marker, then publishes it, and sending the snapshot builds the
    turn meanwhile, after which the Deferred has no marker to compare (the marker came live, a second
    copy of the snapshot's turn: ~1 attach in 50 under load)."""
    if type(ev) is not dict or not held:
        return False
    for d, m in held:
        if isinstance(d, Deferred):
            if m is not None and ev == m:
                return True
            if d.marker() is None and d.resolve() is ev:  # (built: resolve hands back the event)
                return True
    return False


class SnapshotTail:
    """ClientQueues' step past a new client's snapshot tail (the attributes are ClientQueues')."""

    _ring: list[Any]
    _cap: int
    _head: int
    _windows: int  # clients whose snapshot's window is open

    def _skip_snapshot_tail(self, c: Client) -> bool:
        """Step a newly attached client's cursor past the live events its snapshot had already: True
        once the live stream has gone past them (the window is closed), False if all there is so far
        is those.

        They are the snapshot's last few (see handshake._attach), and they come first: the agent
        journals an event and then publishes it, one at a time, so an event published after one the
        snapshot did not have was journaled after it too. That is why the window closes at the first
        live event that is not one of them, whenever it comes: an event journaled before the snapshot
        was read but published after the I/O thread looked (the agent's thread was between the two)
        arrives later than the others, and sent again it would shift every journal position after it
        (the elided stream reads the journal by position)."""
        ring, cap, head, ids = self._ring, self._cap, self._head, c.skip_ids
        seq = c.cursor
        while seq < head:
            ev = ring[seq % cap]
            if (
                ev is not ELIDED_STAND_IN
                and id(ev[0] if type(ev) is tuple else ev) not in ids
                and not _lazy_twin(ev, c.skip_hold)
            ):
                c.cursor = seq
                c.skip_ids = frozenset()
                c.skip_hold = None
                self._windows -= 1
                return True
            seq += 1
        c.cursor = seq
        return False
