"""What connections that never complete a valid hello cost an agent's turn (issue 15.4; fuzz43's finding).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_probe_hostile.py [--held 8] [--turns 80] [--rounds 3]

A real agent (a Pipeline serving its probe, in this process, in a private runtime directory so that
no `cp-inspect top` or `ps` elsewhere attaches to it) takes paced turns (--pace apart) while a child
process holds --held connections of one kind open: none; silent (connects, sends nothing); a half
frame (the first bytes of a hello); garbage (a whole frame whose checksum is wrong: told why and
closed); a protocol-1 hello (a client that completed its hello and reads traces: the cost it may
have); and the inspector's own fold client (`cp-inspect attach`'s stream). Kinds interleave within
each round. Reported per kind: the agent's thread CPU a turn (median of the round's turns, then the
median over rounds; wall beside it), and how many turns built their trace as they came (the rest
stayed records, engine/trace_lazy.py): only the protocol-1 hello should make any built. Load is
printed before and after: on a shared machine a CPU difference under ~3% does not resolve, the
built-turn counts are exact. The script puts its own tree first on sys.path: to measure another
tree, run that tree's copy of it (for a tree from before it, copy it in).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KINDS = ("none", "silent", "half_frame", "garbage", "hello1", "fold")

HOLDER = """
import socket, sys
from engine.recording.frames import HEADER, encode_frame
path, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
hello = encode_frame({"k": "hello", "protocol": 1})
data = {"silent": b"", "half_frame": hello[:5], "garbage": HEADER.pack(8, 0) + b"garbage!", "hello1": hello}[kind]
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    if data:
        s.sendall(data)
    socks.append(s)
print("held", flush=True)
sys.stdin.read()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--held", type=int, default=8, help="connections held open at a time")
    ap.add_argument("--turns", type=int, default=80, help="timed turns per kind and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pace", type=float, default=0.01, help="seconds between turns (the model's wait)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cp-hostile-") as tmp:
        os.environ["XDG_RUNTIME_DIR"] = tmp
        run(a)


def run(a: argparse.Namespace) -> None:
    from engine.pipeline import Pipeline
    from engine.probe.client import ProbeClient
    from engine.trace_lazy import TurnRecord

    pipe = Pipeline("claude-sonnet-4", "anthropic", 64_000, serve=True, max_output_tokens=1024)
    probe = pipe.probe
    assert probe is not None
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "run a command", {"type": "object"})
    pipe.user("Fix the failing test.")
    state = {"turn": 0}

    def turns(n: int) -> tuple[float, float, int]:
        """n paced turns: the agent thread's CPU and wall a turn (medians, us), and how many were built."""
        cpu, wall = [], []
        built = 0
        for _ in range(n):
            t = state["turn"]
            w0, c0 = time.perf_counter(), time.thread_time()
            req = pipe.next_request()  # (an agent that sends the body and reads no trace)
            built += not isinstance(pipe.traces.raw(-1), TurnRecord)  # (this turn's: built, or a record)
            pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10})
            calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
            pipe.tool_result(calls[0].id, f"output of step {t}\n" + "word " * 40)
            cpu.append(time.thread_time() - c0)
            wall.append(time.perf_counter() - w0)
            state["turn"] = t + 1
            time.sleep(a.pace)
        return statistics.median(cpu) * 1e6, statistics.median(wall) * 1e6, built

    def settle(cond: Any) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not cond():
            turns(5)  # (the agent goes on while the probe admits or lets go: not timed)
        time.sleep(0.2)

    def phase(kind: str) -> tuple[float, float, int]:
        if kind == "none":
            return turns(a.turns)
        if kind == "fold":
            c = ProbeClient.connect(
                os.getpid(),
                lean=True,
                elide=True,
                poll=True,
                tail=True,
                fold=True,
                runtime_dir=probe.path.parent,
            )
            try:
                settle(lambda: probe.client_count == 1)
                return turns(a.turns)
            finally:
                c.close()
                settle(lambda: probe.client_count == 0)
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(probe.path), kind, str(a.held)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            want = 0 if kind == "garbage" else a.held
            settle(lambda: probe.client_count == want)
            return turns(a.turns)
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(30)
            settle(lambda: probe.client_count == 0)

    print(
        f"load {os.getloadavg()[0]:.2f}; {a.held} held connections, {a.turns} turns a kind, {a.rounds} rounds"
    )
    turns(30)  # warm
    rows: dict[str, list[tuple[float, float, int]]] = {k: [] for k in KINDS}
    for _ in range(a.rounds):
        for kind in KINDS:
            rows[kind].append(phase(kind))
    base = statistics.median(r[0] for r in rows["none"])
    for kind in KINDS:
        cpu = statistics.median(r[0] for r in rows[kind])
        wall = statistics.median(r[1] for r in rows[kind])
        built = sum(r[2] for r in rows[kind])
        by_round = " ".join(f"{r[0]:.0f}" for r in rows[kind])
        print(
            f"{kind:>10}: agent thread CPU {cpu:6.0f} us a turn ({cpu / base:.2f}x none) [{by_round}], wall {wall:6.0f} us; "
            f"built as they came {built} of {a.turns * a.rounds}"
        )
    print(f"load {os.getloadavg()[0]:.2f}")
    pipe.close()


if __name__ == "__main__":
    main()
