"""A Pipeline call that journals several events a turn hands them to the log as one batch while nothing
subscribes to the journal (Journal.batch / EventLog.extend): one acquisition of the log's lock a call,
not one an event. Every reader still gets the same events in the same order, and the log spills where
appending them one by one would have."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from engine import Pipeline
from engine.errors import ContentError
from engine.recording.event_log import Deferred, Event, EventLog
from engine.recording.journal import Journal


class _CountingLock:
    """A real lock that counts how many times it was taken."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.taken = 0

    def __enter__(self) -> bool:
        self.taken += 1
        return self._lock.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._lock.__exit__(*exc)


def _pipe() -> Pipeline:
    p = Pipeline("claude-sonnet-4", "anthropic", 32_000, serve=False, clock=lambda: 0.0)
    p.identity("You are a careful coding agent.")
    p.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    p.user("Fix the failing test.")
    return p


def _turn(p: Pipeline, t: int) -> None:
    """A steady agent turn: the call's result, the request, the usage and the reply with a call."""
    if t:
        p.tool_result(f"c{t - 1}", f"output of step {t - 1}\n" * 3)
    req = p.next_request()
    p.record_usage({"input_tokens": req.final_tokens + 5, "output_tokens": 30})
    p.assistant(f"Step {t}: run it.", [{"id": f"c{t}", "name": "bash", "arguments": f'{{"cmd": "ls {t}"}}'}])


def test_a_steady_turn_takes_the_log_lock_once_a_call_not_once_an_event() -> None:
    """Eight events a steady turn (result blob and part, request, usage, turn, reply text and call
    blobs, message), four acquisitions of the log's lock (eight before: one per event)."""
    p = _pipe()
    for t in range(5):
        _turn(p, t)
    log = p.journal.events
    lock = _CountingLock()
    log._lock = lock  # type: ignore[assignment]
    before = len(log)
    _turn(p, 5)
    kinds = [ev["k"] for ev in log[before:]]
    assert kinds == ["blob", "part", "request", "usage", "turn", "blob", "blob", "msg"]
    assert lock.taken == 4
    p.close()


def test_batched_calls_journal_what_unbatched_ones_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same session with batches and with every event appended on its own (Journal.batch turned
    off): the same journal, event for event, and a reader between two calls sees each call's events."""

    def run() -> list[dict[str, Any]]:
        p = _pipe()
        seen = []
        for t in range(8):
            _turn(p, t)
            seen.append(len(p.journal.events))
        p.close_turn()
        p.user("And the docs too.")
        assert p.journal.events[-1]["k"] == "part"  # (visible as soon as the call returns)
        out = list(p.journal.events)
        assert [len(out[:n]) for n in seen] == seen
        p.close()
        return out

    batched = run()
    monkeypatch.setattr(Journal, "batch", lambda self: None)
    assert run() == batched


def test_a_failing_call_ends_its_batch() -> None:
    """A call that raises leaves what it journaled before the error in the log, and the journal
    appending straight to the log again."""
    p = _pipe()
    j = p.journal
    with pytest.raises(ContentError):
        p.user("")
    n = len(j.events)
    # The first thinking block's text is journaled (its blob), then the second one is refused.
    with pytest.raises(ContentError):
        p.assistant("", thinking=[{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "x"}])
    assert [ev["k"] for ev in j.events[n:]] == ["blob"] and j.events[-1]["data"] == "hmm"
    assert j._held is None and j.append == j.events.append
    n = len(j.events)
    p.user("go on")
    assert len(j.events) == n + 2
    p.close()


def test_a_subscriber_during_a_batch_gets_the_log_first() -> None:
    j = Journal()
    held = j.batch()
    assert held is not None and j.batch() is None  # (no batch inside a batch)
    j.append({"k": "a"})
    seen: list[dict[str, Any]] = []
    j.subscribe(seen.append)  # (the batch goes to the log: the subscriber reads it there)
    assert list(j.events) == [{"k": "a"}]
    j.append({"k": "b"})
    j.release(held)
    assert list(j.events) == [{"k": "a"}, {"k": "b"}] and seen == [{"k": "b"}]
    assert j.batch() is None  # (subscribed: each event goes to the sinks as it is journaled)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_extend_spills_where_appending_would(size: int) -> None:
    one, many = EventLog(keep=8, chunk=4), EventLog(keep=8, chunk=4)
    evs: list[Event | Deferred] = [{"k": "e", "i": i} for i in range(61)]
    for ev in evs:
        one.append(ev)
    for i in range(0, len(evs), size):
        many.extend(evs[i : i + size])
    assert many._starts == one._starts and many.in_memory() == one.in_memory()
    assert list(many) == list(one) == evs
    one.close()
    many.close()
