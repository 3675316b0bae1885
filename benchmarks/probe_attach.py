"""bench_probe --follow-latency and --attach-long, the inspector's side: when its live source sees a paced
agent's turns and what it costs while the agent idles; an inspector attaching to an agent with a long
history."""

from __future__ import annotations

import argparse
import gc
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probe_agents import REPO, drain, fresh_pipeline, read_line, run_block, thread_cpu, wait_for

# The inspector's live source following an agent (as `cp-inspect attach` does), in its own process:
# it prints each new turn with the monotonic clock (one clock for the whole machine) when follow()
# handed it over, and its own CPU seconds when asked (a line on stdin).
LIVE_READER = """
import sys, threading, time
from inspector.sources import NewTurn
from inspector.sources.live import LiveSource
how = sys.argv[2] if len(sys.argv) > 2 else "live"
if how == "follow":  # `cp-inspect attach`'s source on a recording agent: it reads the recording
    from inspector.sources.live_recording import RecordingFollower, open_live
    src, why = open_live(int(sys.argv[1]), timeout=10)
    assert isinstance(src, RecordingFollower), why
else:  # the elided stream (live), or the fold stream `cp-inspect attach` reads of an agent that does not record
    src = LiveSource(int(sys.argv[1]), timeout=10, fold=how == "fold")
print("ATTACHED", flush=True)
def cpu():
    for line in sys.stdin:
        print("CPU", time.process_time(), flush=True)
threading.Thread(target=cpu, daemon=True).start()
for ev in src.follow():
    if isinstance(ev, NewTurn):
        print("TURN", ev.trace["turn"], time.monotonic(), flush=True)
"""


def follow_latency(args: argparse.Namespace) -> None:
    """The inspector's side of a paced agent (issue 15 item 4): how long after the agent's next_request
    returns (its turn event sent) the live source hands the turn to the app, and what the inspector's
    process spends, per turn while the agent works and per minute while it is idle. Readers: this tree's
    LiveSource (it polls: engine.probe.poll) and, with --reader-tree, another tree's (a base's, which
    waits on the socket), one Pipeline per round, blocks A B B A; turns spaced by --follow-latency
    seconds times a random factor in [0.5, 1.5] (so a turn lands anywhere in the reader's interval),
    then --idle seconds of no turns at all. Also the agent's thread inside the Pipeline's flushes."""
    import random

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    # Reader name -> (its tree, how it reads: LIVE_READER's argument).
    readers = {f"this-{how}" if how != "live" else "this": (str(REPO), how) for how in args.latency_readers.split(",")}
    if args.reader_tree:
        readers["other"] = (args.reader_tree, "live")
    trees = {k: v[0] for k, v in readers.items()}
    rng = random.Random(15)
    lat: dict[str, list[float]] = {k: [] for k in trees}
    busy: dict[str, list[float]] = {k: [] for k in trees}  # reader CPU a turn
    idle: dict[str, list[float]] = {k: [] for k in trees}  # reader CPU a minute, idle agent
    inflush: dict[str, list[float]] = {k: [] for k in trees}
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        flush_cpu = [0.0]
        flush = server.flush

        def timed_flush(flush: Callable[[], None] = flush, flush_cpu: list[float] = flush_cpu) -> None:
            t0 = time.thread_time()
            flush()
            flush_cpu[0] += time.thread_time() - t0

        server.flush = timed_flush  # type: ignore[method-assign]
        sent: dict[int, float] = {}
        next_request = pipe.next_request

        def timed_request(next_request: Callable[[], Any] = next_request, sent: dict[int, float] = sent) -> Any:
            req = next_request()
            sent[int(req.trace["turn"])] = time.monotonic()
            return req

        pipe.next_request = timed_request
        run_block(step, 0, args.warmup)
        turn = args.warmup
        order = list(trees) if rnd % 2 == 0 else list(reversed(trees))
        for name in order + list(reversed(order)):
            how = readers[name][1]
            reader = subprocess.Popen(
                [sys.executable, "-c", LIVE_READER, str(os.getpid())] + ([how] if how != "live" else []),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": trees[name]},
                cwd=trees[name],  # (`-c` puts the working directory first on sys.path)
            )
            assert reader.stdin is not None
            assert read_line(reader, server) == "ATTACHED"
            if how == "follow":
                wait_for(lambda server=server: server._nfollowers == 1)  # type: ignore[misc]
            else:
                wait_for(lambda server=server: server.client_count == 1)  # type: ignore[misc]
            drain(server)
            time.sleep(1.5)  # its snapshot read, and the backfill a quiet agent brings about
            got: dict[int, float] = {}

            def reader_cpu(reader: subprocess.Popen[str] = reader, got: dict[int, float] = got) -> float:
                assert reader.stdin is not None
                reader.stdin.write("cpu\n")
                reader.stdin.flush()
                assert reader.stdout is not None
                while True:
                    # readline() alone: several lines may be in the pipe's buffer already, where a
                    # select() on the descriptor would not see them.
                    line = reader.stdout.readline().split()
                    if line[0] == "CPU":
                        return float(line[1])
                    got[int(line[1])] = float(line[2])

            c0, f0 = reader_cpu(), flush_cpu[0]
            first = turn
            for t in range(turn, turn + args.turns):
                step(t)
                time.sleep(args.pace * rng.uniform(0.5, 1.5))
            c1 = reader_cpu()
            time.sleep(args.idle)
            c2 = reader_cpu()
            inflush[name].append((flush_cpu[0] - f0) / args.turns)
            turn += args.turns
            busy[name].append((c1 - c0) / args.turns)
            idle[name].append((c2 - c1) / args.idle * 60)
            for tr, at in got.items():
                if tr in sent and tr >= first:
                    lat[name].append(at - sent[tr])
            reader.terminate()
            reader.wait(60)
            wait_for(lambda server=server: server.client_count == 0 and server._nfollowers == 0, 60)  # type: ignore[misc]
        pipe.close()
    med = statistics.median
    for name in trees:
        xs = sorted(lat[name])
        p95 = xs[min(len(xs) - 1, int(0.95 * len(xs)))] if xs else float("nan")
        print(
            f"reader {name:5s} ({trees[name]}): turn seen {med(xs) * 1e3:5.1f} ms p50, {p95 * 1e3:5.1f} ms p95, "
            f"{xs[-1] * 1e3:5.1f} ms max after next_request returned ({len(xs)} turns); its CPU "
            f"{med(busy[name]) * 1e6:6.0f} us a turn, idle {med(idle[name]) * 1e3:6.1f} ms a minute "
            f"[{' '.join(f'{x * 1e3:.0f}' for x in idle[name])}]; agent thread in flush() "
            f"{med(inflush[name]) * 1e6:5.1f} us a turn"
        )
    print(
        f"  ({args.rounds} rounds of {2 * len(trees)} x {args.turns} turns, spaced {args.pace:g} s x [0.5, 1.5], "
        f"then {args.idle:g} s idle)"
    )
    shutil.rmtree(rt.parent, ignore_errors=True)


