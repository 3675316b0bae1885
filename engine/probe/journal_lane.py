"""The journal's lane to the live probe: a served agent's events handed to its probe with fewer calls.

A Pipeline that serves and does not record (nor export) has one subscriber on its journal, its own
`Sinks._publish`, which hands each event to `ProbeServer.publish`. So every event an agent journals
was three Python calls deep before the probe looked at it (Journal.append with its loop over the
sinks, `_publish` testing for a recorder, `publish`), and a paced turn journals eight, each cold after
the model call or the tools (issue 15.4: the probe's part of a paced 1-2 ms turn is ~3.4% of it, the
goal 1%). `install` sets the journal's `append` and `append_deferred` to the lane's (instance
attributes, as the journal itself sets `append` while nothing subscribes; a later subscriber, such as
an OpenTelemetry export, takes them off: Journal.subscribe): the event goes into the log, then

* with no client attached, nothing else (publish()'s own first test, without calling it);
* while the one ring client publish() sends by its straight path is a fold client (`_ring_one`, see
  engine.probe.fold_send) and the event is a kind held back for it, what publish() does for such an
  event, here: it joins the queue, the model's or the tools' time is noted where publish notes it, and
  the ring is marked held once a burst (see engine.probe.ring, "Held events"); the conditions are
  publish()'s for that branch, read in the same order;
* anything else is `publish(event)` itself, called directly: one call, not three.

The same events reach the probe in the same order, and the probe's state after each is what publish()
leaves (tests/test_probe_journal_lane.py compares the two paths' streams and held marks).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from engine.probe.agent_limits import DEFER_EVENTS
from engine.probe.fold_send import LONG_WAIT, OUTCOME_KINDS
from engine.probe.ring import _HELD, HELD_AT

_monotonic = time.monotonic


def install(journal: Any, server: Any) -> None:
    """Give `journal` the lane to `server` (its only subscriber must be the Pipeline's _publish with no
    recorder: the caller's check). Removed by the journal's next subscribe()."""
    journal.append = lane(journal.events.append, server)
    journal.append_deferred = deferred_lane(journal, server)


def lane(log_append: Callable[[Any], None], server: Any) -> Callable[[dict[str, Any]], None]:
    """Journal.append, then what `server.publish(event)` would do (see the module's docstring)."""
    pending = server._pending

    def append(event: dict[str, Any]) -> None:
        log_append(event)  # (first, as Journal.append: a client counted from now reads it in its snapshot)
        s = server
        if not s._nclients:
            return
        try:
            c = s._ring_one
            if (
                c is None
                or not c.fold
                or s.quiet_linger
                or s._held
                or s._wake_pending
                or s._nquiet != s._nclients
                or type(event) is not dict
                or (kind := event.get("k")) not in s._defer_kinds
                or s._stand_in is not None
                or len(pending) >= DEFER_EVENTS
                or len(pending) >= s._cap
            ):
                s.publish(event, None)  # (looked up each time: a test or benchmark may wrap it)
                return
            # publish()'s branch for a held event of a fold client (server.publish), in line.
            pending.append(event)
            if kind == "request":
                s._request_time = event.get("time")
            elif kind in OUTCOME_KINDS:
                asked, s._request_time = s._request_time, None
                try:
                    slow = event.get("time") - asked >= LONG_WAIT
                except TypeError:
                    pass
                else:
                    if slow != s._slow_model:
                        s._fold_wants((bool(slow), s._slow_tools))
            elif kind == "msg":
                s._reply_at = _monotonic()
            elif kind in _CLOSE:
                s.fold_closes_held += 1
            elif s._reply_at:
                slow = _monotonic() - s._reply_at >= LONG_WAIT
                s._reply_at = 0.0
                if slow != s._slow_tools:
                    s._fold_wants((s._slow_model, slow))
            rings = s._held_rings
            if rings:
                holds = s._holds = s._holds + 1
                now = _monotonic()
                for ring in rings:
                    total = ring._written + 1
                    if total == ring.marked and now - ring.marked_at < s.mark_gap:
                        continue
                    try:
                        q = ring.held_q
                        if q is None:
                            _HELD.pack_into(ring._mm, HELD_AT, holds, total)
                        else:
                            q[0] = holds
                            q[1] = total
                    except ValueError:
                        continue
                    ring.marked, ring.marked_at = total, now
        except Exception:
            s.publish_errors += 1  # (as publish(): nothing the probe does may break the agent)

    return append


_CLOSE = frozenset(("turn_deferred", "turn"))


def deferred_lane(journal: Any, server: Any) -> Callable[..., None]:
    """Journal.append_deferred with its one subscriber's call made directly: `server.publish`."""
    log_append = journal.events.append
    sinks = journal._sinks  # (the journal's own list: a later subscribe() adds to it)
    general = type(journal).append_deferred

    def append_deferred(event: Any, wanted: Callable[[], bool] | None = None) -> None:
        if len(sinks) != 1:  # another subscriber came (subscribe() took `append` off, not this)
            general(journal, event, wanted)
            return
        if wanted is None:
            journal.append(event.resolve())
            return
        log_append(event)
        ev = event.resolve() if wanted() else event.marker()  # (resolve: the log's own dict)
        if ev is not None:
            server.publish(ev, None)  # (publish never raises: it counts its own errors)

    return append_deferred
