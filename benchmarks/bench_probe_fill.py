"""What an inspector filling a long session's history costs the agent: this tree's probe against another's.

    .venv/bin/python benchmarks/bench_probe_fill.py --base /tmp/attach30base [--history 20000] [--rounds 2]
                                                    [--pace 0.05] [--max-fill 300] [--fold]

One Pipeline (a 1-2 ms turn) builds --history turns unpaced (the journal keeps 4,096 events in memory and
spills the rest to disk, as an agent's does). Then rounds of blocks A B B A / B A A B (A: the probe of
the --base tree, B: this tree's), with a block of no attach (none) per round: each block puts a fresh
probe of its tree on the Pipeline (the journal is the same), starts the inspector's live source in its
own process (attached to the snapshot's tail, it fetches the history before it by range, as
`cp-inspect attach` does) and runs paced turns (--pace seconds of model call after each) until the
source has the whole history and the probe owes it nothing. The other engine modules are this tree's
for both (the base's engine/probe is loaded as a package of its own).

Per block: the fill's time (the reader's start to its whole history), the agent process's CPU per second
of it (agent and probe threads: the reader is another process) and the probe thread's part, the agent
thread's CPU and wall per turn (median, p99, max), and the probe thread's passes. Then the ratios B/A of
the medians over blocks. CPU figures are the thread and process clocks (wall time on a shared machine
runs to several times CPU); the none blocks give the agent's own CPU per second and per turn.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from probe_agents import fresh_pipeline, thread_cpu  # noqa: E402  (bench_probe's Pipeline, the probe thread's clock)
from probe_attach import FIRST_READER  # noqa: E402  (the live-source reader)


def base_probe(base: Path, into: Path) -> ModuleType:
    """The --base tree's engine/probe as the package `cpbase_probe` (its own imports of engine.probe
    rewritten to it); the rest of the engine is this tree's."""
    pkg = into / "cpbase_probe"
    shutil.copytree(base / "engine" / "probe", pkg)
    for f in pkg.glob("*.py"):
        f.write_text(re.sub(r"\bengine\.probe\b", "cpbase_probe", f.read_text()))
    sys.path.insert(0, str(into))
    return importlib.import_module("cpbase_probe.server")


