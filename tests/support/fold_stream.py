"""An agent (a Pipeline serving its probe) and an inspector's live source on its fold stream, attached and
past its first turns, with the fold client named for publish()'s straight path: where the fold stream's
send tests (test_probe_fold_straight.py, test_probe_fold_coalesce.py) start. And their shared end: every
turn the inspector shows is the agent's own trace."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.sources.live import LiveSource
from tests.test_probe_fold import T, _agent_traces, _Follower, _shown, _turn


def fold_pipeline(rtdir: Path, record: str | None) -> Any:
    """A serving agent (Anthropic, a 200k window) with its identity and first user message."""
    from engine.pipeline import Pipeline

    pipe = Pipeline(
        "claude-sonnet-4", "anthropic", 200_000, serve=True, max_output_tokens=1024, record=record
    )
    assert pipe.probe is not None
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    return pipe


def wait_until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + T
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


@dataclass
class FoldStream:
    pipe: Any
    probe: Any
    src: LiveSource
    view: _Follower


@contextmanager
def fold_stream(rtdir: Path, record: bool, backfill_idle: float | None = None) -> Iterator[FoldStream]:
    """The agent (recording beside `rtdir` with `record`) after turns 0 and 1, a folding live source
    attached (its only client, tracing nothing) and following, and the fold client named for the straight
    path (the I/O thread names it once asleep with nothing due). The agent is closed on the way out."""
    pipe = fold_pipeline(rtdir, record=str(rtdir.parent / "a.cpsession") if record else None)
    probe = pipe.probe
    try:
        _turn(pipe, 0)
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=backfill_idle, fold=True)
        assert src._folding
        view = _Follower(src)
        wait_until(lambda: probe.client_count == 1 and probe.tracing_clients == 0, "the fold client never attached")
        _turn(pipe, 1)
        view.wait_for(1)
        wait_until(
            lambda: probe._ring_one is not None and probe._ring_one.fold,
            "the I/O thread, asleep with nothing due, never named the fold client for publish's straight path",
        )
        yield FoldStream(pipe, probe, src, view)
    finally:
        pipe.close()


def assert_shown_as_sent(fs: FoldStream, turns: list[int], key_order: bool = True) -> None:
    """Stop following; each of `turns` as the inspector shows it is the agent's own trace (with
    `key_order`, its keys in the agent's order too)."""
    shown = _shown(fs.src, turns)
    fs.view.stop()
    agent = _agent_traces(fs.pipe)
    for t in turns:
        assert shown[t] == agent[t], t
        if key_order:
            assert list(shown[t]) == list(agent[t])
