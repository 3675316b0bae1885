"""`cp-inspect top` with many live agents: is the table still responsive?

Starts N real demo agents (default 50) at one turn per second each, in a private runtime directory, and
drives the real TopApp headless (Pilot) for a while. Reports, beside each other:
  - refresh: thread CPU and wall time of one table refresh (snapshot + cell updates), p50/p95
  - loop lag: how late a 50 ms UI timer fires (the delay a key press would see), p50/p95/max
  - key: wall time from pressing `s` (re-sort all rows) until the app is idle again, p50/p95
  - the watcher's reader threads' share of the inspector process's CPU
A frame is 16 ms: the goal is refresh p95 and loop-lag p95 under one frame or two.
Leaves out: terminal output (headless), and the agents' own cost (they are separate processes).

    python benchmarks/bench_top.py [--agents 50] [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.probe.watch import FleetWatcher  # noqa: E402
from inspector.top_app import TopApp  # noqa: E402
from panels.fleet_table import FleetTable  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


async def drive(runtime: Path, agents: int, seconds: float) -> dict[str, list[float]]:
    watcher = FleetWatcher(runtime).start()
    app = TopApp(watcher, refresh_s=0.5)
    refresh_cpu: list[float] = []
    refresh_wall: list[float] = []
    original = app.refresh_table

    def timed() -> None:
        c0, w0 = time.thread_time(), time.perf_counter()
        original()
        refresh_cpu.append((time.thread_time() - c0) * 1000)
        refresh_wall.append((time.perf_counter() - w0) * 1000)

    app.refresh_table = timed  # type: ignore[method-assign]
    lag: list[float] = []
    keys: list[float] = []
    try:
        async with app.run_test(size=(160, 60)) as pilot:
            table = app.query_one(FleetTable)
            t0 = time.monotonic()
            while table.row_count < agents and time.monotonic() - t0 < 120:
                await asyncio.sleep(0.5)
            refresh_cpu.clear()
            refresh_wall.clear()
            cpu0 = time.process_time()
            end = time.monotonic() + seconds
            expected = time.monotonic() + 0.05
            while time.monotonic() < end:
                await asyncio.sleep(max(0.0, expected - time.monotonic()))
                now = time.monotonic()
                lag.append((now - expected) * 1000)
                expected = now + 0.05
                if len(lag) % 40 == 0:
                    k0 = time.perf_counter()
                    await pilot.press("s")
                    await pilot.pause()
                    keys.append((time.perf_counter() - k0) * 1000)
                    expected = time.monotonic() + 0.05
            cpu = time.process_time() - cpu0
            print(f"rows shown: {table.row_count}; inspector process CPU {cpu / seconds:.1%} of one core")
    finally:
        watcher.stop()
    return {"refresh_cpu": refresh_cpu, "refresh_wall": refresh_wall, "lag": lag, "keys": keys}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Path(tmp) / "run"
        runtime.mkdir(mode=0o700)
        env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
        root = Path(__file__).resolve().parents[1]
        env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
        children = [subprocess.Popen([sys.executable, "-m", "inspector.demo_agent", "--turns", "100000", "--delay",
                                      "1", "--serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    for _ in range(args.agents)]
        try:
            r = asyncio.run(drive(runtime / "contextpipe", args.agents, args.seconds))
        finally:
            for c in children:
                c.kill()
            for c in children:
                c.wait(10)
    print(f"{args.agents} agents at ~1 turn/s each, {args.seconds:.0f} s")
    for name, unit in (("refresh_cpu", "ms CPU"), ("refresh_wall", "ms wall"), ("lag", "ms late"),
                       ("keys", "ms wall")):
        xs = r[name]
        if xs:
            print(f"  {name:<13} n={len(xs):<4} p50 {statistics.median(xs):6.2f}  p95 {pct(xs, 0.95):6.2f}  "
                  f"max {max(xs):6.2f}  ({unit})")


if __name__ == "__main__":
    main()
