"""This test process as an agent serving its probe: a real Pipeline with serve=True whose socket is in the
test's short runtime directory (the `rtdir` fixture), the turns it runs, and a real ProbeClient on it.

Two windows are in use: the lean-stream tests' 16,000 tokens (it compacts within a few dozen turns) and
the agent-send tests' 200,000 (it never does); each test file passes the one it was written with."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.probe.client import ProbeClient

T = 10.0  # per wait: only reached when something is broken


def serving_pipeline(monkeypatch: pytest.MonkeyPatch, rtdir: Path, window: int = 16_000, **kw: Any) -> Any:
    """claude-sonnet-4 on the Anthropic wire, serving its probe in `rtdir`, its system and task given."""
    from engine.pipeline import Pipeline

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rtdir.parent))
    pipe = Pipeline("claude-sonnet-4", "anthropic", window, serve=True, **kw)
    assert pipe.probe is not None
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    return pipe


def run_turns(pipe: Any, turns: range) -> None:
    """Turns of a bash call each, usage with a cache read of the turn's number, outputs of 1-7 lines."""
    for t in turns:
        req = pipe.next_request()
        pipe.record_usage(
            {"input_tokens": req.trace["final_tokens"], "output_tokens": 10, "cache_read_tokens": t}
        )
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, f"output of step {t}\n" + "line of output\n" * (t % 7))


def one_turn(pipe: Any, t: int, result: str = "") -> None:
    """Turn `t`: a bash call answered by `result` (by default one line naming the step)."""
    req = pipe.next_request()
    pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
    pipe.tool_result(calls[0].id, result or f"output of step {t}")


def connect(pipe: Any, **kw: Any) -> ProbeClient:
    """A client of this process's probe, its snapshot read."""
    c = ProbeClient.connect(os.getpid(), timeout=T, runtime_dir=pipe.probe.path.parent, **kw)
    for _ in range(c.hello["snapshot"]):
        assert c.recv(T) is not None
    return c


def wait_for(cond: Callable[[], Any], what: str) -> None:
    deadline = time.monotonic() + T
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def probe_asleep(probe: Any) -> bool:
    """The I/O thread has nothing in progress and is blocked in select() (not in a pass, nor resting
    off its CPU budget after a client's snapshot): what the agent's thread needs to send itself. A
    client whose hello is still awaited counts as busy: its start (the hello, the snapshot, a ring
    hand-over) is a pass of the I/O thread still to come, which a test counting passes would see late."""
    return (
        not probe._pass_lock.locked()
        and not probe._pending
        and not probe._wake_pending
        and probe._due is None
        and all(not c.outbuf and c.lean and c.hello_due is None for c in probe._clients.values())
    )


def settle(probe: Any, clients: int) -> None:
    wait_for(lambda: probe.client_count == clients and probe_asleep(probe), "the probe did not settle")
