"""The TUI's session-wide what-if (`FileSource.simulate`, every context policy) as the session grows.

Issue 15 item 6 asks simulate to be linear in the session. The what-if panel simulates every policy
(`policies=["all"]`: eleven columns) on the recording shown; this times that call on synthetic sessions
recorded by the real engine (`bench_simulate.make_synthetic`: a coding agent, one tool call a turn,
DeepSeek at a 128k window, 5 s a turn) of each length asked for, each run as its own process: the
process CPU of the what-if alone (after the imports, those the what-if makes as it starts too, and the
source's open; the modules still imported while timed are counted) and the process's peak RSS.
With --ab DIR, the code under DIR (e.g. a `git archive` of the session's start) and this checkout
alternate (the order flips every round), and each side's JSON is compared byte for byte with the other's
(the figures must not move): per length, the median CPU and RSS of each side, and the ratio of lengths
(2N / N: linear is ~2).

    .venv/bin/python benchmarks/bench_whatif_scaling.py [--turns 750,1500,3000] [--rounds 3]
        [--ab DIR] [--dir /tmp/whatif_scaling] [--columns | --tenths | --builds | --instructions]

--columns says where the time goes instead (with --ab, for the other code first): per length, the build pass (every
engine column's requests and the peers' views, one fold of the journal) and each column's simulation
(its requests made, for a peer, and its cache-simulator steps), each in process CPU, its number of calls,
the mean and largest request in Blocks, and the CPU per call over the first and the last tenth of the
calls. With the 2N/N ratio of each, it tells a column whose per-call cost follows its request's size (a
request that grows with the session: ~4x for 2x the turns, with no per-call waste) from one whose
per-call cost grows with the call's index at a constant request size (work on the whole history a call).
--tenths prints, per length, each part's CPU per call (the build pass's per turn) over each tenth of
the session: flat within a phase (a window that filled, DeepSeek's 4 h expiry from turn ~2,880 at 5 s
a turn) is linear, and a 2N/N above 2 is then the mix of phases, not per-call work that grows.
--builds splits the build pass the same way: per length, the CPU per turn over each tenth of the
session of each build it makes (one row per column it builds for: pipeline, gates_closed, recorded,
wave1, cost_aware, peers' view (SimBuilder.view_apart where the tree has it); a column whose request is
another's own build is not built again) and of the journal's fold. A build whose per-turn cost grows over the tenths while the others' stay flat
does work on the whole conversation each turn.
--instructions counts instead of timing (valgrind's callgrind, one child per length and side, ~50x slower):
per length, the instructions per call (the build pass: per turn) of each part over each tenth of the
session, each part's total, and the what-if's 2N/N by instructions (the index pass, the build pass, the
columns and what follows them, without the imports and the source's open). A count does not move with the
machine's load, as CPU time does on 2 shared cores; it leaves out what a count does not see (cache misses
on a larger heap). Each column's "end" is its last call's step and its totals (the per-turn costs summed).

The recordings are made once per --dir (by this checkout's engine) and reused. What it leaves out: the
panel's rendering, the worker thread and the reading of a live source; the imports (a tree without
bytecode compiles its modules in each child, before the clock starts).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
from engine.whatif import Overrides
from inspector.sources.file import FileSource
# What the what-if imports as it starts (simulate and its columns, the pipeline it rebuilds with), imported
# before the clock starts: ~130 modules, compiled afresh in every child of a tree without bytecode
# (PYTHONDONTWRITEBYTECODE) inside the timed call, a constant that lowered the 2N/N of that side only.
import engine.sim.simulate, engine.sim.simulate_pass, engine.sim.policies, engine.pipeline  # noqa: E401,F401
src = FileSource(sys.argv[1])
before = len(sys.modules)
t0 = time.process_time()
rep = src.simulate(Overrides())
cpu = time.process_time() - t0
late = len(sys.modules) - before
rep.pop("elapsed_s", None)
with open(sys.argv[2], "w") as f:
    f.write(json.dumps(rep, sort_keys=True, indent=1))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"cpu": cpu, "rss_mb": rss, "imported": late}))
"""


