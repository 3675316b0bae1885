"""The journal keeps its older events on disk (engine/recording/event_log.py): a spilled journal reads
back exactly as it was journaled, a session's in-memory events stay bounded however long it runs, and
another thread can read by index while the agent appends and spills."""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.pipeline import Pipeline
from engine.recording.event_log import EventLog
from engine.recording.replay import Replayer
from engine.recording.spill_file import SpillReadError
from engine.tokens import CharTokenizer, TokenCounter

COUNTER = TokenCounter(CharTokenizer())

# Event-like values: what a journal holds (and a few types JSON would not keep: tuples, bytes).
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
events = st.lists(st.dictionaries(st.text(max_size=4), values, max_size=5), max_size=60)


@settings(max_examples=60, deadline=None)
@given(events, st.integers(0, 9), st.integers(1, 7))
def test_spilled_events_read_back_identically(evs: list[dict], keep: int, chunk: int) -> None:
    log = EventLog(keep, chunk)
    for e in evs:
        log.append(e)
    assert len(log) == len(evs)
    assert log.in_memory() <= keep + chunk
    assert log == evs and list(log) == evs
    # Types survive (a tuple stays a tuple, bytes stay bytes), and key order with them.
    assert [repr(e) for e in log] == [repr(e) for e in evs]
    assert [log[i] for i in range(-len(evs), 0)] == evs
    assert log[2:-1:2] == evs[2:-1:2]
    with pytest.raises(IndexError):
        log[len(evs)]


def _session(keep: int | None, rounds: int) -> Pipeline:
    pipe = Pipeline(
        "deepseek-chat", "openai", 4_000, counter=COUNTER, serve=False, clock=lambda: 0.0, journal_keep=keep
    )
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug.")
    for t in range(rounds):
        calls = pipe.assistant(
            f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t})}]
        )
        pipe.tool_result(calls[0].id, f"output of step {t}\n" * (3 + t % 11))
        pipe.next_request()
        pipe.record_usage({"input_tokens": 900, "output_tokens": 10})
    return pipe


def test_a_spilled_session_journal_is_the_same_journal() -> None:
    """A session that spilled most of its journal to disk journals exactly what one that kept it all
    in memory does, and replays to the same requests."""
    spilled, kept = _session(16, 120), _session(None, 120)
    assert len(spilled.journal.events) > 20 * 16
    assert spilled.journal.events.in_memory() <= 32
    assert kept.journal.events.in_memory() == len(kept.journal.events)
    assert spilled.journal.events == kept.journal.events
    assert [json.dumps(e, sort_keys=False, default=repr) for e in spilled.journal.events] == [
        json.dumps(e, sort_keys=False, default=repr) for e in kept.journal.events
    ]
    assert Replayer(spilled.journal.events, COUNTER).verify().ok


def test_journal_memory_is_bounded_over_a_long_session() -> None:
    pipe = _session(256, 400)  # ~2,400 events, a tenth kept
    n = len(pipe.journal.events)
    assert n > 2_000
    assert pipe.journal.events.in_memory() <= 2 * 256
    assert pipe.journal.events.spilled_bytes() > 0
    # Recent traces in memory are what the alert rules and the next trace look back on, no more.
    assert len(pipe.traces) <= 32


@pytest.mark.parametrize("bounds_first", [True, False])
def test_bounds_set_after_construction_decide_when_append_spills(bounds_first: bool) -> None:
    """append() spills once keep + chunk events are in memory, whether the log was made with its bounds or
    they were set afterwards (a caller or test tightening them): the spill point follows both, and a
    log without a bound never spills."""
    log = EventLog(keep=3, chunk=2) if bounds_first else EventLog(keep=None)
    if not bounds_first:
        for i in range(50):
            log.append({"i": i})
        assert log.in_memory() == 50 and log.spilled_bytes() == 0  # unbounded: nothing on disk
        log.keep, log.chunk = 3, 2
    start = len(log)
    for i in range(4):  # in memory: everything so far and 4 more; below keep + chunk only with bounds first
        log.append({"j": i})
    if bounds_first:
        assert log.in_memory() == 4 and log.spilled_bytes() == 0
    log.append({"j": 4})
    assert log.spilled_bytes() > 0
    assert log.in_memory() <= 3 + 2
    assert [log[k] for k in range(start, len(log))] == [{"j": i} for i in range(5)]
    log.keep = None  # no bound again: never spills, however many
    was = log.spilled_bytes()
    for i in range(20):
        log.append({"k": i})
    assert log.spilled_bytes() == was


def test_reading_by_index_while_appending_and_spilling() -> None:
    """The probe's I/O thread reads the journal by index while the agent's thread appends (and the
    log spills): every read sees the event that was appended at that index."""
    log = EventLog(8, 3)
    total = 3_000
    errors: list[str] = []
    done = threading.Event()

    def reader() -> None:
        seen = 0
        while not done.is_set() or seen < len(log):
            n = len(log)
            for i in range(seen, n):
                if log[i] != {"i": i, "pad": "x" * (i % 50)}:
                    errors.append(f"event {i} read back as {log[i]!r}")
                    return
            seen = n

    th = threading.Thread(target=reader)
    th.start()
    for i in range(total):
        log.append({"i": i, "pad": "x" * (i % 50)})
    done.set()
    th.join(30)
    assert not errors, errors[:3]
    assert [e["i"] for e in log] == list(range(total))


