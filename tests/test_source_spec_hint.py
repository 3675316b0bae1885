"""add_source() hands the spec it built and checked to the fold of its own event (Pipeline._spec_hint),
instead of the fold building it again from the event: the spec folded is then the live call's, equal to
what a replay of the journal folds from the event, and a replayed or later event never takes a hint
left behind."""

from __future__ import annotations

import pytest

from engine import CacheScope, Pipeline, Priority
from engine.catalog import SourceSpec


def _pipe() -> Pipeline:
    return Pipeline("claude-sonnet-4", window=8000, serve=False)


def _source_events(p: Pipeline) -> list[dict[str, object]]:
    return [ev for ev in p.journal.events if ev.get("k") == "source"]


def test_the_folded_spec_is_the_one_a_replay_folds_from_the_event(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[dict[str, object]] = []
    from_event = SourceSpec.from_event.__func__  # type: ignore[attr-defined]

    def counted(cls: type[SourceSpec], ev: dict[str, object]) -> SourceSpec:
        built.append(ev)
        return from_event(cls, ev)  # type: ignore[no-any-return]

    monkeypatch.setattr(SourceSpec, "from_event", classmethod(counted))
    p = _pipe()
    p.identity("You are careful.")
    p.add_source("docs", "context", text="the docs", scope="global", priority="last_resort", max_tokens=300)
    p.add_source("notes", "memory", text="n", scope=CacheScope.NONE, priority=Priority.FIRST, timeout_s=3)
    evs = _source_events(p)
    assert [ev["spec"]["id"] for ev in evs] == ["identity", "docs", "notes"]  # type: ignore[index]
    assert not built  # the live calls' own specs were folded
    assert p.specs == [SourceSpec.from_event(ev["spec"]) for ev in evs]  # type: ignore[arg-type]
    built.clear()
    # A fresh pipeline folding the same journal (no live call, no hint) ends with equal specs and sends
    # the same bytes.
    q = _pipe()
    for ev in p.journal.events:
        q.fold(ev)
    assert len(built) == 3 and q.specs == p.specs
    for x in (p, q):
        x.user("hello")
    assert p.next_request().bytes == q.next_request().bytes


def test_a_later_event_folds_its_own_spec_not_the_last_calls() -> None:
    # After a live add_source, an event folded later (a replayed one: an equal dict, not the same object,
    # here with another scope) is folded from its own fields: no hint outlives the call that made it.
    p = _pipe()
    p.add_source("docs", "context", text="the docs", scope="global", max_tokens=300)
    live = _source_events(p)[-1]["spec"]
    ev = {"k": "source", "spec": dict(live, scope=2)}  # type: ignore[call-overload]
    p.fold(ev)
    assert p.specs[-1] == SourceSpec.from_event(ev["spec"])
    assert p.specs[-1] != SourceSpec.from_event(live)  # type: ignore[arg-type]
