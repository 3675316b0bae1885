"""Benchmark: `cp-inspect` start-up as a person meets it, in fresh processes (issue 15.3).

    .venv/bin/python benchmarks/bench_startup.py [--runs 7] [--recording PATH]

Parts (every figure is CPU beside wall; CPU of a whole child from resource.getrusage(RUSAGE_CHILDREN)):

  help     `cp-inspect --help` against the baseline, a two-command typer app's `--help` (the cost of
           Python + typer + rich help rendering that any typer CLI pays). Interleaved run by run
           (the order alternates). Goal: CPU ratio <= 2x.
  explain  `cp-inspect explain demo_sessions/scout-anthropic.cpsession --format json` (a headless
           command that does real work), reported beside the same baseline.
  replay   `cp-inspect replay FILE` of a long recording (default: the 10,000-turn recording that
           benchmarks/bench_tui.py generates, or --recording; CONTEXTPIPE_TRAJECTORIES is not needed):
           from process start to the first frame with data drawn. The child imports the CLI module as
           the console script does, opens the file as `replay` does, and runs the real InspectorApp
           headless at 120x40 until the current turn is drawn; it reports its own CPU since process
           start (time.process_time, so interpreter start-up and every import are included) and the
           parent reports wall time from spawn. Goal: < 1 s.

Left out: the terminal's own drawing time (headless driver), and the console-script shim's own import
of `importlib.metadata` (the children run `python -m inspector.cli`, which the shim does not).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE_APP = '''
import typer

app = typer.Typer(add_completion=False, no_args_is_help=True)


@app.command()
def one(x: int = 1) -> None:
    """The first command."""


@app.command()
def two(name: str = "") -> None:
    """The second command."""


app()
'''


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def spawn(cmd: list[str]) -> tuple[float, float, str]:
    """(CPU ms, wall ms, stdout) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT)
    wall = (time.perf_counter() - w0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return cpu, wall, done.stdout


def interleaved(
    a: list[str], b: list[str], runs: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    ac, aw, bc, bw = [], [], [], []
    spawn(a)  # warm the OS file cache for both, untimed
    spawn(b)
    for i in range(runs):
        order = [(a, ac, aw), (b, bc, bw)] if i % 2 == 0 else [(b, bc, bw), (a, ac, aw)]
        for cmd, cpu, wall in order:
            c, w, _ = spawn(cmd)
            cpu.append(c)
            wall.append(w)
    return ac, aw, bc, bw


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def child_replay(path: str, spawned_at: float) -> None:
    """Runs in the child: what `cp-inspect replay PATH` does, up to the first frame with data."""
    import asyncio

    import inspector.cli as cli  # the console script's import

    async def run() -> dict[str, float]:
        from inspector.app import InspectorApp
        from inspector.sources.file import FileSource

        cli.open_recording(Path(path))
        app = InspectorApp(FileSource(Path(path)))
        async with app.run_test(size=(120, 40)):
            while app.index < 0:
                await asyncio.sleep(0.001)
            drawn = asyncio.get_running_loop().create_future()
            app.call_after_refresh(lambda: drawn.done() or drawn.set_result(None))
            await drawn
            out = {"cpu_ms": time.process_time() * 1000, "wall_ms": (time.time() - spawned_at) * 1000}
            return out

    print(json.dumps(asyncio.run(run())))
    os._exit(0)  # the first frame is what is measured; skip the app's teardown


def default_recording(turns: int) -> Path:
    return Path(tempfile.gettempdir()) / f"cp-bench-tui-{turns}-v2.cpsession"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--recording", default=None)
    ap.add_argument("--child-replay", default=None)
    ap.add_argument("--spawned-at", type=float, default=0.0)
    ap.add_argument("--only", choices=["help", "explain", "replay"], default=None)
    args = ap.parse_args()
    if args.child_replay:
        child_replay(args.child_replay, args.spawned_at)
        return
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        base_file = Path(tmp) / "two_commands.py"
        base_file.write_text(BASELINE_APP)
        baseline = [py, str(base_file), "--help"]
        if args.only in (None, "help"):
            sc, sw, bc, bw = interleaved([py, "-m", "inspector.cli", "--help"], baseline, args.runs)
            print(
                f"help     cp-inspect --help      CPU {med(sc):6.0f} ms  wall {med(sw):6.0f} ms   "
                f"baseline typer --help CPU {med(bc):6.0f} ms  wall {med(bw):6.0f} ms   "
                f"CPU ratio {med(sc) / med(bc):.2f}x (goal <= 2x: {'MET' if med(sc) <= 2 * med(bc) else 'MISSED'})"
            )
        if args.only in (None, "explain"):
            demo = str(ROOT / "demo_sessions" / "scout-anthropic.cpsession")
            sc, sw, bc, bw = interleaved(
                [py, "-m", "inspector.cli", "explain", demo, "--format", "json"], baseline, args.runs
            )
            print(
                f"explain  explain --format json  CPU {med(sc):6.0f} ms  wall {med(sw):6.0f} ms   "
                f"baseline typer --help CPU {med(bc):6.0f} ms  wall {med(bw):6.0f} ms   CPU ratio {med(sc) / med(bc):.2f}x"
            )
    if args.only in (None, "replay"):
        rec = Path(args.recording) if args.recording else default_recording(10_000)
        if not rec.exists():
            print(
                f"replay   skipped: {rec} is missing (make it with benchmarks/bench_tui.py, or pass --recording)"
            )
            return
        cpu, wall = [], []
        for _ in range(max(3, args.runs // 2)):
            out = subprocess.run(
                [py, __file__, "--child-replay", str(rec), "--spawned-at", repr(time.time())],
                capture_output=True,
                text=True,
                env=_env(),
                cwd=ROOT,
                check=True,
            ).stdout
            res = json.loads(out.strip().splitlines()[-1])
            cpu.append(res["cpu_ms"])
            wall.append(res["wall_ms"])
        print(
            f"replay   {rec.name}: first frame from process start  CPU p50 {med(cpu):6.0f} ms (max {max(cpu):.0f})"
            f"  wall p50 {med(wall):6.0f} ms (max {max(wall):.0f})   goal < 1000 ms: "
            f"{'MET' if med(cpu) < 1000 and med(wall) < 1000 else 'MISSED'}"
        )


if __name__ == "__main__":
    main()
