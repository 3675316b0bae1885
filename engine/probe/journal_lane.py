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
* else `publish(event)` itself, called directly: one call, not three. (An earlier version also did
  publish()'s held-event branch in line: a copy of it to keep in step, for a gain inside the noise of
  `bench_probe.py --twin foldlane`, -1.3 / -2.6 us a turn with intervals spanning 0.)

The same events reach the probe in the same order, and the probe's state after each is what publish()
leaves (tests/test_probe_journal_lane.py compares the two paths' streams and held marks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def install(journal: Any, server: Any) -> None:
    """Give `journal` the lane to `server` (its only subscriber must be the Pipeline's _publish with no
    recorder: the caller's check). Removed by the journal's next subscribe()."""
    journal.append = lane(journal.events.append, server)
    journal.append_deferred = deferred_lane(journal, server)


def lane(log_append: Callable[[Any], None], server: Any) -> Callable[[dict[str, Any]], None]:
    """Journal.append, then `server.publish(event)` itself: one call, not three (see the module's docstring)."""

    def append(event: dict[str, Any]) -> None:
        log_append(event)  # (first, as Journal.append: a client counted from now reads it in its snapshot)
        if server._nclients:  # (publish()'s own first test, without the call)
            server.publish(event, None)  # (looked up each time: a test or benchmark may wrap it)

    return append


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
