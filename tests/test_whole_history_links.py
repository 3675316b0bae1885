"""The whole history a pipeline builds from a log that only appends (a replay's, simulate's) is linked to
the last one it built (Measure.grew), so Measure.starts_with answers the memos' question "does this
turn's history start with last turn's?" by the link, not by comparing the whole conversation by value
once per turn (wave 1 asked it of every turn's whole history: ~9 M message comparisons over a
3,000-turn what-if). The answers must stay the comparison's."""

from __future__ import annotations

from typing import Any

from engine.artifacts import Message
from engine.assembly import Section
from engine.pipeline import Pipeline
from engine.types import SectionKind


class _NoCompare(Exception):
    pass


def _history(pipe: Pipeline) -> tuple[Any, ...]:
    hist = next(s for s in pipe.assembled({}) if isinstance(s, Section) and s.kind is SectionKind.HISTORY)
    return hist.items


def _grow(pipe: Pipeline, t: int) -> None:
    pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "input": {"n": t}}])
    pipe.tool_result(f"c{t}", f"output {t}")
    pipe.next_request()  # (closes the pending result into the log: the history has no pending message)


def _pipe(chunk: int | None) -> Pipeline:
    pipe = Pipeline("claude-sonnet-4", "anthropic", 200_000, history_chunk=chunk)
    pipe.measure.prefix_min = 1
    pipe.user("the task")
    pipe.next_request()
    return pipe


def test_a_grown_history_starts_with_the_last_one_without_a_comparison(monkeypatch: Any) -> None:
    pipe = _pipe(None)
    _grow(pipe, 0)
    prev = _history(pipe)
    _grow(pipe, 1)
    items = _history(pipe)
    assert items is not prev and items[: len(prev)] == prev
    m = pipe.measure
    # Linked when built: a by-value check (the old first answer) would copy and compare the prefix,
    # which is not seen from outside when the messages are the same objects.
    assert m._links[id(items)] == (items, prev)

    def refuse(self: Message, other: object) -> bool:
        raise _NoCompare

    # Neither end nor the whole prefix is compared by value (identity is checked first for the ends).
    monkeypatch.setattr(Message, "__eq__", refuse)
    monkeypatch.setattr(Message, "__ne__", refuse)
    assert m.starts_with(items, prev)


def test_a_pending_message_is_not_taken_for_the_logs() -> None:
    # A history built with pending parts ends with a message closed from them, not the log's: the next
    # history is not linked to it (nor claimed to start with it when it does not).
    pipe = _pipe(None)
    _grow(pipe, 0)
    pipe.user("more")
    with_pending = _history(pipe)
    _grow(pipe, 1)
    items = _history(pipe)
    m = pipe.measure
    assert id(items) not in m._links
    assert m.starts_with(items, with_pending) == (items[: len(with_pending)] == with_pending)


def test_a_log_that_releases_links_nothing() -> None:
    pipe = _pipe(64)
    _grow(pipe, 0)
    _history(pipe)
    _grow(pipe, 1)
    items = _history(pipe)
    assert id(items) not in pipe.measure._links


def test_a_turns_whole_builds_share_one_tuple_of_the_log() -> None:
    # A what-if builds the whole conversation twice a turn (wave 1's column and the peers' view): the
    # second build's history is the first one's tuple (the same messages: the log only appends), not a
    # list of the log copied again and a tuple of that; its link to last turn's history is kept.
    pipe = _pipe(None)
    _grow(pipe, 0)
    prev = _history(pipe)
    _grow(pipe, 1)
    first = _history(pipe)
    again = _history(pipe)
    assert again is first and first == tuple(pipe.history)
    assert pipe.measure._links[id(first)] == (first, prev)
    # Pending parts: a tuple of its own, the log left as it was.
    pipe.assistant("step 2", [{"id": "c2", "name": "bash", "input": {"n": 2}}])
    pipe.tool_result("c2", "output 2")
    n = len(pipe.history)
    pending = _history(pipe)
    assert len(pipe.history) == n and len(pending) == n + 1 and pending[:n] == tuple(pipe.history)
    assert pending is not _history(pipe)
