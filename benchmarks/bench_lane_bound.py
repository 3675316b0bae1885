"""What an express lane for the steady append turn could save at most (issue 12), before anyone builds one.

A steady turn (model call >= --warm) of a real trajectory, replayed as bench_engine.py replays it, is
split by exclusive time (a nested labelled call's time is its own, not its caller's) into:

  must   what any lane still does on that turn: count the new content (tokenize), weigh a cut when
         the request is over the policy's target (cost_aware's _choose_cut, payback, remaining_turns,
         economic_saving, prefix_served_on_rewrite), write the new messages' fragments
         (Serializer._item_hit), hash the body (_PrefixHasher.hexdigest), journal the events (_emit)
  could  the rest of next_request: the general path's assembly, policy, plan, rules, serializer
         layout, figures and trace record, and the pipeline's glue around them

`could` is an upper bound: a lane has bookkeeping of its own (running totals, the carried body, the
proof that the previous turn's decisions still hold, the deferred record). It also prints, per turn,
what the policy decided (the lane's precondition): a turn whose request is over the policy's target
weighs a cut, and the early rule may compact it below the trigger, so "still under the trigger" does
not prove the previous decision holds.

Times are perf_counter inside one process (the labelled calls' wrappers add ~0.3 us each); medians
over --repeats after one warm-up repeat, per steady turn.

    CONTEXTPIPE_TRAJECTORIES=../shared/trajectories .venv/bin/python benchmarks/bench_lane_bound.py \\
        --file F [--provider openai] [--window 32000] [--repeats 12] [--warm 10] [--decisions]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent))

import bench_engine as be  # noqa: E402

import engine.pipeline as pipeline_mod  # noqa: E402
import engine.policy.cost_aware as cost_aware  # noqa: E402
import engine.providers.base as providers_base  # noqa: E402
from engine.tokens import TokenCounter  # noqa: E402

PC = time.perf_counter
MUST = "must: "

# (object, attribute, label): the calls whose exclusive time is attributed.
LABELLED: list[tuple[Any, str, str]] = [
    (pipeline_mod.Pipeline, "next_request", "pipeline glue"),
    (pipeline_mod.Pipeline, "_assemble_from", "assembly"),
    (cost_aware, "run", "policy (cost_aware.run)"),
    (pipeline_mod.Pipeline, "_plan", "plan"),
    (cost_aware, "optimize", "optimize rules"),
    (providers_base.Serializer, "serialize", "serializer layout"),
    (pipeline_mod, "figures_of", "figures"),
    (TokenCounter, "_compute", MUST + "tokenize"),
    (cost_aware, "_choose_cut", MUST + "weigh a cut"),
    (cost_aware, "payback", MUST + "weigh a cut"),
    (cost_aware, "remaining_turns", MUST + "weigh a cut"),
    (cost_aware, "economic_saving", MUST + "weigh a cut"),
    (cost_aware, "prefix_served_on_rewrite", MUST + "weigh a cut"),
    (providers_base.Serializer, "_item_hit", MUST + "new fragments"),
    (providers_base._PrefixHasher, "hexdigest", MUST + "body hash"),
    (pipeline_mod.Pipeline, "fold", MUST + "journal events"),  # (the per-turn calls fold in line, not through _emit)
]


class Exclusive:
    """Exclusive time per label: each labelled call's elapsed time less its labelled callees'."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = defaultdict(float)
        self.stack: list[float] = []  # per open call: its labelled callees' time so far

    def wrap(self, f: Callable[..., Any], label: str) -> Callable[..., Any]:
        acc, stack = self.acc, self.stack

        def timed(*a: Any, **k: Any) -> Any:
            stack.append(0.0)
            t = PC()
            try:
                return f(*a, **k)
            finally:
                dt = PC() - t
                inner = stack.pop()
                acc[label] += dt - inner
                if stack:
                    stack[-1] += dt

        return timed

    def install(self) -> None:
        for obj, name, label in LABELLED:
            setattr(obj, name, self.wrap(getattr(obj, name), label))


def one_repeat(
    imp: Any, window: int, warm: int, ex: Exclusive, decisions: list[str] | None
) -> dict[str, float]:
    run = be.EngineRun(imp, window)
    fed = 0
    tot: dict[str, float] = defaultdict(float)
    for i, call in enumerate(imp.calls):
        ex.acc.clear()
        t0 = PC()
        for m in call.messages[fed:]:
            run.feed(m)
        req = run.pipe.next_request()
        if call.usage is not None:
            run.pipe.record_usage(
                {
                    "input_tokens": call.usage.input_tokens,
                    "output_tokens": call.usage.output_tokens,
                    "cache_read_tokens": call.usage.cache_read_tokens or 0,
                }
            )
        else:
            run.pipe.record_error("error", call.error or "no response")
        turn = PC() - t0
        fed = len(call.messages)
        if call.response is not None:
            run.feed(call.response)
            fed += 1
        if i >= warm:
            for k, v in ex.acc.items():
                tot[k] += v
            tot["turn"] += turn
        if decisions is not None:
            c = req.trace.get("compaction") or {}
            over = c.get("tokens", 0) > c.get("target_tokens", 0)
            decisions.append(
                f"  call {i:3d}: {c.get('decision')}, {c.get('tokens')} tokens, target {c.get('target_tokens')}, "
                f"trigger {c.get('trigger_tokens')}{' (over target: a cut weighed)' if over else ''}"
            )
    run.close()
    return tot


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=be.DEFAULT)
    ap.add_argument("--provider", default="openai")
    ap.add_argument("--window", type=int, default=32000)
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--warm", type=int, default=10, help="calls before the steady turns")
    ap.add_argument("--decisions", action="store_true", help="print each call's compaction decision")
    args = ap.parse_args()
    if args.repeats < 1 or args.warm < 0:
        ap.error("--repeats must be at least 1 and --warm at least 0")
    be.PROVIDER = args.provider
    imp = be.load(args.file)
    steady = len(imp.calls) - args.warm
    if steady <= 0:
        ap.error(f"--warm {args.warm}: {args.file.name} has only {len(imp.calls)} model calls")
    ex = Exclusive()
    ex.install()
    decisions: list[str] = []
    one_repeat(imp, args.window, args.warm, ex, decisions)  # warm-up; its decisions are every repeat's
    rows = [one_repeat(imp, args.window, args.warm, ex, None) for _ in range(args.repeats)]
    med = {k: statistics.median(r.get(k, 0.0) for r in rows) / steady * 1e6 for k in rows[0]}
    turn = med.pop("turn")
    must = sum(v for k, v in med.items() if k.startswith(MUST))
    could = sum(v for k, v in med.items() if not k.startswith(MUST))
    print(
        f"{args.file.name}, {args.provider}, window {args.window}: {steady} steady turns of {len(imp.calls)}"
    )
    print(f"  steady turn {turn:.1f} us (median over {args.repeats} repeats; perf_counter, instrumented)")
    for k, v in sorted(med.items(), key=lambda kv: (kv[0].startswith(MUST), -kv[1])):
        print(f"    {k:28s} {v:7.1f} us")
    print(
        f"  any lane must still do {must:.1f} us; it could skip at most {could:.1f} us ({could / turn:.0%} of the turn)"
    )
    over = sum("over target" in d for d in decisions[args.warm :])
    print(
        f"  steady turns over the policy's target (a cut weighed, the early rule may compact): {over} of {steady}"
    )
    if args.decisions:
        print("\n".join(decisions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
