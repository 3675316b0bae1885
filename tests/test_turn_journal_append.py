"""An unsubscribed Journal's append is its log's own (one call an event, not two); the first subscriber
brings Journal.append back, and from then on every event reaches the sinks as well as the log."""

from __future__ import annotations

from engine.recording.journal import Journal
from tests.test_trace_lazy import _observed, _start, _turns
from tests.test_turn_lineage import _pipe


def test_an_unsubscribed_journal_appends_straight_to_its_log() -> None:
    j = Journal()
    assert j.append == j.events.append  # the log's bound method: no Journal frame an event
    j.append({"k": "a"})
    seen: list[dict[str, str]] = []
    j.subscribe(seen.append)
    assert j.append.__func__ is Journal.append  # type: ignore[attr-defined]
    j.append({"k": "b"})
    assert list(j.events) == [{"k": "a"}, {"k": "b"}] and seen == [{"k": "b"}]


def test_a_pipeline_journals_the_same_events_observed_or_not() -> None:
    lazy, eager = _pipe(4_001, "cost_aware", False, True), _observed(_pipe(4_001, "cost_aware", False, True))
    for p in (lazy, eager):
        _start(p)
        _turns(p, 12)
        p.close_turn()
    assert list(lazy.journal.events) == list(eager.journal.events)
    for p in (lazy, eager):
        p.close()
