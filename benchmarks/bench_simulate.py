"""Session-wide what-if (`cp-inspect simulate`): figures on the long real trajectories, and timing.

Imports every long trajectory (mini-swe-agent, DeepSeek, >= 30 model calls) from ../shared/trajectories
into a temp dir, then simulates each one: the default pipeline against every optimizer gate closed, at
the recorded window and at a tighter one (where compaction kicks in), priced at DeepSeek
(deepseek-chat, DeepSeek disk-cache rules) and at Anthropic (claude-sonnet-4, engine policy anthropic
with its cache_control markers). Prints a markdown table for benchmarks/BENCHMARKS.md.

Timing: the whole-session simulation of the longest trajectory (open the recording, fold the journal,
build every turn twice, simulate and price four columns), cold (fresh tokenizer cache) and warm,
next to `Replayer.verify()` on the same events (one build per turn) as the baseline, as a ratio.
Target: under 2 s.

    .venv/bin/python benchmarks/bench_simulate.py [TRAJECTORY_DIR] [--tight 32000,16000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine.importers import load  # noqa: E402
from engine.importers.ingest import ingest  # noqa: E402
from engine.recording.replay import Replayer  # noqa: E402
from engine.sim.simulate import SimSettings, SimulationReport, load_recording_events, simulate_events  # noqa: E402
from engine.tokens import TokenCounter  # noqa: E402

MIN_CALLS = 30
PRICINGS = {
    "DeepSeek": SimSettings(),  # the recording's model (deepseek-chat / -reasoner) and rules
    "Anthropic": SimSettings(provider="anthropic", model="claude-sonnet-4"),
}


def default_root() -> Path:
    env = os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    return Path(env) if env else REPO.parent / "shared" / "trajectories"


def import_long(root: Path, out_dir: Path) -> list[tuple[str, Path, int]]:
    out: list[tuple[str, Path, int]] = []
    for src in sorted((root / "mini-swe-agent-pr816").glob("*.traj.json")):
        imp = load(src)
        if len(imp.calls) < MIN_CALLS:
            continue
        name = src.name.removesuffix(".traj.json")
        rec = out_dir / f"{name}.cpsession"
        pipe, report = ingest(imp, rec)
        pipe.close()
        out.append((name, rec, report.turns))
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _be(r: SimulationReport) -> str:
    p, c = r.policies["pipeline"], r.policies["gates_closed"]
    assert p is not None and c is not None
    if r.break_even_cached_price_ratio is not None:
        return _pct(r.break_even_cached_price_ratio)
    if p.totals == c.totals:
        return "same"
    # No crossing in [0, 1]: the one cheaper at the table's price is cheaper at every price.
    return "never: pipeline cheaper" if p.cost_usd <= c.cost_usd else "never: gates closed cheaper"


def row(name: str, turns: int, window: str, pricing: str, r: SimulationReport) -> str:
    p, c = r.policies["pipeline"], r.policies["gates_closed"]
    assert p is not None and c is not None
    return (
        f"| {name} | {turns} | {window} | {pricing} | {p.totals.input_tokens:,} / {c.totals.input_tokens:,} "
        f"| {p.totals.uncached + p.totals.cache_write:,} / {c.totals.uncached + c.totals.cache_write:,} "
        f"| {_pct(p.cache_hit_rate)} / {_pct(c.cache_hit_rate)} | ${p.cost_usd:.4f} / ${c.cost_usd:.4f} "
        f"| {p.compactions} | {p.cache_breaks} / {c.cache_breaks} | {_be(r)} |"
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", type=Path, default=default_root())
    ap.add_argument("--tight", default="32000,16000", help="comma-separated tighter windows")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv[1:])
    tights = [int(x) for x in str(args.tight).split(",") if x.strip()]
    if not (args.root / "mini-swe-agent-pr816").is_dir():
        print(f"no trajectories under {args.root}; nothing to measure")
        return 1
    with tempfile.TemporaryDirectory(prefix="cp-bench-sim-") as tmp:
        recs = import_long(args.root, Path(tmp))
        print(f"{len(recs)} long trajectories (>= {MIN_CALLS} calls) imported\n")
        print(
            "Pipeline / gates-closed. 'billed-new' = uncached + cache-write tokens (what is not read from "
            "the cache);\nbreak-even = cached-token price as a fraction of the input price at which both "
            "cost the same.\n"
        )
        print(
            "| trajectory | calls | window | prices | prompt tokens | billed-new tokens | cache hit | cost "
            "| compactions | cache breaks | break-even |"
        )
        print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        counter = TokenCounter()
        for name, rec, turns in recs:
            events, _ = load_recording_events(rec)
            for wname, window in [("recorded", None)] + [(f"{t // 1000}k", t) for t in tights]:
                for pname, base in PRICINGS.items():
                    s = SimSettings(provider=base.provider, model=base.model, window=window)
                    r = simulate_events(events, s, source=str(rec), counter=counter)
                    wlabel = f"{r.window // 1000}k" if window is None else wname
                    print(row(name, turns, wlabel, pname, r))

        # ---- timing on the longest trajectory
        name, rec, turns = max(recs, key=lambda x: x[2])
        cold_t0 = time.perf_counter()
        events, _ = load_recording_events(rec)
        simulate_events(events, SimSettings(), counter=TokenCounter())
        cold = time.perf_counter() - cold_t0
        sims: list[float] = []
        verifies: list[float] = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            events, _ = load_recording_events(rec)
            simulate_events(events, SimSettings(), counter=counter)
            sims.append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            events, _ = load_recording_events(rec)
            ok = Replayer(events, counter).verify().ok
            verifies.append(time.perf_counter() - t1)
            assert ok, "verify failed on a fresh import"
        tight = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            events, _ = load_recording_events(rec)
            simulate_events(events, SimSettings(window=tights[0]), counter=counter)
            tight.append(time.perf_counter() - t0)
        sim_m, ver_m, tight_m = statistics.median(sims), statistics.median(verifies), statistics.median(tight)
        print(
            f"\nlongest trajectory {name} ({turns} calls): whole-session simulate (open + fold + 2 builds/turn"
            f" + 4 columns simulated and priced)\n"
            f"  cold (fresh token counter): {1000 * cold:.0f} ms\n"
            f"  warm, recorded window:      {1000 * sim_m:.0f} ms (median of {args.repeats})\n"
            f"  warm, window {tights[0]}:       {1000 * tight_m:.0f} ms\n"
            f"  baseline Replayer.verify (open + 1 build/turn): {1000 * ver_m:.0f} ms -> simulate/verify = "
            f"{sim_m / ver_m:.2f}x\n"
            f"  target < 2000 ms: {'met' if max(cold, sim_m, tight_m) < 2.0 else 'MISSED'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
