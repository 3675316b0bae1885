"""Benchmark: `cp-inspect` start-up as a person meets it, in fresh processes (issue 15.3).

    .venv/bin/python benchmarks/bench_startup.py [--runs 7] [--recording PATH] [--only replay --compare BASE_DIR]

Parts (every figure is CPU beside wall; CPU of a whole child from resource.getrusage(RUSAGE_CHILDREN)):

  help     `cp-inspect --help` against the baseline, a two-command typer app's `--help` (the cost of
           Python + typer + rich help rendering that any typer CLI pays). Interleaved run by run
           (the order alternates). Goal: CPU ratio <= 2x.
  explain  `cp-inspect explain demo_sessions/scout-anthropic.cpsession --format json` (a headless
           command that does real work), reported beside the same baseline.
  replay   `cp-inspect replay FILE` of a long recording (default: the 10,000-turn recording that
           benchmarks/bench_tui.py generates, or --recording; CONTEXTPIPE_TRAJECTORIES is not needed):
           from process start to the first frame with data drawn. The child runs the command itself
           (`cli.app(["replay", FILE])`: typer's dispatch, which imports pydantic to coerce the
           arguments, then `replay` as it is) with only App.run replaced by a headless run at
           120x40 until the current turn is drawn; it reports its own CPU since process
           start (time.process_time, read in the callback that runs once that frame is written, so
           interpreter start-up, every import and the reader thread are included) and the parent
           reports wall time from spawn. Goal: < 1 s of CPU. `--compare DIR` alternates each run with
           the same child on the code in DIR (A B B A; a git archive of the base, for before/after).
           Both trees are byte-compiled first, as an installed package is (see compile_tree).

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
from typing import Any

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


def _env(root: Path = ROOT) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def compile_tree(root: Path) -> None:
    """Byte-compile the project as an installed package has it. Python writes its own .pyc files on
    first import, except under PYTHONDONTWRITEBYTECODE (set in some of our environments): then every
    child would compile every project module from source (~60-100 ms of CPU) and time that."""
    packages = [str(root / p) for p in ("engine", "inspector", "panels", "themes")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True, capture_output=True)


def replay_child(root: Path, rec: Path) -> tuple[float, float]:
    """(CPU ms, wall ms) to the first frame of one fresh `replay` child running the code in `root`."""
    done = subprocess.run(
        [sys.executable, __file__, "--child-replay", str(rec), "--spawned-at", repr(time.time())],
        capture_output=True,
        text=True,
        env=_env(root),
        cwd=root,
    )
    if done.returncode != 0:
        raise SystemExit(f"the replay child on {root} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    res = json.loads(done.stdout.strip().splitlines()[-1])
    return res["cpu_ms"], res["wall_ms"]


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
    """Runs in the child: `cp-inspect replay PATH` itself (typer's dispatch, which coerces the arguments
    through pydantic, included), its app run headless until the first frame with data is drawn."""
    import asyncio

    import inspector.cli as cli  # the console script's import

    def complete(app: Any) -> bool:
        """The first screen as it stays: the current turn, and the footer's keys laid out (the footer
        composes them when the bindings settle: a frame may come before it does)."""
        from textual.widgets._footer import FooterKey

        keys = app.query(FooterKey)
        return app.index >= 0 and len(keys) > 0 and all(k.region.width > 0 for k in keys)

    async def first_frame(app: Any) -> None:
        async with app.run_test(size=(120, 40)):
            while not complete(app):
                await asyncio.sleep(0.001)
            drawn: asyncio.Future[dict[str, float]] = asyncio.get_running_loop().create_future()

            def frame_drawn() -> None:
                # Read here, as the frame is written: once this task resumes, work the app deferred
                # to after its first frame may already have run.
                if not drawn.done():
                    drawn.set_result({"cpu_ms": time.process_time() * 1000,
                                      "wall_ms": (time.time() - spawned_at) * 1000})

            app.call_after_refresh(frame_drawn)
            print(json.dumps(await drawn), flush=True)
            os._exit(0)  # the first frame is what is measured; skip the app's teardown

    class Headless:
        def __init__(self, app: Any) -> None:
            self.app = app

        def run(self) -> None:  # what the command calls: App.run, here headless at 120x40
            asyncio.run(first_frame(self.app))

    if hasattr(cli, "replay_app"):
        built = cli.replay_app
        cli.replay_app = lambda *a, **k: Headless(built(*a, **k))  # type: ignore[assignment]
    else:  # code from before replay_app (a base for a before/after figure): `replay` ran _run_app then
        def run_app(source: Any, theme: str | None, start_turn: int | None = None) -> None:
            from inspector.app import InspectorApp

            Headless(InspectorApp(source, theme=theme, start_turn=start_turn)).run()

        cli._run_app = run_app  # type: ignore[attr-defined]
    cli.app(["replay", path], standalone_mode=False)
    raise SystemExit("replay returned without drawing a frame")


def default_recording(turns: int) -> Path:
    return Path(tempfile.gettempdir()) / f"cp-bench-tui-{turns}-v2.cpsession"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--recording", default=None)
    ap.add_argument("--child-replay", default=None)
    ap.add_argument("--spawned-at", type=float, default=0.0)
    ap.add_argument("--only", choices=["help", "explain", "replay"], default=None)
    ap.add_argument("--compare", default=None, metavar="DIR",
                    help="replay: alternate runs with the code in DIR (e.g. a git archive of the base)")
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
        trees = [ROOT] if args.compare is None else [Path(args.compare).resolve(), ROOT]
        for tree in trees:
            compile_tree(tree)
        cpu: dict[Path, list[float]] = {t: [] for t in trees}
        wall: dict[Path, list[float]] = {t: [] for t in trees}
        for i in range(max(3, args.runs // 2)):
            for tree in trees if i % 2 == 0 else trees[::-1]:  # base, new, new, base, ... (A B B A)
                c, w = replay_child(tree, rec)
                cpu[tree].append(c)
                wall[tree].append(w)
        for tree in trees:
            label = "" if args.compare is None else ("base " if tree != ROOT else "this ")
            c, w = cpu[tree], wall[tree]
            print(
                f"replay   {label}{rec.name}: first frame from process start  CPU p50 {med(c):6.0f} ms "
                f"(max {max(c):.0f}; {' '.join(f'{x:.0f}' for x in c)})  wall p50 {med(w):6.0f} ms (max {max(w):.0f})"
                f"   goal < 1000 ms CPU: {'MET' if med(c) < 1000 else 'MISSED'}"
            )
        if args.compare is not None:
            print(f"replay   this / base CPU p50: {med(cpu[ROOT]) / med(cpu[trees[0]]):.2f}x")


if __name__ == "__main__":
    main()
