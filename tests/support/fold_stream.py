"""An agent (a Pipeline serving its probe) and an inspector's live source on its fold stream, attached and
past its first turns, with the fold client named for publish()'s straight path: where the fold stream's
send tests (test_probe_fold_straight.py, test_probe_fold_coalesce.py) start. And their shared end: every
turn the inspector shows is the agent's own trace."""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.probe.client import ProbeClient
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


def spilling_pipeline(turn: Callable[[Any, int], None], turns: int = 150) -> Any:
    """A serving agent that keeps 256 journal events in memory (the rest spill to disk), after `turns`
    turns made by `turn(pipe, t)`. The caller closes it."""
    from engine.pipeline import Pipeline

    pipe = Pipeline(
        "claude-sonnet-4", "anthropic", 200_000, serve=True, max_output_tokens=1024, journal_keep=256
    )
    assert pipe.probe is not None
    try:
        pipe.identity("You are a careful coding agent.")
        pipe.user("Fix the failing test.")
        for t in range(turns):
            turn(pipe, t)
    except BaseException:
        pipe.close()
        raise
    return pipe


def raw_fold_client(pipe: Any) -> ProbeClient:
    """A raw client of `pipe`'s fold stream (lean, elided, polled, as the inspector asks), past its
    snapshot."""
    c = ProbeClient.connect(
        os.getpid(),
        timeout=T,
        runtime_dir=pipe.probe.path.parent,
        lean=True,
        elide=True,
        poll=True,
        fold=True,
    )
    assert c.fold
    for _ in range(c.hello["snapshot"]):
        assert c.recv(T) is not None
    return c


def wait_until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + T
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


@contextmanager
def traced_turn_publishes(probe: Any) -> Iterator[list[list[str]]]:
    """The Python calls each turn close's publish() makes on the agent's thread (the names, in order; one
    list a close), while the block runs. sys.setprofile traces this thread only: the probe's own threads
    are not traced. A recording agent builds its turns, so both closing kinds count.

    A garbage collection that happens to start inside the close runs gc.callbacks there (Hypothesis
    installs one, `gc_callback`, once any property test has run in the process): those frames, and what
    they call, are the collector's, not the close's, and are left out. In a whole-suite run the close's
    list read ['gc_callback', 'gc_callback', 'publish', '_hand_off'] now and then."""
    calls: list[list[str]] = []
    real = probe.publish

    def traced(event: Any, frame: Any = None) -> None:
        if event.get("k") not in ("turn_deferred", "turn"):
            return real(event, frame)
        names: list[str] = []
        calls.append(names)
        collector = {getattr(cb, "__code__", None) for cb in gc.callbacks}
        inside = [0]  # frames open within a gc callback

        def profile(fr: Any, what: str, arg: Any) -> None:
            if what == "call":
                if inside[0] or fr.f_code in collector:
                    inside[0] += 1
                else:
                    names.append(fr.f_code.co_name)
            elif what == "return" and inside[0]:
                inside[0] -= 1

        sys.setprofile(profile)
        try:
            return real(event, frame)
        finally:
            sys.setprofile(None)

    probe.publish = traced
    try:
        yield calls
    finally:
        del probe.publish


def attach_folding(pipe: Any, backfill_idle: float | None) -> tuple[LiveSource, _Follower]:
    """`cp-inspect attach`'s source on `pipe`'s fold stream (folding asserted) and a view following it,
    once the probe has it as its only client, tracing nothing."""
    probe = pipe.probe
    src = LiveSource(os.getpid(), timeout=T, backfill_idle=backfill_idle, fold=True)
    assert src._folding
    view = _Follower(src)
    wait_until(lambda: probe.client_count == 1 and probe.tracing_clients == 0, "the fold client never attached")
    return src, view


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
        src, view = attach_folding(pipe, backfill_idle)
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