def put_probe(pipe: Any, server_mod: ModuleType) -> Any:
    """Close the Pipeline's probe and put a fresh one of `server_mod` in its place (the same journal)."""
    old = pipe.probe
    hello = dict(old._hello)
    old.close()
    events = pipe.journal.events
    server = server_mod.ProbeServer(hello, lambda: events, redact=False)
    server.start()
    pipe.probe = server
    return server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, required=True, help="the tree to compare with (A)")
    ap.add_argument("--history", type=int, default=20_000, help="turns before the attach")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--pace", type=float, default=0.05, help="seconds of model call after each turn")
    ap.add_argument("--max-fill", type=float, default=300.0, help="give a block up after this many seconds")
    ap.add_argument(
        "--fold", action="store_true", help="the reader asks for the fold stream, as cp-inspect attach"
    )
    args = ap.parse_args()

    from engine.recording.journal import Journal

    tmp = Path(tempfile.mkdtemp(prefix="cpfill-", dir="/tmp"))
    rt = tmp / "contextpipe"
    os.environ["XDG_RUNTIME_DIR"] = str(tmp)
    mods = {"A": base_probe(args.base.resolve(), tmp), "B": importlib.import_module("engine.probe.server")}
    import engine.pipeline

    engine.pipeline.Journal = lambda *a, **k: Journal(keep=4096)  # type: ignore[misc,assignment]
    ns = argparse.Namespace(window=16_000, recording=False, result_kb=1)
    _, step, pipe = fresh_pipeline(ns, rt, 0)
    t0 = time.perf_counter()
    for t in range(args.history):
        step(t)
    turn = args.history
    print(
        f"history: {args.history} turns built in {time.perf_counter() - t0:.1f} s; journal {len(pipe.journal.events)} events",
        flush=True,
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    reader_src = FIRST_READER
    if args.fold:  # (an agent that cannot serve it sends the elided stream, as to cp-inspect attach)
        reader_src = reader_src.replace("timeout=30)", "timeout=30, fold=True)")
        assert "fold=True" in reader_src

    def block(mode: str) -> dict[str, float]:
        nonlocal turn
        gc.collect()
        server = put_probe(pipe, mods["A" if mode == "none" else mode])
        io0, w0, p0 = thread_cpu(server), time.monotonic(), time.process_time()
        passes0 = server.wakeups
        reader = None
        filled: list[float] = []
        if mode != "none":
            reader = subprocess.Popen(
                [sys.executable, "-c", reader_src, str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
                cwd=str(REPO),
            )
            assert reader.stdout is not None
            os.set_blocking(reader.stdout.fileno(), False)
        rows: list[tuple[float, float]] = []
        give_up = w0 + args.max_fill
        while time.monotonic() < give_up:
            if reader is not None:
                assert reader.stdout is not None
                for line in reader.stdout.readlines():
                    got = line.split()
                    if got and got[0] == "FILLED":
                        filled.append(time.monotonic())
                if filled and all(s.snapshot_pending == 0 and s.buffered_bytes == 0 for s in server.stats()):
                    break
            elif len(rows) >= 100:
                break
            a, c = time.perf_counter(), time.thread_time()
            step(turn)
            rows.append((time.perf_counter() - a, time.thread_time() - c))
            turn += 1
            time.sleep(args.pace)
        wall = time.monotonic() - w0
        out = {
            "fill": (filled[0] - w0) if filled else float("nan"),
            "proc_per_s": (time.process_time() - p0) / wall,
            "io_per_s": (thread_cpu(server) - io0) / wall,
            "io": thread_cpu(server) - io0,
            "passes": server.wakeups - passes0,
            "turns": len(rows),
        }
        cpu = sorted(r[1] for r in rows)
        wl = sorted(r[0] for r in rows)
        out["cpu_med"], out["cpu_mean"], out["cpu_p99"], out["cpu_max"] = (
            statistics.median(cpu),
            statistics.fmean(cpu),
            cpu[int(0.99 * (len(cpu) - 1))],
            cpu[-1],
        )
        out["wall_med"], out["wall_p99"], out["wall_max"] = (
            statistics.median(wl),
            wl[int(0.99 * (len(wl) - 1))],
            wl[-1],
        )
        if reader is not None:
            assert reader.stdin is not None
            reader.stdin.write("\n")
            reader.stdin.flush()
            reader.wait(60)
        print(
            f"  {mode:4s} fill {out['fill']:6.1f} s, {out['turns']:4d} turns: process CPU {out['proc_per_s'] * 1e3:6.1f} ms/s "
            f"(probe thread {out['io_per_s'] * 1e3:6.1f} ms/s, {out['io']:.2f} s, {out['passes']} passes); agent thread a turn "
            f"med {out['cpu_med'] * 1e3:.2f} mean {out['cpu_mean'] * 1e3:.2f} p99 {out['cpu_p99'] * 1e3:.2f} max "
            f"{out['cpu_max'] * 1e3:.2f} ms CPU; wall med {out['wall_med'] * 1e3:.2f} p99 {out['wall_p99'] * 1e3:.2f} "
            f"max {out['wall_max'] * 1e3:.2f} ms",
            flush=True,
        )
        return out

    res: dict[str, list[dict[str, float]]] = {"A": [], "B": [], "none": []}
    for rnd in range(args.rounds):
        res["none"].append(block("none"))
        for mode in ("A", "B", "B", "A") if rnd % 2 == 0 else ("B", "A", "A", "B"):
            res[mode].append(block(mode))
    pipe.close()
    shutil.rmtree(tmp, ignore_errors=True)

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in res[mode])

    print(
        f"medians over blocks (A: {args.base}, B: this tree; {args.history} turns of history, pace {args.pace} s):"
    )
    for key, label, scale, unit in (
        ("fill", "fill time", 1, "s"),
        ("proc_per_s", "agent process CPU during the fill", 1e3, "ms/s"),
        ("io_per_s", "probe thread CPU during the fill", 1e3, "ms/s"),
        ("cpu_med", "agent thread CPU a turn, median", 1e3, "ms"),
        ("cpu_mean", "agent thread CPU a turn, mean", 1e3, "ms"),
        ("cpu_p99", "agent thread CPU a turn, p99", 1e3, "ms"),
        ("wall_med", "agent turn wall, median", 1e3, "ms"),
        ("wall_p99", "agent turn wall, p99", 1e3, "ms"),
    ):
        a, b, n = med("A", key), med("B", key), med("none", key)
        print(
            f"  {label:38s} A {a * scale:8.2f}  B {b * scale:8.2f} {unit:4s}  B/A {b / a if a else float('nan'):.3f}"
            f"   (none {n * scale:.2f})"
        )


if __name__ == "__main__":
    main()
