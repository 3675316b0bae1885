"""An untraced agent's long session: what the journal's spills cost its thread (issue 15).

A turn nobody reads keeps its trace as a recipe (engine/trace_lazy.py). Past ~700 turns the bounded
journal (engine/recording/event_log.py, KEEP_DEFAULT events in memory) moves a chunk of events to disk
every ~40 turns. `built` is the old way, each unread turn built as it is written (the log's `refold`
unset); `unbuilt` writes the turn's marker and rebuilds it where something reads it
(engine/recording/turn_fold.py). Both run the same synthetic session (bench_engine's part 2 rounds:
assistant + tool_result + next_request + record_usage, the tool output made outside the timed region)
interleaved turn by turn in one process, each turn timed in thread CPU. Reported: mean CPU a turn
past turn 700 (where the spills are), the turns that spilled (their CPU and the burst over the median
turn), and what a reader then pays to read the whole journal (list(journal.events)), and a second
reader after it (the first one's rebuilds are written back to the journal's file).

    .venv/bin/python benchmarks/bench_spill_unbuilt.py [--turns 2000] [--window 128000] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))

import engine_long  # noqa: E402  (bench_engine's part 2 rounds)

from engine.pipeline import Pipeline  # noqa: E402


def _pipe(window: int, old: bool) -> Pipeline:
    p = Pipeline("deepseek-chat", "openai", window, serve=False, clock=lambda: 0.0)
    if old:
        p.journal.events.refold = None  # the spill builds each unread turn as it writes it
    p.identity("You are a careful coding agent.")
    p.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    p.user("Fix the failing test in tests/test_io.py.")
    return p


def run(turns: int, window: int) -> dict[str, Any]:
    sides = {"built": _pipe(window, True), "unbuilt": _pipe(window, False)}
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    spilled: dict[str, list[int]] = {k: [] for k in sides}  # turns during which the journal spilled
    gc.collect()
    for t in range(turns):
        output = engine_long.synthetic_output(t)
        for name in ("built", "unbuilt") if t % 2 else ("unbuilt", "built"):
            p = sides[name]
            before = p.journal.events.spilled_census()[0]
            c0 = time.thread_time()
            engine_long.synthetic_round(p, t, output)
            req = p.next_request()
            p.record_usage({"input_tokens": req.final_tokens, "output_tokens": 40})
            cpu[name].append(time.thread_time() - c0)
            if p.journal.events.spilled_census()[0] != before:
                spilled[name].append(t)
    out: dict[str, Any] = {"turns": turns, "window": window}
    for name, p in sides.items():
        xs = cpu[name]
        past = xs[700:]
        med = statistics.median(past)
        bursts = [xs[t] for t in spilled[name]]
        c0 = time.thread_time()
        n = sum(1 for _ in p.journal.events)
        read = time.thread_time() - c0
        c0 = time.thread_time()
        sum(1 for _ in p.journal.events)
        again = time.thread_time() - c0
        out[name] = {
            "mean_us_past_700": round(statistics.fmean(past) * 1e6, 1),
            "median_us_past_700": round(med * 1e6, 1),
            "spill_turns": len(bursts),
            "spill_turn_mean_us": round(statistics.fmean(bursts) * 1e6, 1) if bursts else 0.0,
            "spill_turn_max_us": round(max(bursts) * 1e6, 1) if bursts else 0.0,
            "burst_over_median_mean_us": round((statistics.fmean(bursts) - med) * 1e6, 1) if bursts else 0.0,
            "events": n,
            "on_disk": p.journal.events.spilled_census()[0],
            "read_all_ms": round(read * 1e3, 1),
            "read_again_ms": round(again * 1e3, 1),
        }
        p.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=2_000)
    ap.add_argument("--window", type=int, default=128_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.turns <= 700:
        ap.error(f"--turns must be > 700 (the journal spills past ~700 turns), got {args.turns}")
    out = run(args.turns, args.window)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"untraced agent, {args.turns} turns at {args.window}, thread CPU, interleaved turn by turn")
    for name in ("built", "unbuilt"):
        r = out[name]
        print(
            f"  {name:8} past turn 700: mean {r['mean_us_past_700']:8.1f} us  median {r['median_us_past_700']:8.1f} us"
            f" | {r['spill_turns']:3} spill turns: mean {r['spill_turn_mean_us']:8.1f} us, max "
            f"{r['spill_turn_max_us']:8.1f} us, burst over median {r['burst_over_median_mean_us']:8.1f} us"
            f" | reading all {r['events']} events ({r['on_disk']} on disk): {r['read_all_ms']:.1f} ms, "
            f"again {r['read_again_ms']:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