# The --columns child: the same what-if, with simulate's build pass and each column's `_simulate` timed
# (process CPU), the requests of a column timed one by one as the simulator takes them (a peer's are made
# then; an engine column's were made in the build pass). The time between two requests is one step.
COLUMNS_CHILD = r"""
import json, sys, time
import engine.sim.simulate as S
from engine.pipeline import Pipeline
from engine.whatif import Overrides
from inspector.sources.file import FileSource
pt = time.process_time
cols = {}
build = {}
sim, bp = S._simulate, S._build_pass
# The build pass turn by turn: the CPU from one request's fold to the next (its builds and its events).
stamps = []
begin = Pipeline.begin_request
def stamped(self, turn):
    if build.get("on"):
        stamps.append(pt())
    return begin(self, turn)
Pipeline.begin_request = stamped
def timed_build(*a, **k):
    t = pt()
    build["on"] = True
    try:
        return bp(*a, **k)
    finally:
        build["on"] = False
        stamps.append(pt())
        build["cpu"] = pt() - t
def timed(name, reqs, **kw):
    per = []
    def each():
        t = pt()
        for r in reqs:
            # Since the last request was handed out: its step (and what follows it) and this one's making.
            now = pt()
            per.append([now - t, len(r.blocks)])
            t = now
            yield r
    t0 = pt()
    try:
        return sim(name, each(), **kw)
    finally:
        cols[name] = {"cpu": pt() - t0, "calls": per}
S._build_pass, S._simulate = timed_build, timed
src = FileSource(sys.argv[1])
t0 = pt()
src.simulate(Overrides())
turns = [b - a for a, b in zip(stamps, stamps[1:])]
print(json.dumps({"all": pt() - t0, "build": build["cpu"], "build_turns": turns, "cols": cols}))
"""

# The --builds child: the build pass turn by turn, each SimBuilder.build timed (process CPU) under the
# name of the column whose config it builds (read from simulate_pass._Configs), and the fold. The peers'
# view is SimBuilder.view_apart where it answers (and a build where it does not): both timed as it.
BUILDS_CHILD = r"""
import json, sys, time
import engine.sim.blocks as B
import engine.sim.simulate_pass as SP
from engine.pipeline import Pipeline
from engine.whatif import Overrides
from inspector.sources.file import FileSource
pt = time.process_time
turns, cur, roles = [], {}, {}
init = SP._Configs.__init__
def named(self, *a, **k):
    init(self, *a, **k)
    # A config object two columns share (one builds, the other may reuse it) is named for both.
    named = [(self.pcfg, "pipeline"), (self.ccfg, "gates_closed"), (self.base, "recorded")]
    named += [(cfg, n) for n, cfg in self.engine.items()] + [(self.full, "peers' view")]
    for cfg, role in named:
        was = roles.get(id(cfg))
        roles[id(cfg)] = role if was is None or was == role else was + " + " + role
SP._Configs.__init__ = named
build = B.SimBuilder.build
def timed(self, bound, cfg, *a, **k):
    name = roles.get(id(cfg), "other")
    t = pt()
    try:
        return build(self, bound, cfg, *a, **k)
    finally:
        cur[name] = cur.get(name, 0.0) + pt() - t
B.SimBuilder.build = timed
if hasattr(B.SimBuilder, "view_apart"):  # the peers' view without a build (a tree that has it)
    view = B.SimBuilder.view_apart
    def viewed(self, bound, cfg):
        t = pt()
        try:
            return view(self, bound, cfg)
        finally:
            name = roles.get(id(cfg), "other")
            cur[name] = cur.get(name, 0.0) + pt() - t
    B.SimBuilder.view_apart = viewed
fold = Pipeline.fold
def folded(self, ev):
    t = pt()
    try:
        return fold(self, ev)
    finally:
        cur["fold"] = cur.get("fold", 0.0) + pt() - t
Pipeline.fold = folded
begin = Pipeline.begin_request
def began(self, turn):
    if cur:
        turns.append(dict(cur))
        cur.clear()
    return begin(self, turn)
Pipeline.begin_request = began
FileSource(sys.argv[1]).simulate(Overrides())
if cur:
    turns.append(dict(cur))
print(json.dumps({"turns": turns}))
"""