def test_a_forked_child_spills_to_its_own_file() -> None:
    """A child process inherits the spill file's descriptor: if it wrote at the offsets its parent
    writes at, each would overwrite the other's events. The child copies the file before its first write."""
    log = EventLog(4, 2)
    for i in range(20):
        log.append({"i": i, "who": "both"})
    pid = os.fork()
    if pid == 0:  # the child: journal on, then check everything reads back
        code = 1
        try:
            for i in range(20, 60):
                log.append({"i": i, "who": "child"})
            ok = list(log) == [{"i": i, "who": "both" if i < 20 else "child"} for i in range(60)]
            code = 0 if ok else 3
        finally:
            os._exit(code)
    for i in range(20, 60):
        log.append({"i": i, "who": "parent"})
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child read back other events than it journaled"
    assert list(log) == [{"i": i, "who": "both" if i < 20 else "parent"} for i in range(60)]


def test_a_disk_that_refuses_the_journal_write_fails_no_turn(
    monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """Disk full while the journal spills: the agent's turns go on (before, the OSError came out of the
    turn that journaled the event), the events stay in memory, one warning says why; once the disk takes
    writes again they move, and the journal is the one a session that never spilled keeps."""
    real = os.pwrite

    def full(fd: int, data: Any, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    with caplog.at_level(logging.WARNING, logger="contextpipe.journal"):
        pipe = _session(16, 60)
    events = pipe.journal.events
    assert events.in_memory() == len(events) > 100 and events.spilled_bytes() == 0
    assert events.spill_error is not None and "No space left" in events.spill_error
    assert len([r for r in caplog.records if "stay in memory" in r.getMessage()]) == 1
    monkeypatch.setattr(os, "pwrite", real)
    for i in range(40):
        events.append({"after": i})
    assert events.spilled_bytes() > 0 and events.in_memory() <= 16 + 16
    kept = _session(None, 60).journal.events
    assert list(events) == list(kept) + [{"after": i} for i in range(40)]


def test_a_journal_damaged_on_disk_fails_loudly() -> None:
    """A spilled event whose bytes changed on disk is an error that says so, not a different event."""
    log = EventLog(2, 2)
    for i in range(10):
        log.append({"i": i})
    f = log._file
    assert f is not None and f._fd is not None
    first = os.pread(f._fd, 1, 8)
    os.pwrite(f._fd, bytes([first[0] ^ 0xFF]), 8)
    with pytest.raises(SpillReadError, match="damaged on disk"):
        list(log)
    assert log[-1] == {"i": 9}  # what is in memory still reads


@settings(max_examples=60, deadline=None)
@given(events, st.integers(0, 9), st.integers(1, 7), st.integers(0, 70), st.integers(0, 70))
def test_a_run_reads_back_what_indexing_does(evs: list[dict], keep: int, chunk: int, a: int, b: int) -> None:
    """read_run(lo, hi) hands back log[lo:hi], across spilled chunks and into the in-memory tail."""
    log = EventLog(keep, chunk)
    for e in evs:
        log.append(e)
    lo, hi = sorted((min(a, len(evs)), min(b, len(evs))))
    got = list(log.read_run(lo, hi))
    assert got == evs[lo:hi] and [repr(e) for e in got] == [repr(e) for e in evs[lo:hi]]
    with pytest.raises(IndexError):
        list(log.read_run(len(evs), len(evs) + 1))


def test_a_run_of_spilled_events_is_one_read_from_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A range of events on disk is read a run at a time (one pread for up to READ_RUN_EVENTS of them),
    not one pread each; a reader that stops early has decoded only what it took."""
    from engine.recording import event_log

    log = EventLog(256, 256)
    for i in range(2000):
        log.append({"k": "msg", "i": i, "text": "x" * 100})
    assert log.in_memory() < 500
    preads: list[int] = []
    pread = os.pread

    def counted(fd: int, size: int, at: int) -> bytes:
        preads.append(size)
        return pread(fd, size, at)

    monkeypatch.setattr(os, "pread", counted)
    loads = [0]
    import pickle

    real_loads = pickle.loads

    def counted_loads(data: Any) -> Any:
        loads[0] += 1
        return real_loads(data)

    monkeypatch.setattr(pickle, "loads", counted_loads)
    want = [{"k": "msg", "i": i, "text": "x" * 100} for i in range(100, 1300)]
    assert list(log.read_run(100, 1300)) == want
    # 1,200 events over five spilled chunks of 256: 1,200 / 64 runs and one more per chunk at most.
    assert len(preads) <= 1200 // event_log.READ_RUN_EVENTS + 5 and loads[0] == 1200
    preads.clear()
    loads[0] = 0
    run = log.read_run(0, 900)
    assert [next(run) for _ in range(5)] == [{"k": "msg", "i": i, "text": "x" * 100} for i in range(5)]
    assert len(preads) == 1 and loads[0] == 5


def test_a_run_over_a_damaged_event_fails_loudly() -> None:
    log = EventLog(2, 2)
    for i in range(10):
        log.append({"i": i})
    f = log._file
    assert f is not None and f._fd is not None
    first = os.pread(f._fd, 1, 8)
    os.pwrite(f._fd, bytes([first[0] ^ 0xFF]), 8)
    with pytest.raises(SpillReadError, match="damaged on disk"):
        list(log.read_run(0, 5))
    assert list(log.read_run(8, 10)) == [{"i": 8}, {"i": 9}]
