"""What a shadow rollout costs the agent's turn: Pipeline(shadow=candidate) against the same pipeline
without one, and against the pipeline doing one extra plan per turn (the budget the shadow must stay in).

A real trajectory (default: mini-swe-agent pydicom-1413, 93 calls; falls back to a generated session when
the trajectories are absent) is fed call by call, as bench_engine does. In each repeat three variants run
interleaved on the same history, turn by turn, in one process:

  plain    the agent's turn: new messages + next_request() + record_usage()
  shadow   the same with Pipeline(shadow=Overrides(gates closed)): the candidate is planned every turn
  extra    plain + one more Pipeline.build() of the same turn under the candidate's config (one extra plan)

Each turn's time is the minimum over repeats. Reported, wall (perf_counter) and CPU (thread_time):
  shadow / plain      how much slower the agent's turn gets
  (shadow - plain) / (extra - plain)   the shadow's cost in units of one extra plan   (goal <= 1.0-1.1)

    .venv/bin/python benchmarks/bench_shadow.py [--repeats 5] [--window 32000] [--file PATH]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import EngineRun  # noqa: E402

from engine.importers import ImportedSession, load  # noqa: E402
from engine.importers.model import CallRec, MessageRec, ToolCallRec, UsageRec  # noqa: E402
from engine.optimize import OptimizeLimits  # noqa: E402
from engine.policy.state import CompactionState  # noqa: E402
from engine.tokens import TokenCounter  # noqa: E402
from engine.whatif import GATE_KEYS, Overrides  # noqa: E402

TRAJ = Path(
    os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    or Path(__file__).resolve().parents[2] / "shared" / "trajectories"
)
DEFAULT = TRAJ / "mini-swe-agent-pr816" / "deepseek_chat_dev__pydicom__pydicom-1413.traj.json"
CANDIDATE = Overrides(gates={g: False for g in GATE_KEYS})


def generated(n: int = 80) -> ImportedSession:
    msgs: list[MessageRec] = [MessageRec("system", "You are a careful coding agent. " * 100)]
    calls = []
    for k in range(n):
        msgs.append(
            MessageRec(
                "user" if k == 0 else "tool",
                f"output {k}\n" * 80,
                tool_call_id=None if k == 0 else f"c{k - 1}",
            )
        )
        calls.append(
            CallRec(
                tuple(msgs),
                MessageRec("assistant", f"step {k}"),
                (),
                UsageRec(1000, 50, 0, 0),
                None,
                "deepseek-chat",
            )
        )
        msgs.append(
            MessageRec("assistant", f"step {k}", tool_calls=(ToolCallRec(f"c{k}", "bash", '{"cmd":"ls"}'),))
        )
    return ImportedSession("generated", "generated", "deepseek-chat", "openai", calls)


class Variant:
    def __init__(self, name: str, imp: ImportedSession, window: int) -> None:
        self.name = name
        self.run = EngineRun(imp, window)
        if name == "shadow":
            # Re-create the run's pipeline with a shadow (EngineRun builds a plain one).
            from engine.pipeline import Pipeline

            self.run.pipe = Pipeline(
                imp.model or "deepseek-chat",
                "openai",
                window,
                counter=TokenCounter(),
                serve=False,
                clock=lambda: 0.0,
                shadow=CANDIDATE,
            )
            for t in imp.calls[0].tools:
                self.run.pipe.add_tool(t.name, t.description, t.parameters)
        self.fed = 0
        self.state = CompactionState()
        self.closed = self.run.pipe.config.limits.with_gates(dict.fromkeys(GATE_KEYS, False))
        assert isinstance(self.closed, OptimizeLimits)

    def turn(self, call: CallRec, clock: Callable[[], float]) -> float:
        for m in call.messages[self.fed :]:
            self.run.feed(m)
        self.fed = len(call.messages)
        pipe = self.run.pipe
        t0 = clock()
        req = pipe.next_request()
        if self.name == "extra":
            from dataclasses import replace

            built = pipe.shadow_build({}, replace(pipe.config, limits=self.closed), self.state)
            self.state = built.state or self.state
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 50})
        dt = clock() - t0
        if call.response is not None:
            self.run.feed(call.response)
            self.fed += 1
        return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--window", type=int, default=32_000)
    ap.add_argument("--file", type=Path, default=DEFAULT)
    args = ap.parse_args()
    if args.file.exists():
        imp = load(args.file)
        src = args.file.name
    else:
        imp, src = generated(), "generated session (trajectories absent)"
    names = ("plain", "shadow", "extra")
    results: dict[str, dict[str, list[list[float]]]] = {
        clk: {n: [] for n in names} for clk in ("wall", "cpu")
    }
    for clk_name, clock in (("wall", time.perf_counter), ("cpu", time.thread_time)):
        for _ in range(args.repeats):
            gc.collect()
            vs = [Variant(n, imp, args.window) for n in names]
            per: dict[str, list[float]] = {n: [] for n in names}
            for call in imp.calls:
                for v in vs:  # interleaved: the same turn in every variant, back to back
                    per[v.name].append(v.turn(call, clock))
            for n in names:
                results[clk_name][n].append(per[n])
    print(f"bench_shadow: {src}, {len(imp.calls)} calls, window {args.window}, repeats {args.repeats}")
    for clk_name in ("wall", "cpu"):
        best = {n: [min(r[k] for r in results[clk_name][n]) for k in range(len(imp.calls))] for n in names}
        tot = {n: sum(best[n]) for n in names}
        med = {n: statistics.median(best[n]) for n in names}
        units = (tot["shadow"] - tot["plain"]) / max(1e-12, tot["extra"] - tot["plain"])
        print(
            f"  {clk_name:>4}: per turn median plain {med['plain'] * 1e3:.2f} ms, shadow {med['shadow'] * 1e3:.2f} ms,"
            f" extra plan {med['extra'] * 1e3:.2f} ms; total shadow/plain {tot['shadow'] / tot['plain']:.2f}x,"
            f" extra/plain {tot['extra'] / tot['plain']:.2f}x; shadow cost = {units:.2f} extra plans"
        )


if __name__ == "__main__":
    main()