# The --instructions child: the what-if under callgrind, a dump (`--dump-before=functools_reduce`) at each
# boundary: the first tenth of every part's calls and each tenth after, each part's end. Each mark names the
# part that the instructions from there to the next mark belong to; the labels are printed in order.
INSTR_CHILD = r"""
import functools, json, sys
import engine.sim.simulate as S
import engine.sim.simulate_pass, engine.sim.policies  # noqa: E401,F401  (imported as the what-if starts)
from engine.pipeline import Pipeline
from engine.whatif import Overrides
from inspector.sources.file import FileSource
labels = []
def mark(label):
    labels.append(label)
    functools.reduce(int.__add__, (), 0)  # callgrind dumps on entering it
src = FileSource(sys.argv[1])
n = int(sys.argv[2])
k = max(1, n // 10)
state = {"on": False, "i": 0}
begin = Pipeline.begin_request
def stamped(self, turn):
    if state["on"]:
        i = state["i"]
        state["i"] += 1
        if i % k == 0 and i // k < 10:
            mark(f"build pass|{i // k}")
    return begin(self, turn)
Pipeline.begin_request = stamped
bp = S._build_pass
def built(*a, **kw):
    state["on"] = True
    try:
        return bp(*a, **kw)
    finally:
        state["on"] = False
        mark("between")
S._build_pass = built
sim = S._simulate
def column(name, reqs, **kw):
    def each():
        for i, r in enumerate(reqs):
            if i % k == 0 and i // k < 10:
                mark(f"{name}|{i // k}")
            yield r
        mark(f"{name}|end")
    try:
        return sim(name, each(), **kw)
    finally:
        mark("between")
S._simulate = column
mark("index pass")
src.simulate(Overrides())
mark("exit")
print(json.dumps({"labels": labels}))
"""


def _instructions(code: Path, rec: Path, turns: int, out: Path) -> dict[str, list[int]]:
    """The instructions of each part of the what-if on `code`'s tree (see INSTR_CHILD), by tenth (the
    part's end last): {part: [tenth 1, ..., tenth 10, end]}; "index pass", "between" (what runs between
    the parts, summed) and "imports+open" as one figure each."""
    out.mkdir(parents=True, exist_ok=True)
    for f in out.glob("cg.out*"):
        f.unlink()
    env = {**os.environ, "PYTHONPATH": str(code), "PYTHONHASHSEED": "0"}
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--dump-before=functools_reduce",
        f"--callgrind-out-file={out}/cg.out",
    ]
    res = subprocess.run(
        [*cmd, sys.executable, "-c", INSTR_CHILD, str(rec), str(turns)],
        env=env,
        cwd=code,
        check=True,
        capture_output=True,
        text=True,
    )
    labels = json.loads(res.stdout.strip().splitlines()[-1])["labels"]
    # cg.out.1 holds what ran before the first mark, cg.out.(i + 1) what ran from mark i - 1 to mark i,
    # cg.out what ran after the last one (the exit).
    dumps = sorted(out.glob("cg.out.*"), key=lambda f: int(f.suffix[1:]))
    if len(dumps) != len(labels):
        raise SystemExit(f"callgrind wrote {len(dumps)} dumps for {len(labels)} marks in {out}")
    counts = [_dump_total(f) for f in dumps]
    got: dict[str, list[int]] = {"imports+open": [counts[0]]}
    for label, c in zip(labels, counts[1:], strict=False):
        part, _, _ = label.partition("|")
        got.setdefault(part, []).append(c)
    got["between"] = [sum(got.get("between", [0]))]
    return got


def _dump_total(f: Path) -> int:
    with f.open() as fh:
        for line in fh:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise SystemExit(f"{f}: no instruction total in this callgrind dump")


