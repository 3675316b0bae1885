"""Inspector (TUI) benchmarks, on real recordings through the real FileSource path.

  (a) what-if re-plan of one turn of pydicom-1413 (FileSource.replan with a budget override), p50/p95
      over ~50 budgets, beside json.dumps of the same request as a baseline;
  (b) the app's first frame for a 10,000-turn recording, with app.run_test() at 120x40: read as the
      first complete screen (the current turn, the footer's keys laid out: startup_child.complete) is
      written (App._display), as bench_startup.py --only replay reads it. Wall from App start (after the
      imports) and from process start (the parent's spawn), CPU since process start (time.process_time:
      start-up, every import, the reader thread). Not quite bench_startup's replay figure: this child
      builds the app itself (no console script, no `replay` command line) but imports this script's
      own modules (subprocess, tracemalloc, argparse, statistics ...): CPU p50 945 ms here against 884
      for startup_child.py, 5 runs alternating, load 3.4 (2026-12-05). The project is
      byte-compiled first, as bench_startup does (compile_tree: under PYTHONDONTWRITEBYTECODE every child
      compiled every module from source, ~150 ms of CPU). Until session 36 it read the CPU a frame after
      the first complete one (an after-refresh callback, polled for at 1 ms), by when the reader thread
      was decoding the next chunk: 1.19 s against bench_startup's ~0.93 s (1.01 s compiled);
  (c) peak RSS and tracemalloc peak of the inspector process for that recording;
  (d) per-step UI time: main-thread CPU of one Right key press until the screen is idle, minus the
      same for an unbound key (Pilot's own cost), at 120x40;
  (e) (b) for a recording whose writer was killed (no index footer: opening rebuilds the index by
      scanning frame headers), /tmp/tui/g10k.cpsession by default;
  (f) one step as a person meets it on pydicom-1413 (Right until the frame showing the new turn's
      content has been written), UI-thread CPU as the app records it itself (CONTEXTPIPE_STEP_TIMING,
      inspector/step_timing.py), at 120x40 and 200x60, with the Tools section shown and with History
      shown; a step that does not show its content within STEP_DEADLINE_S, or whose content worker
      fails, stops the run saying what was on screen;
  (g) the first what-if re-plan after opening a turn in the app, and the later ones;
      `--recording FILE` steps through that recording instead, from `--start` (a fraction of it);
      (g) takes `--recording` too, and `--provider` for what-ifs at another provider than the session's;
  (h) (f) from the real program: `cp-inspect replay` in a detached tmux session of each size, driven by
      `tmux send-keys Right`, read from the same records (not part of the default run: needs tmux).

The 10,000-turn recording is made once by driving engine.Pipeline with a synthetic agent loop
(record=...) and cached in the temp dir. From scratch that took 21 s of CPU on 2026-12-01 (engine at
8965843; about an hour before the engine's turn stopped growing with the history); a killed run, or
`--seed` (a shorter recording of the same generator), is resumed from its last turn, and the result is
identical to an uninterrupted run. Each part runs in a fresh process: `--only` picks one.
The recordings are made in tui_recordings.py, (f) and (h) are in tui_steps.py; this script holds the other
parts and the table.

    .venv/bin/python benchmarks/bench_tui.py [--turns 10000] [--recording PATH] [--seed PATH]
                                             [--footerless PATH] [--only a|b|c|d|e|f|g|h]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

STARTED = time.time()  # (b) run by hand: wall from here (a parent passes its spawn time instead)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tui_recordings import long_recording, pydicom_recording  # noqa: E402
from tui_steps import STEP_DEADLINE_S, ContentWatch, bench_steps, bench_steps_tmux, pct  # noqa: E402


def bench_replan(n: int = 50) -> dict[str, float]:
    from engine.whatif import Overrides
    from inspector.sources.file import FileSource

    src = FileSource(pydicom_recording())
    traces = src.load_initial()
    turn = traces[-1]["turn"]
    src.replan(turn, Overrides(window=64000))  # warm: events loaded, tokenizer cache filled
    replan, dumps, replan_cpu, dumps_cpu = [], [], [], []
    for i in range(n):  # interleaved: each re-plan is followed by the baseline on the same request
        budget = 16000 + i * 2000
        c0, t0 = time.process_time(), time.perf_counter()
        src.replan(turn, Overrides(window=budget))
        replan.append(time.perf_counter() - t0)
        replan_cpu.append(time.process_time() - c0)
        body = src._built(turn).serialized.json()
        c0, t0 = time.process_time(), time.perf_counter()
        json.dumps(body)
        dumps.append(time.perf_counter() - t0)
        dumps_cpu.append(time.process_time() - c0)
    return {"turns": len(traces), "turn": turn, "replan_p50_ms": pct(replan, 50) * 1e3,
            "replan_p95_ms": pct(replan, 95) * 1e3, "dumps_p95_ms": pct(dumps, 95) * 1e3,
            "replan_cpu_p95_ms": pct(replan_cpu, 95) * 1e3, "dumps_cpu_p95_ms": pct(dumps_cpu, 95) * 1e3,
            "ratio": pct(replan, 95) / max(1e-9, pct(dumps, 95))}


# ------------------------------------------------------------------------------------------ (b)-(d)


async def _app_run(path: Path, steps: int, spawned_at: float) -> dict[str, float]:
    from startup_child import complete  # the first complete screen, as bench_startup's replay child reads it

    from inspector.app import InspectorApp
    from inspector.messages import TurnsReceived
    from inspector.sources.file import FileSource

    t0 = time.perf_counter()
    src = FileSource(path)  # a footer-less file (killed writer) rebuilds its index here
    opened = time.perf_counter() - t0
    app = InspectorApp(src)
    first: dict[str, float] = {}

    def hook(message: object) -> None:
        if isinstance(message, TurnsReceived) and "received" not in first:
            first["received"] = time.perf_counter() - t0

    # The first turns in hand: a recording's first chunk is read as the app mounts (SourceReader.start,
    # since session 37) and only the rest comes as TurnsReceived messages; an older tree's comes as one.
    start_reader = app.reader.start

    def started() -> Any:
        chunk = start_reader()
        if chunk is not None and "received" not in first:
            first["received"] = time.perf_counter() - t0
        return chunk

    app.reader.start = started  # type: ignore[method-assign]

    out: dict[str, float] = {"open_s": opened, "footer": float(src.reader.finished)}
    drawn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    display = app._display  # where a screen update goes to the terminal (headless: nowhere)

    def displayed(screen: Any, update: Any) -> None:
        display(screen, update)
        # Read in the same call as the first complete screen is written (as startup_child.py does): the
        # reader thread goes on to the next chunk once this frame is drawn, and a later read counted it.
        if update is not None and not drawn.done() and complete(app):
            out["first_frame_cpu_s"] = time.process_time()  # since process start (imports included)
            out["first_frame_s"] = time.perf_counter() - t0
            out["first_frame_from_spawn_s"] = time.time() - spawned_at
            drawn.set_result(None)

    app._display = displayed  # type: ignore[method-assign,assignment]
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        await drawn
        out["first_message_s"] = first.get("received", float("nan"))
        while len(app.timeline) < src.reader.turn_count:
            await pilot.pause(0.05)
        out["all_turns_s"] = time.perf_counter() - t0
        out["turns"] = len(app.timeline)
        if steps:
            await pilot.pause(0.5)
            await app.workers.wait_for_complete()
            app.action_first()
            await pilot.pause(0.3)
            cpu: dict[str, list[float]] = {"x": [], "right": []}
            for key in ("x", "right"):
                for _ in range(steps):
                    c = time.thread_time()
                    await pilot.press(key)
                    await pilot.pause()
                    cpu[key].append(time.thread_time() - c)
                    await pilot.pause(0.05)  # let the content worker finish outside the measurement
            base = statistics.median(cpu["x"])
            out["step_p50_ms"] = (statistics.median(cpu["right"]) - base) * 1e3
            out["step_p95_ms"] = (pct(cpu["right"], 95) - base) * 1e3
            out["pilot_ms"] = base * 1e3
        # what a person does next: look at the content of a late turn (the replayer folds the journal)
        t1 = time.perf_counter()
        await asyncio.to_thread(src.section_content, src.reader.turn_numbers()[-1], "history")
        out["content_last_turn_s"] = time.perf_counter() - t1
    return out


async def _whatif_run(path: Path, turns: int, repeats: int, provider: str | None = None) -> dict[str, float]:
    """(g) What-if as a person meets it: step to a turn, wait until its content is shown (the app
    prepares that turn's fold state in the content worker while the person looks), then re-plan it
    under a new budget through the app's what-if runner, as the slider does. The first re-plan of each
    opened turn is timed apart from the later ones. Time = process CPU (the worker does the work) and
    wall, from the request to the ReplanFinished message being handled on the UI thread. The What-if tab
    is shown (`w`) first, as it is when the person moves its slider. `provider`: the
    re-plans at that provider (each opened turn's first one is the first at it there)."""
    from engine.whatif import Overrides
    from inspector.app import InspectorApp
    from inspector.messages import ReplanFinished
    from inspector.sources.file import FileSource

    done: list[float] = []
    finished = asyncio.Event()

    watch: ContentWatch | None = None

    def hook(message: object) -> None:
        if isinstance(message, ReplanFinished):
            done.append(time.perf_counter())
            finished.set()
        if watch is not None:
            watch.hook(message)

    app = InspectorApp(FileSource(path))
    first_cpu: list[float] = []
    first_wall: list[float] = []
    later_cpu: list[float] = []
    later_wall: list[float] = []
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        while app.index < 0 or app.view.loading:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        # The slider is on the What-if tab: the person shows it (`w`) before the first move, and the app
        # loads the tokenizer then (WhatIfRunner.warm), as it would for them.
        await pilot.press("w")
        watch = ContentWatch(app)
        stride = max(1, len(app.timeline) // (turns + 1))
        for k in range(turns):
            app.timeline.go(min(app.timeline.last, 1 + k * stride))
            app.index = app.timeline.current
            turn = app.timeline.traces[app.index]["turn"]
            # The title alone does not say the content worker is done (a section whose text did not
            # change is retitled at once): wait for the turn's text and the worker too, or its fold of
            # the turn runs into the re-plans timed below (process CPU) instead of before them.
            want, opened = watch.expected(), time.perf_counter()
            while not watch.shown(want):
                if time.perf_counter() - opened > STEP_DEADLINE_S:
                    raise watch.timeout(want, time.perf_counter() - opened)
                await pilot.pause(0.01)
            await pilot.pause(0.2)
            for r in range(repeats + 1):
                finished.clear()
                c, w = time.process_time(), time.perf_counter()
                app.whatif.replan(app.index, turn, Overrides(window=12_000 + 1_000 * (r + k), provider=provider))
                # Wait on the message, not by polling: Pilot's 1 ms polls cost UI CPU in proportion
                # to the wall time, so under load they inflated the process CPU timed here.
                await asyncio.wait_for(finished.wait(), 60)
                cpu, wall = time.process_time() - c, done[-1] - w
                (first_cpu if r == 0 else later_cpu).append(cpu)
                (first_wall if r == 0 else later_wall).append(wall)
    return {"turns": float(turns), "first_cpu_p50_ms": pct(first_cpu, 50) * 1e3,
            "first_cpu_max_ms": max(first_cpu) * 1e3, "first_wall_p50_ms": pct(first_wall, 50) * 1e3,
            "first_wall_max_ms": max(first_wall) * 1e3, "later_cpu_p95_ms": pct(later_cpu, 95) * 1e3,
            "later_wall_p95_ms": pct(later_wall, 95) * 1e3}


def bench_whatif(
    turns: int = 8, repeats: int = 10, recording: str | None = None, provider: str | None = None
) -> dict[str, float]:
    """(g) on pydicom-1413, or on `recording`; at the session's provider, or at `provider`."""
    rec = Path(recording) if recording else pydicom_recording()
    return asyncio.run(_whatif_run(rec, turns, repeats, provider))


def bench_app(path: Path, steps: int, trace_memory: bool, spawned_at: float) -> dict[str, float]:
    """RSS is only meaningful without tracemalloc (it adds its own bookkeeping): part (b) reports it."""
    if trace_memory:
        tracemalloc.start()
    out = asyncio.run(_app_run(path, steps, spawned_at))
    if trace_memory:
        current, peak = tracemalloc.get_traced_memory()
        out["tracemalloc_peak_mb"], out["tracemalloc_end_mb"] = peak / 1e6, current / 1e6
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run_child(part: str, args: argparse.Namespace, recording: str | None = None) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--only", part, "--turns", str(args.turns), "--json",
           "--steps", str(args.steps), "--spawned-at", repr(time.time())]
    if recording or args.recording:
        cmd += ["--recording", recording or args.recording]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    sys.stderr.write(done.stderr)  # progress, and why a part failed
    if done.returncode:
        raise SystemExit(f"part ({part}) failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--recording", default=None, help="use this recording instead of the generated one")
    ap.add_argument("--only", choices=["a", "b", "c", "d", "e", "f", "g", "h"], default=None)
    ap.add_argument("--seed", default=None,
                    help="a shorter (or killed) recording of this generator to resume from when making the long one")
    ap.add_argument("--footerless", default="/tmp/tui/g10k.cpsession",
                    help="(e): a recording whose writer was killed (no index footer); skipped if missing")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--start", type=float, default=0.0,
                    help="(f): where the steps begin, a fraction of the recording (0 = its first turn)")
    ap.add_argument(
        "--provider", default=None, help="(g): re-plan at this provider (openai, bedrock, prefix, anthropic)"
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--spawned-at", type=float, default=None,
                    help="(b): the parent's time.time() at spawn, for wall time from process start")
    args = ap.parse_args()
    if args.spawned_at is None and args.only in (None, "b", "c", "d", "e"):
        # As installed (and as bench_startup times it): the children import byte-compiled modules. Done
        # once, by the parent (or by a child run by hand), so no timed child imports bench_startup.
        from bench_startup import compile_tree

        compiling = time.time()
        compile_tree(ROOT)
        global STARTED
        STARTED += time.time() - compiling  # run by hand: the compile is not the app's start-up
    if args.only:
        if args.only == "a":
            res = bench_replan()
        elif args.only == "f":
            rec = Path(args.recording) if args.recording else pydicom_recording()
            res = bench_steps(args.steps, rec, args.start)
        elif args.only == "g":
            res = bench_whatif(recording=args.recording, provider=args.provider)
        elif args.only == "h":
            res = bench_steps_tmux(args.steps, pydicom_recording())
        else:
            path = long_recording(args.turns, args.recording, args.seed)
            # Run by hand (no parent): wall from this script's start, not the process's (~30 ms later).
            spawned_at = args.spawned_at if args.spawned_at is not None else STARTED
            res = bench_app(path, args.steps if args.only == "d" else 0, args.only == "c", spawned_at)
        print(json.dumps(res))
        return
    path = long_recording(args.turns, args.recording, args.seed)  # made here, so no child pays for it
    args.recording = str(path)
    a, b, c, d, f, g = (run_child(p, args) for p in "abcdfg")
    e = run_child("b", args, args.footerless) if Path(args.footerless).exists() else None
    rows = [
        ("(a) what-if re-plan, pydicom-1413 last turn, p95", f"{a['replan_p95_ms']:.2f} ms", "< 50 ms",
         f"p50 {a['replan_p50_ms']:.2f} ms; CPU p95 {a['replan_cpu_p95_ms']:.2f} ms; json.dumps of the request "
         f"p95 {a['dumps_p95_ms']:.2f} ms (CPU {a['dumps_cpu_p95_ms']:.2f}; ratio {a['ratio']:.1f}x)"),
        (f"(b) first frame, {b['turns']:,}-turn recording", f"{b['first_frame_s']:.3f} s", "< 1 s",
         f"from App start; from process start: CPU {b['first_frame_cpu_s']:.3f} s, wall "
         f"{b['first_frame_from_spawn_s']:.3f} s (cf. bench_startup --only replay); first turns in hand {b['first_message_s']:.3f} s; all turns in {b['all_turns_s']:.3f} s"),
        ("(c) inspector memory, same recording", f"{b['peak_rss_mb']:.0f} MB RSS", "< 300 MB",
         f"peak RSS incl. opening the last turn's content; tracemalloc peak {c['tracemalloc_peak_mb']:.0f} MB"),
        ("(d) one step (Right), UI-thread CPU, 120x40", f"{d['step_p50_ms']:.1f} ms p50",
         "well < 50 ms", f"p95 {d['step_p95_ms']:.1f} ms; Pilot's own {d['pilot_ms']:.1f} ms subtracted"),
        ("(f) one step as a person meets it, UI CPU, 120x40 (app's own record, Pilot)", f"{f['120x40_cpu_p50_ms']:.1f} ms p50",
         "<= 16 ms p50, <= 33 ms p95", f"p95 {f['120x40_cpu_p95_ms']:.1f} ms; Right until the new turn's content is "
         f"shown; wall p50 {f['120x40_wall_p50_ms']:.0f} ms"),
        ("(f) the same at 200x60", f"{f['200x60_cpu_p50_ms']:.1f} ms p50", "<= 16 ms p50, <= 33 ms p95",
         f"p95 {f['200x60_cpu_p95_ms']:.1f} ms"),
        ("(f) with History shown (new text every step), 120x40", f"{f['history_120x40_cpu_p50_ms']:.1f} ms p50",
         "<= 16 ms p50, <= 33 ms p95", f"p95 {f['history_120x40_cpu_p95_ms']:.1f} ms"),
        ("(f) with History shown, 200x60", f"{f['history_200x60_cpu_p50_ms']:.1f} ms p50",
         "<= 16 ms p50, <= 33 ms p95", f"p95 {f['history_200x60_cpu_p95_ms']:.1f} ms"),
        ("(g) first what-if after opening a turn", f"{g['first_wall_p50_ms']:.0f} ms wall p50", "<= 50 ms",
         f"CPU p50 {g['first_cpu_p50_ms']:.1f} ms (max {g['first_cpu_max_ms']:.1f}); later re-plans CPU p95 "
         f"{g['later_cpu_p95_ms']:.1f} ms (< 10 ms), wall p95 {g['later_wall_p95_ms']:.0f} ms"),
        ("    content of the last turn (worker)", f"{b['content_last_turn_s'] * 1e3:.0f} ms", "",
         "first open: read the journal, fold it, build the turn"),
    ]
    if e is not None:
        rows.append((f"(e) open a footer-less {e['turns']:,}-turn recording", f"{e['first_frame_s']:.3f} s",
                     "< 1 s", f"index rebuilt by scanning in {e['open_s'] * 1e3:.0f} ms; all turns in "
                     f"{e['all_turns_s']:.3f} s; peak RSS {e['peak_rss_mb']:.0f} MB"))
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"{'benchmark':<{w[0]}}  {'result':>{w[1]}}  {'target':<{w[2]}}  notes")
    for r in rows:
        print(f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:<{w[2]}}  {r[3]}")


if __name__ == "__main__":
    main()
