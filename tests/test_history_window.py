"""A long session holds the task, the live window and an index; the rest of the conversation is on disk
(engine/recording/history_log.py, blob_store.py, Pipeline._release_history).

What the tests hold: the in-memory history, texts and per-message memo entries stop growing with the
session (they would keep growing on the code before); the requests, journal, summaries and what-ifs
that read the old history (a shallower cut, the wave-1 policy) are the same as a session that keeps
everything in memory; a disk that refuses the write loses nothing and the session goes on; a damaged
file fails loudly."""

from __future__ import annotations

import errno
import gc
import json
import logging
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.pipeline import Pipeline
from engine.policy.settings import PolicySettings
from engine.policy.state import CompactionState
from engine.recording import spill_file
from engine.recording.blob_store import BlobStore
from engine.recording.history_log import HistoryLog
from engine.recording.spill_file import SpillReadError
from engine.tokens import CharTokenizer, TokenCounter

ROOT = Path(__file__).resolve().parents[1]


def _counter() -> TokenCounter:
    return TokenCounter(CharTokenizer())


def _pipe(
    chunk: int | None, window: int = 6_000, summarize: bool = False, keep: int | None = 128
) -> Pipeline:
    pipe = Pipeline(
        "deepseek-chat",
        "openai",
        window,
        counter=_counter(),
        serve=False,
        clock=lambda: 0.0,
        journal_keep=keep,
        history_chunk=chunk,
        summarizer=(lambda texts: f"summary of {len(texts)} messages, {sum(map(len, texts))} chars")
        if summarize
        else None,
    )
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug in module io.")
    return pipe


def _round(pipe: Pipeline, t: int, size: int = 0) -> bytes:
    calls = pipe.assistant(
        f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t % 13})}]
    )
    pipe.tool_result(calls[0].id, f"output {t} line\n" * (3 + (size or t % 17)))
    if t % 29 == 7:
        pipe.user(f"Also look at module {t}.")
    req = pipe.next_request()
    pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 12})
    return req.bytes


def _messages_alive() -> int:
    gc.collect()
    return sum(isinstance(o, Message) for o in gc.get_objects())


def _held(pipe: Pipeline, messages_before: int) -> dict[str, int]:
    """What the pipeline holds in memory for its conversation, counted without asking the new code:
    live Message objects (past those alive before the pipeline: earlier tests of the process leave
    some), texts in the journal's content store, per-message memo and count entries."""
    blobs: Any = pipe.journal.blobs
    mem = getattr(blobs, "_mem", blobs)  # a plain dict on the code before the blob store
    return {
        "messages": _messages_alive() - messages_before,
        "texts": len(mem),
        "text chars": sum(map(len, mem.values())),
        "message totals": len(pipe.measure._msg),
        "counts": len(pipe.counter),
    }


