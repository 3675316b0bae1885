"""Synthetic sessions recorded to a `.cpsession` file by the real engine (a Pipeline with record=path):
an agent loop of one tool call a turn, its usage recorded, on a fixed clock. Each test keeps its own
turn count, window and tool outputs (what it measures depends on them); what they share is the loop.

Also: counting the chunks a recording reader feeds to zstd, by file offset (the replay tests' measure of
work done twice)."""

from __future__ import annotations

import collections
import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from engine.pipeline import Pipeline
from engine.recording import cpsession

BASH = ("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})


def record_coding_session(
    path: Path,
    turns: int,
    *,
    arguments: Callable[[int], dict[str, Any]],
    output: Callable[[int], str],
    window: int = 16_000,
    with_tool: bool = True,
) -> None:
    """deepseek-chat on its own wire: a bash call a turn with `arguments(t)`, answered by `output(t)`;
    usage in DeepSeek's names, the clock 5 s further each turn (from 1,000)."""
    now = [1_000.0]
    pipe = Pipeline("deepseek-chat", "deepseek", window, record=path, serve=False, clock=lambda: now[0])
    pipe.identity("You are a careful coding agent.")
    if with_tool:
        pipe.add_tool(*BASH)
    pipe.user("Fix the failing test.")
    for t in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 40})
        now[0] += 5
        args = json.dumps(arguments(t))
        calls = pipe.assistant(f"Step {t}.", [{"id": f"c{t}", "name": "bash", "arguments": args}])
        pipe.tool_result(calls[0].id, output(t))
    pipe.close()


def record_reading_session(
    path: Path,
    turns: int,
    seed: int = 0,
    *,
    body: Callable[[int], str] | None = None,
    model: str = "deepseek-chat",
    provider: str = "openai",
    window: int = 16_000,
) -> Path:
    """An agent reading one file a turn on a fixed clock: by default deepseek-chat on the OpenAI wire, each
    file ~3 KB of random text (from random.Random(seed)) so that the recording spans several compressed
    streams; `body(t)` gives turn t's file instead."""
    if body is None:
        rnd = random.Random(seed)

        def body(t: int) -> str:
            return f"file f{t}:\n" + "".join(rnd.choice("abcdefgh \n") for _ in range(3000))

    pipe = Pipeline(model, provider, window, record=path, serve=False, clock=lambda: 1_767_225_600.0)
    pipe.identity("You are a synthetic agent.")
    pipe.add_tool("read", "read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
    pipe.user("Read every file.")
    for t in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
        calls = pipe.assistant(
            f"step {t}", [{"id": f"c{t}", "name": "read", "arguments": json.dumps({"path": f"f{t}"})}]
        )
        pipe.tool_result(calls[0].id, body(t))
    pipe.close()
    return path


@contextmanager
def chunks_fed(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter[int]]:
    """Chunks every recording reader of the process feeds to zstd from here on, by file offset."""
    counts: collections.Counter[int] = collections.Counter()
    real = cpsession.RecordingReader._feed

    def feed(self: cpsession.RecordingReader, st: Any, pos: int, obj: dict[str, Any], end: int, *rest: Any) -> bytes:
        counts[pos] += 1
        return real(self, st, pos, obj, end, *rest)  # (rest: the chunk's fields, when the caller read them)

    monkeypatch.setattr(cpsession.RecordingReader, "_feed", feed)
    yield counts