# The inspector's live source attaching to a long-running agent (as `cp-inspect attach` does), in its own
# process: it prints when its first frame's data is in (the constructor read the hello and what it reads
# before showing anything; load_initial gives the turns the app draws first), with the newest turn there.
FIRST_READER = """
import sys, threading, time
t0 = time.monotonic()
from inspector.sources import HistoryFilled
from inspector.sources.live import LiveSource
src = LiveSource(int(sys.argv[1]), timeout=30)
initial = src.load_initial()
newest = max((t.get("turn", -1) for t in initial), default=-1)
print("FIRST", time.monotonic(), newest, len(initial), t0, flush=True)
def follow():
    filled = src._history_told  # (a tree without the tail: its history came before the first frame)
    if filled:
        print("FILLED", time.monotonic(), flush=True)
    for ev in src.follow():
        if isinstance(ev, HistoryFilled) and not filled:
            filled = True
            print("FILLED", time.monotonic(), flush=True)
threading.Thread(target=follow, daemon=True).start()
for line in sys.stdin:
    break
"""


# The inspector itself (the app on the live source, headless at 120x40, as `cp-inspect attach` runs it):
# from its process's spawn (SPAWNED_AT, wall clock) to its first complete frame, and the turn it shows.
APP_READER = """
import asyncio, os, sys, time
from inspector.app import InspectorApp
from inspector.sources.live import LiveSource
app = InspectorApp(LiveSource(int(sys.argv[1]), timeout=30))
async def main():
    async with app.run_test(size=(120, 40)):
        while not (app.index >= 0 and len(app.view.timeline)):
            await asyncio.sleep(0.001)
        drawn = asyncio.get_running_loop().create_future()
        app.call_after_refresh(lambda: drawn.done() or drawn.set_result(time.time()))
        at = await drawn
        print("APP", at - float(sys.argv[2]), app.view.timeline.traces[app.index]["turn"], len(app.view.timeline), flush=True)
        os._exit(0)
asyncio.run(main())
"""