def test_memory_is_bounded_by_the_live_window_and_old_history_still_answers() -> None:
    """After N turns with compactions, what is held does not grow with N (it did: every message,
    text and count stayed); a what-if that needs the old history gives the same request as a session
    that kept everything in memory.

    Run in a fresh process: each of its fifteen samples collects garbage and walks every object the
    process holds, which in the suite's process (all that earlier tests left) took ~28 s in all
    against ~2 s alone; and the live Message count is then this session's, not earlier tests'."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from tests.test_history_window import {_memory_is_bounded.__name__} as f; f()",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]


def _memory_is_bounded() -> None:
    before = _messages_alive()
    pipe = _pipe(8)
    samples: list[dict[str, int]] = []
    for t in range(900):
        _round(pipe, t)
        if t >= 150 and t % 50 == 49:
            samples.append(_held(pipe, before))
    early, late = samples[:3], samples[-6:]  # turns 150-300; 600-900
    assert pipe.compaction.compactions >= 10
    for k in early[0]:
        # Three times the session, the same memory: the live window varies between compactions (hence
        # the slack; on the code before, these grew with every turn, 2-3x from early to late).
        top = max(s[k] for s in early)
        assert max(s[k] for s in late) <= top * 1.5 + 40, (k, early, late)
    # The texts held are the live window's (6,000 tokens of one character each here) and the fixed
    # sections: the code before held ~130,000 characters by turn 900.
    assert max(s["text chars"] for s in late) <= 2 * 6_000
    assert pipe.history.on_disk() > 1_500 and pipe.history.in_memory() < 200

    kept = _pipe(None)
    for t in range(900):
        _round(kept, t)
    assert kept.history.on_disk() == 0
    assert len(pipe.history) == len(kept.history)
    for state in (CompactionState(), replace(pipe.compaction, cut=pipe.compaction.cut // 2 | 1)):
        a, b = pipe.build({}, state=state), kept.build({}, state=state)
        assert a.serialized.body == b.serialized.body and a.trace == b.trace
    wave1 = replace(pipe.config, policy=PolicySettings.parse("wave1"))
    assert pipe.build({}, wave1).serialized.body == kept.build({}, wave1).serialized.body
    assert list(pipe.history) == list(kept.history)


@pytest.mark.parametrize("summarize", [False, True])
def test_a_session_with_old_history_on_disk_sends_and_journals_the_same(summarize: bool) -> None:
    """Requests and journal (summaries of new cuts read the old messages back from disk) equal a
    session that keeps its whole conversation in memory."""
    a, b = _pipe(4, summarize=summarize, keep=None), _pipe(None, summarize=summarize, keep=None)
    for t in range(400):
        assert _round(a, t) == _round(b, t)
    assert a.history.on_disk() > 300
    assert list(a.journal.events) == list(b.journal.events)
    assert a.compaction == b.compaction and a.compaction.compactions >= 5
    if summarize:
        assert any(e["k"] == "summary" for e in a.journal.events)


def _outcome(pipe: Pipeline, *args: Any, **kw: Any) -> Any:
    """A build's body, or the error it raised (a what-if may ask for an impossible request)."""
    try:
        return pipe.build(*args, **kw).serialized.body
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=12, deadline=None)
@given(
    st.integers(1, 9),
    st.sampled_from([3_000, 5_000, 9_000]),
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 4)), min_size=20, max_size=100),
)
def test_hypothesis_sessions_equal_an_in_memory_session(
    chunk: int, window: int, summarize: bool, rounds: list[tuple[int, int]]
) -> None:
    """Random sessions (output sizes, what-ifs between turns, a window change) send, journal and answer
    what-ifs exactly as a session that keeps everything in memory."""
    a, b = _pipe(chunk, window, summarize), _pipe(None, window, summarize)
    for t, (size, whatif) in enumerate(rounds):
        assert _round(a, t, size) == _round(b, t, size)
        if whatif == 1:  # a shallower cut than the live one (at a round boundary, or not: then an error)
            st_ = replace(a.compaction, cut=max(0, a.compaction.cut - (t % 7) - 1))
            assert _outcome(a, {}, state=st_) == _outcome(b, {}, state=st_)
        elif whatif == 2:
            cfg = replace(a.config, policy=PolicySettings.parse("wave1"))
            assert _outcome(a, {}, cfg) == _outcome(b, {}, cfg)
        elif whatif == 3 and t == len(rounds) // 2:
            a.set_window(window + 2_000)
            b.set_window(window + 2_000)
    assert list(a.journal.events) == list(b.journal.events)
    assert list(a.history) == list(b.history) and a.history == b.history


# ----------------------------------------------------------------------------- the stores alone
def _msg(i: int) -> Message:
    if i % 2:
        return Message("assistant", (Text(f"t{i}"), ToolCall(f"c{i}", "bash", json.dumps({"i": i}))))
    return Message("user", (ToolResult(f"c{i - 1}", "x" * (i % 50), i % 7 == 0),))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40)), max_size=60),
    st.integers(1, 6),
    st.integers(0, 3),
)
def test_history_log_reads_like_the_list_it_replaces(ops: list[tuple[int, int]], chunk: int, lo: int) -> None:
    log, model = HistoryLog(chunk), []
    for n, upto in ops:
        for _ in range(n):
            model.append(_msg(len(model)))
            log.append(model[-1])
        moved = log.release(lo, upto)
        assert moved == model[log._base - len(moved) : log._base] if moved else True
        assert log.in_memory() + log.on_disk() == len(model)
    assert len(log) == len(model) and list(log) == model and log == model
    assert [log[i] for i in range(-len(model), 0)] == model
    assert [m.sha for m in log] == [m.sha for m in model]
    for a in range(0, len(model) + 2, 3):
        for b in (a, a + 1, a + 7, len(model), -1):
            assert log[a:b] == model[a:b]
    assert log[1::3] == model[1::3] and list(reversed(log)) == model[::-1]
    with pytest.raises(IndexError):
        log[len(model)]


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40)), max_size=20),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60)), max_size=40),
    st.sampled_from([None, 1, 2, 3, 6]),
    st.integers(0, 3),
)
def test_history_log_iterates_like_a_list_while_it_grows_and_releases(
    before: list[tuple[int, int]], during: list[tuple[int, int]], chunk: int | None, lo: int
) -> None:
    # Iteration hands out the live window a slice at a time (or, with nothing ever written, as the list
    # itself): messages appended while iterating are still seen, and a release in the middle (messages
    # moving to disk under the iterator) neither skips nor repeats one, as with the list it replaces.
    log, model = HistoryLog(chunk), []
    for n, upto in before:
        for _ in range(n):
            model.append(_msg(len(model)))
            log.append(model[-1])
        log.release(lo, upto)
    end = object()
    got_it, want_it = iter(log), iter(model)
    for n, upto in during:
        got, want = next(got_it, end), next(want_it, end)
        assert got == want
        if want is end:
            return
        for _ in range(n):
            model.append(_msg(len(model)))
            log.append(model[-1])
        log.release(lo, upto)
    assert list(got_it) == list(want_it)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 12)), max_size=80))
