"""This test process as an agent serving its probe: a real Pipeline with serve=True whose socket is in the
test's short runtime directory (the `rtdir` fixture), the turns it runs, and a real ProbeClient on it.

Two windows are in use: the lean-stream tests' 16,000 tokens (it compacts within a few dozen turns) and
the agent-send tests' 200,000 (it never does); each test file passes the one it was written with."""

from __future__ import annotations

import os
import subprocess
import sys
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


# A paced turn's CPU, at least (paced_turn): the probe's CPU budget treats an agent under IDLE_RATE (2%) of
# a core as idle (engine.probe.loop: it then takes IDLE_SHARE of wall time, not CPU_SHARE of the agent's
# CPU). A bare run_turns turn took ~2 ms here and 1.1 ms on the official CI's host: at a 0.05 s pace 3.8%
# against 2.1%, and on a 2x faster host the agent reads as idle between turns. Padded to 4 ms, a paced
# agent uses 7.4% of a core on any host (the smoothed rate dips well below the mean between turns: padded
# to 2.5 ms, 4.8%, the fill tests still failed 1 run in 3 with IDLE_RATE raised to 4%), and a test of the
# busy budget tests that budget wherever it runs.
TURN_CPU = 0.004


def paced_turn(pipe: Any, t: int, cpu: float = TURN_CPU) -> None:
    """Turn `t` as run_turns makes it, then this thread busy until the turn has used `cpu` seconds of its
    CPU (the agent's own work between model calls, the same on a fast host as on this one)."""
    t0 = time.thread_time()
    run_turns(pipe, range(t, t + 1))
    while time.thread_time() - t0 < cpu:
        pass


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


def wait_progressing(
    done: Callable[[], Any], progress: Callable[[], Any], what: str, stall: float = T
) -> None:
    """Wait until `done()`, failing only once `progress()` (what the wait is made of: events received, a
    journal position) has stood still for `stall` seconds. A fill of a long history takes seconds here,
    and several times that on a slower or loaded host (pinned to one core with three CPU hogs, a 10 s
    deadline on the whole fill ran out 3 times in one run): a stall is what a broken fill shows."""
    last, moved = progress(), time.monotonic()
    while not done():
        now = progress()
        if now != last:
            last, moved = now, time.monotonic()
        assert time.monotonic() - moved < stall, f"{what} (no progress in {stall:g} s, at {last!r})"
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


REPO = Path(__file__).resolve().parents[2]
# The inspector's own live source on the fold stream (as `cp-inspect attach` asks), following the agent
# until a line comes on its stdin: in another process, so that its CPU is not the agent's.
FOLD_READER = """
import sys, threading
from inspector.sources.live import LiveSource
src = LiveSource(int(sys.argv[1]), timeout=30, fold=True)
src.load_initial()
print("ATTACHED", flush=True)
threading.Thread(target=lambda: [None for _ in src.follow()], daemon=True).start()
for line in sys.stdin:
    break
src.close()
"""


def fold_reader(rtdir: Path) -> subprocess.Popen[str]:
    """FOLD_READER attached to this process's probe (its socket in `rtdir`), its first frame loaded."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_RUNTIME_DIR": str(rtdir.parent)}
    reader = subprocess.Popen(
        [sys.executable, "-c", FOLD_READER, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(REPO),
    )
    assert reader.stdout is not None
    assert reader.stdout.readline().strip() == "ATTACHED", "the inspector did not attach"
    return reader


def stop_reader(reader: subprocess.Popen[str]) -> None:
    assert reader.stdin is not None
    reader.stdin.write("\n")
    reader.stdin.flush()
    reader.wait(30)
