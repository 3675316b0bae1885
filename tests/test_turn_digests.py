"""Digests a session computes per text: a journaled text is hashed for its blob when it comes in, and the
history's release of old messages (Pipeline._release_history) evicts their texts by the blob hashes
the fold saw, not by hashing every released text again. Fails on the code before (one digest per
released text)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import engine.pipeline as pipeline_mod
import engine.pipeline_fold as fold_mod
from engine.artifacts import Message, Text, Thinking, ToolCall, ToolResult
from engine.hashing import sha256_hex
from engine.pipeline import Pipeline
from engine.recording.history_log import HistoryLog
from engine.tokens import CharTokenizer, TokenCounter


def _pipe(chunk: int | None) -> Pipeline:
    pipe = Pipeline(
        "deepseek-chat",
        "openai",
        6_000,
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        clock=lambda: 0.0,
        journal_keep=None,
        history_chunk=chunk,
    )
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug in module io.")
    return pipe


def _round(pipe: Pipeline, t: int) -> bytes:
    # Texts repeat now and then (the same output, the same arguments): a hash two parts share.
    calls = pipe.assistant(
        f"step {t % 40}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t % 9})}]
    )
    pipe.tool_result(calls[0].id, f"output {t % 23} line\n" * (3 + t % 17))
    if t % 29 == 7:
        pipe.user(f"Also look at module {t}.")
    req = pipe.next_request()
    pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 12})
    return req.bytes


def _texts(m: Message) -> list[str]:
    out = []
    for p in m.parts:
        if isinstance(p, (Text, Thinking)):
            out.append(p.text)
        elif isinstance(p, ToolResult):
            out.append(p.content)
        elif isinstance(p, ToolCall):
            out.append(p.arguments)
    return out


def test_released_texts_are_evicted_by_their_blob_hashes_without_hashing_them_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipe = _pipe(8)
    moved: list[Message] = []
    evicted: list[str] = []
    release, evict = HistoryLog.release, type(pipe.journal.blobs).evict

    def spy_release(log: HistoryLog, lo: int, upto: int) -> list[Message]:
        got = release(log, lo, upto)
        moved.extend(got)
        return got

    def spy_evict(store: Any, hashes: Any) -> int:
        hashes = list(hashes)
        evicted.extend(hashes)
        return evict(store, hashes)

    monkeypatch.setattr(HistoryLog, "release", spy_release)
    monkeypatch.setattr(type(pipe.journal.blobs), "evict", spy_evict)
    for t in range(150):
        _round(pipe, t)
    digests = 0

    def counted(data: Any) -> str:
        nonlocal digests
        digests += 1
        return sha256_hex(data)

    # (the fold hashes what it releases, _blob_hashes; the pipeline's own module a binder's text)
    monkeypatch.setattr(fold_mod, "sha256_hex", counted)
    monkeypatch.setattr(pipeline_mod, "sha256_hex", counted)
    before = len(moved)
    for t in range(150, 400):
        _round(pipe, t)
    assert pipe.history.on_disk() > 200 and len(moved) - before > 150
    # The pipeline's own digests of released texts: the code before made one per text moved (~500 here);
    # now only a text a second part with the same hash took the entry of is hashed again.
    texts = sum(len(_texts(m)) for m in moved[before:])
    assert texts > 300
    assert digests <= texts // 10, (digests, texts)
    # The same blobs evicted as hashing every moved text gives.
    assert evicted == [sha256_hex(x) for m in moved for x in _texts(m)]


def test_a_session_that_releases_sends_and_journals_as_one_that_keeps_everything() -> None:
    a, b = _pipe(4), _pipe(None)
    for t in range(300):
        assert _round(a, t) == _round(b, t)
    assert a.history.on_disk() > 200
    assert list(a.journal.events) == list(b.journal.events)
