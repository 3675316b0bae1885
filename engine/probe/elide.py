"""The elided stream: a lean client that reads the journal on demand gets only what it shows live.

A lean stream (see `lean`) still sends every event of every turn: the request record, usage, the
assistant's message, its parts and the content blobs, ~80 objects a turn that the probe's I/O thread
reaches cold, up to ~100 ms after the agent built them (~0.2-0.4 us an object on a small VM). An
inspector following the agent draws turns from their summaries; it reads those other events only to
fold the engine's state (section content, a what-if, why-missed) or to save the session. So a client
that says `{"k": "hello", "lean": true, "elide": true}` to an agent whose hello says `"elide": true`:

* is sent no live event of the ELIDED_KINDS; every other event goes out as on the lean stream (turns
  summarized but the newest of a pass), in `batch` frames that also carry `"at": [...]`, each event's
  position in the agent's journal (the snapshot is positions 0..snapshot-1, as before); an event the
  agent encoded itself (a recording agent's) goes whole, a turn too (see `splice`);
* reads the journal by position when it needs it: `{"k": "fetch", "from": P, "to": Q}` (at most
  RANGE_MAX events a request; Q past the end means "to the end") is answered, in order with the other
  fetches and within the probe's CPU budget, by `{"k": "journal", "at": P, "events": [...], "size": N}`
  frames (N: the journal's length when answered; an answer short of Q at N is the end), with `turn`
  events as `turn_summary` (their traces come by the lean stream's trace fetch; to a fold client, below,
  a turn the agent left unbuilt comes as its `turn_deferred` marker, which the client's fold rebuilds)
  and an event that cannot be encoded as `{"k": "omitted"}` (it keeps its position).

A client that also says `"quiet": true` (to an agent whose hello says `"quiet": true`) is not sent a
batch that would hold no event and only say where the journal has reached ("end"): an agent that waits
on its model between turns sends a Pipeline call's events at the call's end (see agent_send), and three
of a turn's four calls publish only elided kinds, so such a client gets one send a turn instead of four
(each send costs the agent's thread ~11-15 us, more if it wakes the reader). It learns the journal's
length when it needs it from a range answer's `size` (asking from what it has to RANGE_MAX past it),
and an agent that closes sends it the rest of the journal as ever (see loop._settle_on_close). A batch
with events still says `end`.

Positions are counted from the snapshot by both sides: they hold while the client loses nothing; a
client told `dropped` re-syncs from a new snapshot. A client that does not ask, or an agent from before
this, gets the lean or whole stream as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import not_
from typing import Any

from engine.recording.event_log import Deferred

# The per-turn kinds a fetching client reads from the journal instead of the live stream (what the
# engine folds: the request record, usage, messages and their parts, content by hash).
ELIDED_KINDS = frozenset(("request", "usage", "msg", "blob", "part"))
# What waits in the probe's queue in place of an event of an elided kind published while every client
# is quiet (see agent_send): no client is sent it live, and the client that reads it from the ring
# later (which events go: `kept`) finds one shared dict, already in cache, not the event itself, built a
# turn earlier. It keeps the event's journal position. None is queued while a client's snapshot window
# is open (snapshot_tail._skip_snapshot_tail), so one found there was queued by a publish that saw every client
# quiet before that client was counted: its event was journaled before, so is in the snapshot, and the
# client skips it as one of the snapshot's last events.
ELIDED_STAND_IN: dict[str, str] = {"k": "blob"}
# Events one range request may ask for (a longer range is asked for in several).
RANGE_MAX = 2048
# Events in one `journal` answer frame (its size is bounded again by the frame limit: see queues).
RANGE_FRAME_EVENTS = 256
_get = dict.get


def kept(events: Sequence[Any]) -> list[int] | None:
    """Indexes of `events` (ring slots, oldest first) that are not of an elided kind, or None if one is
    not a plain event dict (a recording agent's (event, frame) pair, say: the caller looks at each).

    This is the loop that runs for every event of every turn, and its first look at an event is a
    cache miss: here it is one C-level `dict.get` per event (no Python bytecode per event), and Python
    code only for the ~1 in 6 events that are sent."""
    try:
        kinds = list(map(_get, events, ("k",) * len(events)))
    except TypeError:
        return None
    return list(compress(range(len(events)), map(not_, map(ELIDED_KINDS.__contains__, kinds))))


def range_request(frame: dict[str, Any]) -> tuple[int, int] | None:
    """(from, to) of a client's range fetch, bounded to RANGE_MAX events, or None if it is malformed."""
    lo, hi = frame.get("from"), frame.get("to")
    if type(lo) is not int or type(hi) is not int or lo < 0 or hi < lo:
        return None
    return lo, min(hi, lo + RANGE_MAX)


# The fold stream (a client whose hello says `"fold": true`, protocol 2): an inspector that folds the
# journal itself (a replay Pipeline of its own, see inspector/sources/live.py) and builds the turns'
# traces from it. Its attaching does not make the agent build each turn's trace as it comes (see
# Pipeline._unwatched: only a client that reads traces counts), so it is sent every live event as it is
# (the engine's own request, usage, messages, parts, blobs; a `turn` only from an agent that built it
# anyway, for a recorder or another client) and, where the agent left a turn's trace unbuilt, the
# journal's `{"k": "turn_deferred", "turn": N}` marker (see Journal.append_deferred): journal positions
# hold with no gap, and the client knows the turn closed there. An annotation on such a turn comes as
# its own `annotate` event (see Pipeline.annotate). While every client attached is quiet and one of
# them folds, publish() leaves every kind of a turn waiting but the marker (or a built `turn`), which
# hands them on at once: a paced turn is one send, at its close, with all of its events (see
# server.publish); the inspector shows the turn then, as it does an elided stream's `turn`.
FOLD_DEFER_KINDS = ELIDED_KINDS | {"error", "annotate"}
# (Less the request, or the reply's `msg`, while the agent's model calls, or its tools' runs, are long:
# see agent_send, "Before a long wait".)


def fold_out(events: Sequence[Any]) -> list[Any] | None:
    """The fold stream's events of `events` (ring slots, oldest first): all of them, as they are; None
    if one is not a plain event dict (the caller strips a recording agent's frames first)."""
    if all(type(ev) is dict for ev in events):
        return list(events)
    return None


def for_fold(e: Any) -> Any:
    """A journal event as kept (EventLog.entry), for a fold client: a turn whose trace nobody has built
    as its marker (`{"k": "turn_deferred", "turn": N}`, as the live fold stream sends it: the client's
    fold builds the trace from the events before it), anything else as reading it gives it (a turn
    whose annotations the journal does not hold apart, built: Deferred.private)."""
    if isinstance(e, Deferred):
        m = e.marker()
        # (resolve: built already, the event itself; or one the fold could not rebuild, built now)
        return m if m is not None and not e.private() else e.resolve()
    return e
