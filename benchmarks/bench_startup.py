"""Benchmark: `cp-inspect` start-up as a person meets it, in fresh processes (issue 15.3).

    .venv/bin/python benchmarks/bench_startup.py [--runs 7] [--recording PATH] [--only PART] [--compare BASE_DIR]

Parts (every figure is CPU beside wall; CPU of a whole child from resource.getrusage(RUSAGE_CHILDREN)):

  help     `cp-inspect --help` against the baseline, a two-command typer app's `--help` (the cost of
           Python + typer + rich help rendering that any typer CLI pays). Interleaved run by run
           (the order alternates). Goal: CPU ratio <= 2x.
  explain  `cp-inspect explain demo_sessions/scout-anthropic.cpsession --format json` (a headless
           command that does real work), reported beside the same baseline.
  headless the other command lines people run in scripts and loops, each beside the same baseline:
           `explain FILE` (text), `verify FILE`, `ps --json`, `salvage FILE -o OUT --force` (FILE the demo
           recording; ps with no agent running), and what an agent keeping its context in the store runs
           each turn: `ctx get --db S --budget 12k` (sticky, as in a loop), `ctx add --db S2 TEXT`,
           `ctx expand --db S 5` (S a store made by `ctx import` of the demo recording, once; S2 a copy of
           it that the adds grow by a row a run), a CI gate's `diff recorded gate.drop_rounds=off FILE`,
           `forks FILE --json` (a loop over recordings; the demo forked nothing: a tree of one), a cron
           job's `report FILE --json`, `ctx import FILE --db S3 --again` (each run adds the demo's 84
           items again to S3) and `eval --trajectories DIR --json` (DIR holding one small synthetic
           trajectory: the command's start-up more than its work).
           With `--compare DIR`, help, explain and headless run the same command lines on the code in
           DIR as well, interleaved run by run with this tree's and the baseline (the order rotates),
           and print this / base beside each.
  replay   `cp-inspect replay FILE` of a long recording (default: the 10,000-turn recording that
           benchmarks/bench_tui.py generates, or --recording; CONTEXTPIPE_TRAJECTORIES is not needed):
           from process start to the first complete screen (the current turn and the footer's keys).
           The child (benchmarks/startup_child.py) runs the command as the console script does: the
           entry point pyproject.toml names imported, argv set, and called (the program's own dispatch,
           typer's or not, then `replay` as it is), with only App.run replaced by a headless run at 120x40; it
           reports its own CPU since process start (time.process_time, read in the callback that runs
           once that frame is written, so interpreter start-up, every import and the reader thread are
           included) and the parent reports wall time from spawn. Goal: < 1 s of CPU. `--compare DIR`
           alternates each run with the same child on the code in DIR (A B B A; a git archive of the
           base, for before/after). Both trees are byte-compiled first, as an installed package is (see
           compile_tree).

Left out: the terminal's own drawing time (headless driver; tmux adds the writes), and the console-script
shim's own two lines (`import re, sys`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
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


def entry_point(root: Path) -> str:
    """MODULE:FUNCTION of the `cp-inspect` console script, as the tree's pyproject.toml names it."""
    return str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]["cp-inspect"])


def console_script(root: Path) -> list[str]:
    """A command line that runs what the installed `cp-inspect` script runs: import the entry point and
    call it (the script's own arguments follow)."""
    module, _, function = entry_point(root).partition(":")
    return [sys.executable, "-c", f"import sys; from {module} import {function} as main; sys.exit(main())"]


def replay_child(root: Path, rec: Path) -> tuple[float, float]:
    """(CPU ms, wall ms) to the first frame of one fresh `replay` child running the code in `root`."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("startup_child.py")), str(rec), repr(time.time()),
         entry_point(root)],
        capture_output=True,
        text=True,
        env=_env(root),
        cwd=root,
    )
    if done.returncode != 0:
        raise SystemExit(f"the replay child on {root} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    res = json.loads(done.stdout.strip().splitlines()[-1])
    return res["cpu_ms"], res["wall_ms"]


def spawn(cmd: list[str], root: Path = ROOT) -> tuple[float, float, str]:
    """(CPU ms, wall ms, stdout) of one child process running the code in `root`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    # cwd is the tree too: `python -c` puts the working directory first on sys.path, before PYTHONPATH.
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(root), cwd=root)
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


def rotated(subjects: list[tuple[list[str], Path]], runs: int) -> list[tuple[list[float], list[float]]]:
    """(CPU ms, wall ms) of each (command line, code tree) subject over `runs` rounds, one run of each a
    round, the order rotating round by round (so no subject always follows the same one)."""
    out: list[tuple[list[float], list[float]]] = [([], []) for _ in subjects]
    for cmd, root in subjects:
        spawn(cmd, root)  # warm the OS file cache and the byte-code, untimed
    for i in range(runs):
        for j in range(len(subjects)):
            k = (i + j) % len(subjects)
            c, w, _ = spawn(*subjects[k])
            out[k][0].append(c)
            out[k][1].append(w)
    return out


