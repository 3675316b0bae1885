"""Inspector (TUI) benchmarks, on real recordings through the real FileSource path.

  (a) what-if re-plan of one turn of pydicom-1413 (FileSource.replan with a budget override), p50/p95
      over ~50 budgets, beside json.dumps of the same request as a baseline;
  (b) the app's first frame for a 10,000-turn recording (App start -> first TurnsReceived handled and
      the current turn drawn), with app.run_test();
  (c) peak RSS and tracemalloc peak of the inspector process for that recording;
  (d) per-step UI time: main-thread CPU of one Right key press until the screen is idle, minus the
      same for an unbound key (Pilot's own cost), at 120x40.

The 10,000-turn recording is made once by driving engine.Pipeline with a synthetic agent loop
(record=...) and cached in the temp dir (it takes minutes: the engine's per-turn cost grows with
history). Run (b)-(d) in a fresh process each: `--only` picks one.

    .venv/bin/python benchmarks/bench_tui.py [--turns 10000] [--recording PATH] [--only a|b|c|d]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PYDICOM = Path("/work/shared/trajectories/mini-swe-agent-pr816/deepseek_chat_dev__pydicom__pydicom-1413.traj.json")
GEN_VERSION = 1


def make_long_recording(path: Path, turns: int) -> None:
    """A synthetic coding-agent loop through the real engine, recorded: one tool call per turn, tool
    outputs of varying size, usage from the provider cache simulator."""
    from engine.cachesim import Block, CacheSimulator, Call
    from engine.pipeline import Pipeline

    fake = [1_767_225_600.0]

    def clock() -> float:
        return fake[0]

    tmp = path.with_suffix(".partial")
    tmp.unlink(missing_ok=True)
    pipe = Pipeline("claude-sonnet-4", "anthropic", 16000, record=tmp, clock=clock)
    pipe.identity("You are a synthetic benchmark agent.")
    pipe.goal("Walk a long session.")
    pipe.add_tool("read", "read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
    pipe.user("Start.")
    sim = CacheSimulator("anthropic", "claude-sonnet-4")
    for t in range(turns):
        ser = pipe.next_request().serialized
        blocks = tuple(Block(b.sha, b.tokens, b.marker, "5m", b.segment) for b in ser.blocks)
        cc = sim.step(Call(blocks, clock(), "claude-sonnet-4", output_tokens=50))
        pipe.record_usage({"input_tokens": cc.input_tokens, "output_tokens": 50,
                           "cache_read_tokens": cc.cache_read, "cache_write_tokens": cc.cache_write})
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "read",
                                              "arguments": json.dumps({"path": f"f{t % 50}.py"})}])
        body = f"contents of f{t % 50}.py at turn {t}\n" + (f"line {t}\n" * (20 + t % 30))
        pipe.tool_result(calls[0].id, body)
        fake[0] += 5
        if t % 1000 == 0:
            print(f"  generating: turn {t}/{turns}", file=sys.stderr, flush=True)
    pipe.close()
    tmp.rename(path)


def long_recording(turns: int, given: str | None) -> Path:
    if given:
        return Path(given)
    path = Path(tempfile.gettempdir()) / f"cp-bench-tui-{turns}-v{GEN_VERSION}.cpsession"
    if not path.exists():
        print(f"making {path} ({turns} turns, once)…", file=sys.stderr)
        make_long_recording(path, turns)
    return path


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


# ------------------------------------------------------------------------------------------ (a)


def bench_replan(n: int = 50) -> dict[str, float]:
    from inspector.source import Overrides
    from inspector.sources import FileSource

    rec = Path(tempfile.gettempdir()) / "cp-bench-tui-pydicom-1413.cpsession"
    subprocess.run([sys.executable, "-m", "inspector.cli", "import", "auto", str(PYDICOM), "-o", str(rec)],
                   check=True, capture_output=True, cwd=ROOT)
    src = FileSource(rec)
    traces = src.load_initial()
    turn = traces[-1]["turn"]
    src.replan(turn, Overrides(budget=64000))  # warm: events loaded, tokenizer cache filled
    replan, dumps = [], []
    for i in range(n):
        budget = 16000 + i * 2000
        t0 = time.perf_counter()
        src.replan(turn, Overrides(budget=budget))
        replan.append(time.perf_counter() - t0)
        body = src._built(turn).serialized.json()
        t0 = time.perf_counter()
        json.dumps(body)
        dumps.append(time.perf_counter() - t0)
    return {"turns": len(traces), "turn": turn, "replan_p50_ms": pct(replan, 50) * 1e3,
            "replan_p95_ms": pct(replan, 95) * 1e3, "dumps_p95_ms": pct(dumps, 95) * 1e3,
            "ratio": pct(replan, 95) / max(1e-9, pct(dumps, 95))}


# ------------------------------------------------------------------------------------------ (b)-(d)


async def _app_run(path: Path, steps: int) -> dict[str, float]:
    from inspector.app import InspectorApp
    from inspector.messages import TurnsReceived
    from inspector.sources import FileSource

    t0 = time.perf_counter()
    src = FileSource(path)
    app = InspectorApp(src)
    first: dict[str, float] = {}

    def hook(message: object) -> None:
        if isinstance(message, TurnsReceived) and "received" not in first:
            first["received"] = time.perf_counter() - t0

    out: dict[str, float] = {}
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        while app.index < 0:
            await asyncio.sleep(0.001)
        drawn = asyncio.get_running_loop().create_future()
        app.call_after_refresh(lambda: drawn.done() or drawn.set_result(time.perf_counter() - t0))
        out["first_frame_s"] = await drawn  # the first screen with data has been drawn
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


def bench_app(path: Path, steps: int, trace_memory: bool) -> dict[str, float]:
    """RSS is only meaningful without tracemalloc (it adds its own bookkeeping): part (b) reports it."""
    if trace_memory:
        tracemalloc.start()
    out = asyncio.run(_app_run(path, steps))
    if trace_memory:
        out["tracemalloc_peak_mb"] = tracemalloc.get_traced_memory()[1] / 1e6
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run_child(part: str, args: argparse.Namespace) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--only", part, "--turns", str(args.turns), "--json"]
    if args.recording:
        cmd += ["--recording", args.recording]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--recording", default=None, help="use this recording instead of the generated one")
    ap.add_argument("--only", choices=["a", "b", "c", "d"], default=None)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.only:
        if args.only == "a":
            res = bench_replan()
        else:
            path = long_recording(args.turns, args.recording)
            res = bench_app(path, args.steps if args.only == "d" else 0, trace_memory=args.only == "c")
        print(json.dumps(res))
        return
    path = long_recording(args.turns, args.recording)  # made here, so no child pays for it
    args.recording = str(path)
    a, b, c, d = (run_child(p, args) for p in "abcd")
    rows = [
        ("(a) what-if re-plan, pydicom-1413 last turn, p95", f"{a['replan_p95_ms']:.2f} ms", "< 50 ms",
         f"p50 {a['replan_p50_ms']:.2f} ms; json.dumps of the request p95 {a['dumps_p95_ms']:.2f} ms "
         f"(ratio {a['ratio']:.1f}x)"),
        (f"(b) first frame, {b['turns']:,}-turn recording", f"{b['first_frame_s']:.3f} s", "< 1 s",
         f"first TurnsReceived {b['first_message_s']:.3f} s; all turns in {b['all_turns_s']:.3f} s"),
        ("(c) inspector memory, same recording", f"{b['peak_rss_mb']:.0f} MB RSS", "< 300 MB",
         f"peak RSS incl. opening the last turn's content; tracemalloc peak {c['tracemalloc_peak_mb']:.0f} MB"),
        ("(d) one step (Right), UI-thread CPU, 120x40", f"{d['step_p50_ms']:.1f} ms p50",
         "well < 50 ms", f"p95 {d['step_p95_ms']:.1f} ms; Pilot's own {d['pilot_ms']:.1f} ms subtracted"),
        ("    content of the last turn (worker)", f"{b['content_last_turn_s'] * 1e3:.0f} ms", "",
         "first open: read the journal, fold it, build the turn"),
    ]
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"{'benchmark':<{w[0]}}  {'result':>{w[1]}}  {'target':<{w[2]}}  notes")
    for r in rows:
        print(f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:<{w[2]}}  {r[3]}")


if __name__ == "__main__":
    main()