def instructions_report(turns: list[int], folder: Path, code: Path = REPO) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit(
            "--instructions runs the what-if under valgrind's callgrind: install valgrind (apt-get install valgrind)"
        )
    got = {n: _instructions(code, _recording(folder, n), n, folder / f"cg_{code.name}_{n}") for n in turns}
    for n in turns:
        k = max(1, n // 10)
        print(f"{n:,} turns: thousand instructions a call (the build pass: a turn) by tenth of the session")
        print(
            "| part | " + " | ".join(str(i + 1) for i in range(10)) + " | 10th / 1st | end (M) | total (M) |"
        )
        print("|---|" + "---:|" * 13)
        for part, c in got[n].items():
            if len(c) < 10:
                continue
            tenths = [x / k / 1e3 for x in c[:10]]
            end = f"{c[10] / 1e6:,.1f}" if len(c) > 10 else ""
            grow = f"{tenths[-1] / tenths[0]:.2f}" if tenths[0] else "-"
            print(
                f"| {part} | "
                + " | ".join(f"{x:,.0f}" for x in tenths)
                + f" | {grow} | {end} | {sum(c) / 1e6:,.0f} |"
            )
        others = ", ".join(f"{p} {c[0] / 1e6:,.0f} M" for p, c in got[n].items() if len(c) < 10)
        print(f"and {others}")
        print()
    print("| part | " + " | ".join(f"{n:,} turns (M)" for n in turns) + " | 2N/N |")
    print("|---|" + "---:|" * (len(turns) + 1))
    parts = [p for p in got[turns[0]] if p not in ("imports+open", "exit")]
    for part in [*parts, "what-if"]:
        tot = [
            sum(sum(c) for p, c in got[n].items() if p in parts)
            if part == "what-if"
            else sum(got[n].get(part, [0]))
            for n in turns
        ]
        ratio = " ".join(f"{b / a:.3f}" if a else "-" for a, b in zip(tot, tot[1:], strict=False))
        print(f"| {part} | " + " | ".join(f"{t / 1e6:,.0f}" for t in tot) + f" | {ratio} |")


def builds_report(turns: list[int], folder: Path, code: Path = REPO) -> None:
    """Per length, each build of the build pass (by the column it builds for) and the fold: CPU per turn
    over each tenth of the session, in us, and the last tenth over the first."""
    for n in turns:
        got = _child(code, BUILDS_CHILD, str(_recording(folder, n)))["turns"]
        names = list(dict.fromkeys(k for t in got for k in t))
        print(f"{n:,} turns: the build pass, us a turn by tenth of the session")
        print("| build | " + " | ".join(str(i + 1) for i in range(10)) + " | 10th / 1st |")
        print("|---|" + "---:|" * 11)
        k = max(1, len(got) // 10)
        for name in names:
            cells = [1e6 * sum(t.get(name, 0.0) for t in got[i * k : (i + 1) * k]) / k for i in range(10)]
            grow = f"{cells[-1] / cells[0]:.2f}" if cells[0] else "-"
            print(f"| {name} | " + " | ".join(f"{x:,.0f}" for x in cells) + f" | {grow} |")
        print()


def _columns(code: Path, rec: Path) -> dict[str, Any]:
    return _child(code, COLUMNS_CHILD, str(rec))


def _tenth_us(calls: list[list[float]], last: bool) -> float:
    """Mean CPU per call (us) over the first or the last tenth of a column's calls: the step of the call
    before it and its own request's making (a peer's)."""
    k = max(1, len(calls) // 10)
    part = calls[-k:] if last else calls[:k]
    return 1e6 * sum(c[0] for c in part) / len(part)


def columns_report(turns: list[int], folder: Path, code: Path = REPO) -> None:
    got = {n: _columns(code, _recording(folder, n)) for n in turns}
    print(
        "| part | "
        + " | ".join(f"{n:,} turns: CPU s, calls, Blocks mean/max, us/call first/last tenth" for n in turns)
        + " | CPU 2N/N |"
    )
    print("|---|" + "---|" * len(turns) + "---:|")
    rows: list[tuple[str, list[str], list[float]]] = []
    rows.append(
        ("whole what-if", [f"{got[n]['all']:.2f}" for n in turns], [float(got[n]["all"]) for n in turns])
    )
    rows.append(
        ("build pass", [f"{got[n]['build']:.2f}" for n in turns], [float(got[n]["build"]) for n in turns])
    )
    names = list(got[turns[0]]["cols"])
    for name in names:
        cells, cpus = [], []
        for n in turns:
            c = got[n]["cols"][name]
            calls = c["calls"]
            sizes = [x[1] for x in calls]
            cells.append(
                f"{c['cpu']:.2f}, {len(calls):,}, {sum(sizes) / max(len(sizes), 1):,.0f}/{max(sizes, default=0):,}, "
                f"{_tenth_us(calls, False):,.0f}/{_tenth_us(calls, True):,.0f}"
            )
            cpus.append(float(c["cpu"]))
        rows.append((name, cells, cpus))
    for name, cells, cpus in rows:
        ratio = " ".join(f"{b / a:.2f}" if a else "-" for a, b in zip(cpus, cpus[1:], strict=False))
        print(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")


def tenths_report(turns: list[int], folder: Path, code: Path = REPO) -> None:
    """Per length, the CPU of each part per call (the build pass: per turn) over each tenth of the
    session, in us: a part whose per-call cost is flat once a phase of the session has begun (a window
    that filled, expiry that began) grows linearly, its 2N/N above 2 only by the mix of phases."""
    for n in turns:
        got = _columns(code, _recording(folder, n))
        print(f"{n:,} turns: us a call (the build pass: a turn) by tenth of the session")
        print("| part | " + " | ".join(str(i + 1) for i in range(10)) + " |")
        print("|---|" + "---:|" * 10)
        rows = [("build pass", [[t] for t in got["build_turns"]])]
        rows += [(name, c["calls"]) for name, c in got["cols"].items()]
        for name, calls in rows:
            k = max(1, len(calls) // 10)
            cells = [1e6 * sum(c[0] for c in calls[i * k : (i + 1) * k]) / k for i in range(10)]
            print(f"| {name} | " + " | ".join(f"{x:,.0f}" for x in cells) + " |")
        print()


def _recording(folder: Path, turns: int) -> Path:
    path = folder / f"whatif_{turns}.cpsession"
    if not path.exists():
        sys.path.insert(0, str(REPO / "benchmarks"))
        from bench_simulate import make_synthetic

        make_synthetic(path, turns)
    return path


def _child(code: Path, script: str, *args: str) -> dict[str, Any]:
    """`script` run by a fresh interpreter on `code`'s tree; the JSON object its last line prints."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    # cwd too: `python -c` puts the working directory first on sys.path, ahead of PYTHONPATH.
    res = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, cwd=code, check=True, capture_output=True, text=True
    )
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def _run(code: Path, rec: Path, out: Path) -> dict[str, float]:
    return _child(code, CHILD, str(rec), str(out))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", default="750,1500,3000", help="comma-separated session lengths")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--ab", type=Path, help="other code (a checkout or `git archive`): alternated with this one"
    )
    ap.add_argument("--dir", type=Path, default=Path("/tmp/whatif_scaling"), help="recordings and outputs")
    ap.add_argument(
        "--columns", action="store_true", help="where the time goes, per column (--ab: both sides)"
    )
    ap.add_argument(
        "--tenths",
        action="store_true",
        help="per column, the CPU a call over each tenth of the session (--ab: both sides)",
    )
    ap.add_argument(
        "--builds",
        action="store_true",
        help="the build pass per turn by column built, over each tenth of the session (--ab: both sides)",
    )
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="instructions (callgrind) per call over each tenth, and 2N/N by instructions (--ab: both sides)",
    )
    a = ap.parse_args(argv)
    turns = [int(x) for x in a.turns.split(",") if x]
    if not turns or min(turns) < 1:
        ap.error("--turns takes positive session lengths, e.g. 750,1500,3000")
    if a.ab is not None and not (a.ab / "engine").is_dir():
        ap.error(f"--ab {a.ab}: no engine/ there; give a checkout or a `git archive` of the code to compare")
    a.dir.mkdir(parents=True, exist_ok=True)
    if sum((a.columns, a.tenths, a.builds, a.instructions)) > 1:
        ap.error("--columns, --tenths, --builds and --instructions are separate reports: give one")
    if a.columns or a.tenths or a.builds or a.instructions:
        # With --ab, the other code's table first, then this checkout's (one process each, in turn).
        for side, code in ([("base", a.ab.resolve())] if a.ab is not None else []) + [("this", REPO)]:
            print(f"{side}: {code}")
            report = (
                builds_report
                if a.builds
                else tenths_report
                if a.tenths
                else instructions_report
                if a.instructions
                else columns_report
            )
            report(turns, a.dir, code)
            print()
        return 0
    recs = {n: _recording(a.dir, n) for n in turns}
    sides = {"this": REPO} if a.ab is None else {"base": a.ab.resolve(), "this": REPO}
    got: dict[tuple[str, int], list[dict[str, float]]] = {}
    differ: list[str] = []
    for r in range(a.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for n in turns:
            outs = {}
            for side in order:
                outs[side] = a.dir / f"out_{side}_{n}.json"
                m = _run(sides[side], recs[n], outs[side])
                got.setdefault((side, n), []).append(m)
                print(
                    f"round {r + 1} {side:4s} {n:5d} turns: cpu {m['cpu']:.2f} s, peak RSS {m['rss_mb']:.0f} MB"
                    f" ({m.get('imported', 0):.0f} modules imported while timed)",
                    flush=True,
                )
            if len(outs) == 2 and outs["base"].read_bytes() != outs["this"].read_bytes():
                differ.append(f"{n} turns (round {r + 1})")
    print()
    print("| side | turns | CPU s (median) | peak RSS MB (median) | CPU 2N/N |")
    print("|---|---:|---:|---:|---:|")
    for side in sides:
        prev = None
        for n in turns:
            cpu = statistics.median(m["cpu"] for m in got[(side, n)])
            rss = statistics.median(m["rss_mb"] for m in got[(side, n)])
            ratio = f"{cpu / prev[1]:.2f} ({n // prev[0]}x turns)" if prev else ""
            print(f"| {side} | {n:,} | {cpu:.2f} | {rss:.0f} | {ratio} |")
            prev = (n, cpu)
    if a.ab is not None:
        print()
        print("JSON identical on every length" if not differ else "JSON DIFFERS: " + ", ".join(differ))
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