# 50 attach/detach cycles in one process: connect (the elided stream, as the inspector asks), read the
# hello and a few events, close.
CHURN_READER = """
import sys
from pathlib import Path
from engine.probe.client import ProbeClient
for _ in range(int(sys.argv[3])):
    c = ProbeClient.connect(int(sys.argv[1]), timeout=30, runtime_dir=Path(sys.argv[2]), lean=True, elide=True, poll=True)
    for _ in range(5):
        if c.recv(0.05) is None:
            break
    c.close()
print("DONE", flush=True)
"""


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def attach_long(args: argparse.Namespace) -> None:
    """A long-running agent (--attach-long N turns of history) that an inspector attaches to: one Pipeline
    (1-2 ms turns; --pace seconds of model call after each), N turns built first, unpaced. Then rounds of
    blocks none, attach, attach, none (ABBA): an attach block starts the inspector's live source in its own
    process (FIRST_READER) and runs paced turns until that source has its first frame and the probe has
    sent all it owes it (at least --turns); a none block runs as many turns with nobody attaching. Per
    block, each turn's wall and agent-thread CPU (max, p99, median), the probe thread's CPU, and the time
    from the reader's process start to its first frame (and the newest turn in it). Then the agent's RSS
    added by an attach, by --churn attach/detach cycles, and what a reader stopped (SIGSTOP) during its
    snapshot costs the agent (its turns and RSS over --turns paced turns)."""

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    server, step, pipe = fresh_pipeline(args, rt, 0)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    for t in range(args.attach_long):
        step(t)
    turn = args.attach_long
    print(
        f"history: {args.attach_long} turns built in {time.perf_counter() - t0:.1f} s; journal "
        f"{len(pipe.journal.events)} events ({len(getattr(pipe.journal.events, '_starts', ()))} spilled chunks); "
        f"agent RSS {rss_kb() / 1024:.0f} MB"
    )

    def paced(n: int, until: Callable[[], bool] | None = None) -> list[tuple[float, float]]:
        """n paced turns, and more until `until()` (for 600 s at most)."""
        out: list[tuple[float, float]] = []
        t = 0
        give_up = time.monotonic() + 600
        while t < n or (until is not None and not until() and time.monotonic() < give_up):
            w0, c0 = time.perf_counter(), time.thread_time()
            step(turn + len(out))
            out.append((time.perf_counter() - w0, time.thread_time() - c0))
            t += 1
            time.sleep(args.pace)
        return out

    def summary(rows: list[tuple[float, float]]) -> str:
        wall = sorted(r[0] for r in rows)
        cpu_ = sorted(r[1] for r in rows)
        p99 = lambda xs: xs[min(len(xs) - 1, int(0.99 * len(xs)))]  # noqa: E731
        return (
            f"wall max {wall[-1] * 1e3:6.2f} p99 {p99(wall) * 1e3:6.2f} med {statistics.median(wall) * 1e3:5.2f} ms; "
            f"thread CPU max {cpu_[-1] * 1e3:6.2f} p99 {p99(cpu_) * 1e3:6.2f} med {statistics.median(cpu_) * 1e3:5.2f} ms"
        )

    run_block(step, turn, 20)
    turn += 20
    blocks: dict[str, list[list[tuple[float, float]]]] = {"none": [], "attach": []}
    firsts: list[float] = []
    fills: list[float] = []  # to the whole history in the reader (the snapshot's, or fetched after the first frame)
    io: dict[str, float] = {"none": 0.0, "attach": 0.0}
    rss0 = rss_kb()
    for rnd in range(args.rounds):
        for mode in ("none", "attach", "attach", "none") if rnd % 2 == 0 else ("attach", "none", "none", "attach"):
            gc.collect()
            io0 = thread_cpu(server)
            if mode == "none":
                n = max(args.turns, max((len(b) for b in blocks["attach"]), default=args.turns))
                rows = paced(n)
            else:
                reader = subprocess.Popen(
                    [sys.executable, "-c", FIRST_READER, str(os.getpid())],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
                )
                started = time.monotonic()
                line: list[str] = []
                filled: list[str] = []
                assert reader.stdout is not None
                os.set_blocking(reader.stdout.fileno(), False)

                def done(
                    reader: subprocess.Popen[str] = reader, line: list[str] = line, filled: list[str] = filled
                ) -> bool:
                    assert reader.stdout is not None
                    while not filled:
                        got = reader.stdout.readline().split()
                        if not got:
                            break
                        (line if got[0] == "FIRST" else filled).extend(got)
                    return bool(filled) and all(s.snapshot_pending == 0 and s.buffered_bytes == 0 for s in server.stats())

                rows = paced(args.turns, done)
                fields = line
                first = float(fields[1]) - started if fields else float("nan")
                firsts.append(first)
                fills.append(float(filled[1]) - started if filled else float("nan"))
                print(f"  attach: first frame {first:.2f} s after the reader's start (newest turn {fields[2] if fields else '?'} "
                      f"of {turn + len(rows) - 1}, {fields[3] if fields else '?'} turns in it; python start to import "
                      f"{float(fields[4]) - started if fields else float('nan'):.2f} s)")
                assert reader.stdin is not None
                reader.stdin.write("\n")
                reader.stdin.flush()
                reader.wait(60)
                wait_for(lambda: server.client_count == 0, 60)
            io[mode] += thread_cpu(server) - io0
            turn += len(rows)
            blocks[mode].append(rows)
            print(f"  {mode:6s} {len(rows):4d} turns: {summary(rows)}; probe thread {(thread_cpu(server) - io0) * 1e3:.1f} ms")
    for mode in ("none", "attach"):
        rows = [r for b in blocks[mode] for r in b]
        print(f"{mode:6s} all {len(rows)} turns: {summary(rows)}; probe thread {io[mode] * 1e3:.0f} ms in all")
    if firsts:
        print(
            f"first frame: {' '.join(f'{x:.2f}' for x in firsts)} s (median {statistics.median(firsts):.2f}); "
            f"whole history in the reader: {' '.join(f'{x:.2f}' for x in fills)} s"
        )
    # The inspector's own first frame (the app on the live source), once.
    app = subprocess.Popen(
        [sys.executable, "-c", APP_READER, str(os.getpid()), str(time.time())],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(REPO),
    )
    assert app.stdout is not None
    os.set_blocking(app.stdout.fileno(), False)
    got_app: list[str] = []

    def app_done() -> bool:
        assert app.stdout is not None
        got_app.extend(app.stdout.readline().split())
        return bool(got_app) or app.poll() is not None

    rows = paced(1, app_done)
    turn += len(rows)
    app.wait(60)
    wait_for(lambda: server.client_count == 0, 60)
    print(
        f"inspector app (headless 120x40): first complete frame {float(got_app[1]):.2f} s after its spawn, showing "
        f"turn {got_app[2]} of {turn - 1} ({got_app[3]} turns in its timeline); agent meanwhile: {summary(rows)}"
        if got_app
        else "inspector app: no first frame"
    )
    gc.collect()
    rss1 = rss_kb()
    churn = subprocess.Popen(
        [sys.executable, "-c", CHURN_READER, str(os.getpid()), str(rt), str(args.churn)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
    )
    rows = paced(args.turns, lambda: churn.poll() is not None)
    turn += len(rows)
    wait_for(lambda: server.client_count == 0, 60)
    gc.collect()
    rss2 = rss_kb()
    print(f"churn ({args.churn} attach/detach): {len(rows)} turns meanwhile: {summary(rows)}")
    print(f"agent RSS: {rss0 / 1024:.1f} MB before the attach blocks, {rss1 / 1024:.1f} after them "
          f"(+{(rss1 - rss0) / 1024:.1f}), {rss2 / 1024:.1f} after the churn (+{(rss2 - rss1) / 1024:.1f})")
    # A reader stopped while it attaches.
    reader = subprocess.Popen(
        [sys.executable, "-c", FIRST_READER, str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
    )
    wait_for(lambda: server.client_count == 1, 60)
    # Stopped while the agent still owes it most of its history (the snapshot, or the ranges it fetches
    # after its first frame).
    assert reader.stdout is not None
    select.select([reader.stdout], [], [], 0.3)
    reader.send_signal(signal.SIGSTOP)
    st = server.stats()
    rows = paced(max(args.turns, int(5 / max(args.pace, 0.01))))
    turn += len(rows)
    rss3 = rss_kb()
    st2 = server.stats()
    print(f"reader stopped (SIGSTOP) while attaching ({st[0].snapshot_pending if st else '?'} snapshot events to go, "
          f"{st2[0].snapshot_pending if st2 else '?'} after): {len(rows)} turns: {summary(rows)}; agent RSS "
          f"{rss3 / 1024:.1f} MB (+{(rss3 - rss2) / 1024:.1f}), client buffer {st2[0].buffered_bytes if st2 else '?'} B")
    reader.send_signal(signal.SIGCONT)
    reader.kill()
    reader.wait(60)
    pipe.close()
    print(f"  ({args.rounds} rounds of 4 blocks, >= {args.turns} turns each, {args.pace:g} s of model call after each turn; "
          f"window {args.window}; CPU figures: the agent's thread clock)")
    shutil.rmtree(rt.parent, ignore_errors=True)