def test_blob_store_answers_like_a_dict(ops: list[tuple[int, int]]) -> None:
    from engine.hashing import sha256_hex

    store, model = BlobStore(), {}
    for op, i in ops:
        text = f"text {i} " * (i % 5)
        h = sha256_hex(text)
        if op == 0:
            store[h] = model[h] = text
        elif op == 1:
            store.evict(list(model)[: i % 4])
        elif op == 2:
            assert (h in store) == (h in model)
            assert store.get(h) == model.get(h)
        else:
            store.evict([h])
        assert len(store) == len(model)
    assert dict(store.items()) == model and sorted(store) == sorted(model)


def test_texts_sharing_the_first_eight_bytes_of_their_hash_are_told_apart() -> None:
    store = BlobStore()
    a, b = "a" * 64, "a" * 16 + "b" * 48  # same 8-byte prefix, different hashes
    store[a], store[b] = "first", "second"
    assert store.evict([a, b]) == 1  # one index slot per prefix: the second stays in memory
    assert store[a] == "first" and store[b] == "second" and len(store) == 2
    assert ("a" * 16 + "c" * 48) not in store


# ----------------------------------------------------------------------------- failures
def test_a_disk_that_refuses_the_write_loses_nothing(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    """Disk full: the messages and texts stay in memory, one clear warning, the session goes on with
    the same requests; once the disk takes writes again they move."""
    real = spill_file.SpillFile.append

    def full(self: spill_file.SpillFile, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    a, b = _pipe(4), _pipe(None)
    monkeypatch.setattr(spill_file.SpillFile, "append", full)
    with caplog.at_level(logging.WARNING, logger="contextpipe.history"):
        for t in range(200):
            assert _round(a, t) == _round(b, t)
    assert a.history.on_disk() == 0 and a.history.in_memory() == len(b.history)
    assert a.history.spill_error is not None and "No space left" in a.history.spill_error
    # One warning from each store that could not write (the history, and the journal and blobs if they
    # tried), not one a turn.
    warned = [r.getMessage() for r in caplog.records if "stay in memory" in r.getMessage()]
    assert len([w for w in warned if "old messages" in w]) == 1 and len(warned) <= 3
    monkeypatch.setattr(spill_file.SpillFile, "append", real)
    for t in range(200, 300):
        assert _round(a, t) == _round(b, t)
    assert a.history.on_disk() > 100
    assert list(a.history) == list(b.history)


def test_a_write_cut_short_leaves_nothing_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails half way (a partial pwrite, then an error) commits nothing: the next write
    goes where the failed one started and every message reads back."""
    log = HistoryLog(2)
    msgs = [_msg(i) for i in range(12)]
    for m in msgs[:6]:
        log.append(m)
    calls = {"n": 0}
    real_pwrite = os.pwrite

    def flaky(fd: int, data: Any, offset: int) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_pwrite(fd, bytes(data)[:10], offset)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(spill_file.os, "pwrite", flaky)
    assert log.release(1, 5) == [] and log.spill_error is not None
    monkeypatch.setattr(spill_file.os, "pwrite", real_pwrite)
    for m in msgs[6:]:
        log.append(m)
    assert log.release(1, 11) == msgs[1:11]
    assert list(log) == msgs and log[1:11] == msgs[1:11]


def test_a_damaged_file_fails_loudly() -> None:
    log = HistoryLog(2)
    for i in range(8):
        log.append(_msg(i))
    log.release(1, 7)
    f = log._file
    assert f is not None and f._fd is not None
    os.pwrite(f._fd, b"\xff\xff", 40)
    with pytest.raises(SpillReadError, match="damaged"):
        list(log)


def test_counts_stay_while_a_recording_will_store_them(tmp_path: Any) -> None:
    """A recording stores the counter's counts at close (by position), so nothing is forgotten while
    one is open; afterwards the session forgets counts of what it moved to disk."""
    from engine.recording.cpsession import RecordingWriter

    c = _counter()
    c.count("hello", "a" * 64)
    w = RecordingWriter(tmp_path / "s.cpsession", {"model": "m", "provider": "openai"}, counter=c)
    c.forget(["a" * 64])
    assert len(c) == 1
    w.close()
    c.forget(["a" * 64])
    assert len(c) == 0


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2**64 - 1) | st.integers(0, 300)), max_size=400))
def test_prefix_index_answers_like_a_dict(ops: list[tuple[int, int]]) -> None:
    from engine.recording.prefix_index import PrefixIndex

    idx, model = PrefixIndex(), {}
    for op, k in ops:
        if op == 0:
            if idx.put(k, k ^ 0xFFFF):
                model[k] = k ^ 0xFFFF
            else:
                assert k in (0, 1)
        elif op == 1:
            assert idx.pop(k) == model.pop(k, None)
        else:
            assert idx.get(k) == model.get(k)
        assert len(idx) == len(model)
    assert dict(idx.items()) == model