def side_by_side(label: str, args: list[str], baseline: list[str], base: Path | None, runs: int) -> None:
    """One command line on this tree (and on `base`), beside the typer baseline, interleaved."""
    subjects = [([*console_script(ROOT), *args], ROOT), (baseline, ROOT)]
    if base is not None:
        subjects.append(([*console_script(base), *args], base))
    res = rotated(subjects, runs)
    (sc, sw), (bc, bw) = res[0], res[1]
    line = (f"{label:<38} CPU p50 {med(sc):5.0f} ms  wall {med(sw):5.0f} ms   typer --help CPU {med(bc):5.0f} ms"
            f"  wall {med(bw):5.0f} ms   ratio {med(sc) / med(bc):.2f}x")
    if base is not None:
        oc, ow = res[2]
        line += f"   base CPU {med(oc):5.0f} ms  wall {med(ow):5.0f} ms   this / base CPU {med(sc) / med(oc):.2f}x"
    print(line)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def default_recording(turns: int) -> Path:
    return Path(tempfile.gettempdir()) / f"cp-bench-tui-{turns}-v2.cpsession"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--recording", default=None)
    ap.add_argument("--only", choices=["help", "explain", "headless", "replay"], default=None)
    ap.add_argument("--compare", default=None, metavar="DIR",
                    help="alternate runs with the code in DIR (e.g. a git archive of the base)")
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        base_file = Path(tmp) / "two_commands.py"
        base_file.write_text(BASELINE_APP)
        baseline = [py, str(base_file), "--help"]
        base = None if args.compare is None else Path(args.compare).resolve()
        if base is not None and args.only != "replay":
            compile_tree(ROOT)
            compile_tree(base)
        if args.only in (None, "help") and base is None:
            sc, sw, bc, bw = interleaved([*console_script(ROOT), "--help"], baseline, args.runs)
            print(
                f"help     cp-inspect --help      CPU {med(sc):6.0f} ms  wall {med(sw):6.0f} ms   "
                f"baseline typer --help CPU {med(bc):6.0f} ms  wall {med(bw):6.0f} ms   "
                f"CPU ratio {med(sc) / med(bc):.2f}x (goal <= 2x: {'MET' if med(sc) <= 2 * med(bc) else 'MISSED'})"
            )
        demo = str(ROOT / "demo_sessions" / "scout-anthropic.cpsession")
        if args.only in (None, "explain") and base is None:
            sc, sw, bc, bw = interleaved(
                [*console_script(ROOT), "explain", demo, "--format", "json"], baseline, args.runs
            )
            print(
                f"explain  explain --format json  CPU {med(sc):6.0f} ms  wall {med(sw):6.0f} ms   "
                f"baseline typer --help CPU {med(bc):6.0f} ms  wall {med(bw):6.0f} ms   CPU ratio {med(sc) / med(bc):.2f}x"
            )
        lines: list[tuple[str, list[str]]] = []
        if args.only in (None, "help") and base is not None:
            lines.append(("help     --help", ["--help"]))
        if args.only in (None, "explain") and base is not None:
            lines.append(("explain  explain FILE --format json", ["explain", demo, "--format", "json"]))
        if args.only in (None, "headless"):
            salvaged = str(Path(tmp) / "salvaged.cpsession")
            lines += [
                ("headless explain FILE", ["explain", demo]),
                ("headless verify FILE", ["verify", demo]),
                ("headless ps --json", ["ps", "--json"]),
                ("headless salvage FILE -o OUT --force", ["salvage", demo, "-o", salvaged, "--force"]),
            ]
            store, grown = str(Path(tmp) / "ctx.sqlite"), str(Path(tmp) / "ctx-add.sqlite")
            spawn([*console_script(ROOT), "ctx", "import", demo, "--db", store])
            spawn([*console_script(ROOT), "ctx", "import", demo, "--db", grown])
            loaded = str(Path(tmp) / "ctx-import.sqlite")
            trajs = Path(tmp) / "trajectories"  # one small trajectory: eval's start-up, not its work
            trajs.mkdir()
            shutil.copy(ROOT / "tests" / "fixtures" / "synthetic" / "mini_repr_strings.traj.json", trajs)
            lines += [
                ("headless ctx get --budget 12k", ["ctx", "get", "--db", store, "--budget", "12k"]),
                ("headless ctx add TEXT", ["ctx", "add", "--db", grown, "The build runs on Python 3.11."]),
                ("headless ctx expand 5", ["ctx", "expand", "--db", store, "5"]),
                ("headless diff recorded gate FILE", ["diff", "recorded", "gate.drop_rounds=off", demo]),
                ("headless forks FILE --json", ["forks", demo, "--json"]),
                ("headless report FILE --json", ["report", demo, "--json"]),
                ("headless ctx import FILE --again", ["ctx", "import", demo, "--db", loaded, "--again"]),
                ("headless eval --trajectories DIR --json", ["eval", "--trajectories", str(trajs), "--json"]),
            ]
        for label, argv in lines:
            side_by_side(label, argv, baseline, base, args.runs)
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
