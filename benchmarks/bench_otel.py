"""OpenTelemetry export overhead on the agent: a realistic engine turn with export on vs off.

Two real `engine.Pipeline`s run in this one process, interleaved in rounds (off, on, on, off, ...), so
machine drift hits both alike. "on" is an OtelSink with the SDK's BatchSpanProcessor and the real
OTLP/HTTP exporter, sending to a receiver in a separate process (as a collector would be). Figures:
the median turn (wall), and this process's CPU time per turn (agent thread + the batch exporter
thread; the most reproducible on a shared machine). Goal: ratio <= 1.02.
Leaves out: the collector's own cost (another process), and network latency (loopback).

    python benchmarks/bench_otel.py [--turns 40] [--rounds 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine import Pipeline  # noqa: E402
from engine.export.otel import OtelSink  # noqa: E402

RECEIVER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.fleet.otlp_receiver import OtlpReceiver
with OtlpReceiver() as rx:
    print(rx.url, flush=True)
    sys.stdin.read()
    print(len(rx.spans), flush=True)
"""


def make(export_to: str | None) -> tuple[Pipeline, OtelSink | None]:
    pipe = Pipeline("claude-sonnet-4", provider="anthropic", window=32000)
    pipe.identity("You are a careful coding agent. " * 20)
    pipe.constraints("Never push to main. Run the tests before you finish.")
    pipe.goal("Make tests/test_io.py pass.")
    for i in range(6):
        pipe.add_tool(f"tool{i}", f"Tool number {i}", {"type": "object", "properties": {"arg": {"type": "string"}}})
    pipe.user("The test fails with a KeyError, please fix it.")
    sink = None
    if export_to:
        sink = OtelSink({"provider": "anthropic"}, endpoint=export_to)
        for ev in pipe.journal.events:
            sink(ev)
        pipe.journal.subscribe(sink)
    return pipe, sink


def turn(pipe: Pipeline, i: int) -> None:
    req = pipe.next_request()
    pipe.record_usage({"input_tokens": req.trace["final_tokens"], "cache_read_input_tokens": 0, "output_tokens": 40})
    calls = pipe.assistant("Let me look.", tool_calls=[{"id": f"c{i}", "name": "tool1", "arguments": '{"arg": "x"}'}])
    pipe.tool_result(calls[0].id, f"line {i}\n" * 60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    rx = subprocess.Popen([sys.executable, "-c", RECEIVER.format(root=str(ROOT))], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
    assert rx.stdout is not None and rx.stdin is not None
    url = rx.stdout.readline().strip()
    walls: dict[str, list[float]] = {"off": [], "on": []}
    cpus: dict[str, list[float]] = {"off": [], "on": []}
    n = {"off": 0, "on": 0}
    for r in range(args.rounds):
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
            pipe, sink = make(url if mode == "on" else None)
            for i in range(5):  # warm-up turns: first plans fill the token cache
                turn(pipe, i)
            c0 = time.process_time()
            for i in range(5, 5 + args.turns):
                w0 = time.perf_counter()
                turn(pipe, i)
                walls[mode].append(time.perf_counter() - w0)
            if sink is not None:
                sink.close()  # drains the queue: the exporter thread's work counts against "on"
            cpus[mode].append((time.process_time() - c0) / args.turns)
            n[mode] += args.turns
            pipe.close()
    rx.stdin.close()
    received = int(rx.stdout.readline().strip() or 0)
    rx.wait(10)
    med = {m: statistics.median(v) * 1000 for m, v in walls.items()}
    cpu = {m: statistics.median(v) * 1000 for m, v in cpus.items()}
    print(f"turns per mode: {n['on']}; spans received by the collector: {received}")
    print(f"median turn wall: off {med['off']:.3f} ms, on {med['on']:.3f} ms, ratio {med['on'] / med['off']:.3f}")
    print(f"CPU per turn:     off {cpu['off']:.3f} ms, on {cpu['on']:.3f} ms, ratio {cpu['on'] / cpu['off']:.3f}")


if __name__ == "__main__":
    main()
