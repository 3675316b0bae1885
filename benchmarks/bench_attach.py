"""Attaching to a long-running agent that records: the inspector's CPU from `open_live` (what `cp-inspect
attach PID` opens: the agent's hello, its recording checked and opened, RecordingFollower made) to the
first frame's turns (the source's first chunk: the newest turn whole, the ones before as stand-ins).

An agent process per tree (a Pipeline that records and serves its probe, turns of a bash call and a tool
result of a few lines, as bench_live_search's agent) runs N turns and waits, its recording without a
footer (the writer still at work): the file a follower finds. Each round starts one inspector process per
tree, alternating which goes first, that attaches to its tree's agent and reports its own CPU (thread
time of the attaching thread, and process time beside it) and wall time for open_live and the first
chunk, after its imports (the chunk with the collector held off, as `attach` runs the app: startup_gc;
with it on, 50,000 turns' stand-ins cost ~90 ms more of collections); and the bytes its reader read. Up to session 50 a footerless recording was
scanned whole (every chunk frame read and decoded) on attach; from session 51 it is read from its end
(engine/recording/cpsession_index.py, _scan_from_end).

    PYTHONPATH=. python benchmarks/bench_attach.py --turns 1000 10000 50000 --rounds 5 --ab /tmp/start51

Prints, per N and tree, the median and range of the attach CPU, the bytes read and the file's size, and
the load. Without --ab, this tree only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def agent(turns: int, path: str) -> None:
    """The agent: N turns recorded to `path`, its probe served, then wait (stdin closed: exit)."""
    from engine.pipeline import Pipeline

    pipe = Pipeline("claude-sonnet-4", "anthropic", 200_000, serve=True, record=path)
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    for t in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, f"output of step {t}\n" + "line of output\n" * (t % 7))
    print("ready", flush=True)
    sys.stdin.read()
    pipe.close()


def attach(pid: int) -> None:
    """One attach, timed after the imports: its figures as one JSON line."""
    from inspector import startup_gc
    from inspector.sources.live_recording import RecordingFollower, open_live

    c0, p0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
    src, why = open_live(pid, timeout=30)
    startup_gc.hold()  # (as `attach` runs the app: the collector off until its first frame with data)
    chunk = next(iter(src.load_chunks()))
    startup_gc.release(freeze=False)
    c1, p1, w1 = time.thread_time(), time.process_time(), time.perf_counter()
    reader = src.reader if isinstance(src, RecordingFollower) else None
    followed = reader is not None
    out = {
        "cpu": c1 - c0,
        "process": p1 - p0,
        "wall": w1 - w0,
        "turns": len(chunk.traces),
        "followed": followed,
        "why": why,
        "read": reader.bytes_read if reader is not None else None,
        "size": os.path.getsize(reader.path) if reader is not None else None,
    }
    src.close()
    print(json.dumps(out), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ab", type=Path, help="another tree (say /tmp/start51), attached beside this one")
    ap.add_argument("--agent", nargs=2, metavar=("TURNS", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--attach", type=int, metavar="PID", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.agent:
        return agent(int(args.agent[0]), args.agent[1])
    if args.attach:
        return attach(args.attach)
    trees = {"this": HERE.parents[1]}
    if args.ab:
        trees["ab"] = args.ab.resolve()
    rt = Path(tempfile.mkdtemp(prefix="cpat"))
    for n in args.turns:
        agents: dict[str, subprocess.Popen[str]] = {}
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree), "XDG_RUNTIME_DIR": str(rt / name)}
            (rt / name).mkdir(exist_ok=True)
            rec = rt / f"{name}-{n}.cpsession"
            agents[name] = subprocess.Popen(
                [sys.executable, str(HERE), "--agent", str(n), str(rec)],
                env=env,
                cwd=tree,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        for name, proc in agents.items():
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", f"{name}'s agent"
        got: dict[str, list[dict[str, object]]] = {name: [] for name in trees}
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in order:
                env = {**os.environ, "PYTHONPATH": str(trees[name]), "XDG_RUNTIME_DIR": str(rt / name)}
                line = subprocess.run(
                    [sys.executable, str(HERE), "--attach", str(agents[name].pid)],
                    env=env,
                    cwd=trees[name],
                    capture_output=True,
                    text=True,
                )
                if line.returncode != 0:
                    raise SystemExit(f"{name}'s attach failed:\n{line.stderr}")
                got[name].append(json.loads(line.stdout.strip().splitlines()[-1]))
        load = os.getloadavg()[0]
        for name in trees:
            rows = got[name]
            cpu = sorted(float(x["cpu"]) for x in rows)  # type: ignore[arg-type]
            last = rows[-1]
            assert all(x["followed"] for x in rows), f"{name}: not followed ({last['why']})"
            assert {x["turns"] for x in rows} == {n}, f"{name}: {last['turns']} turns in the first frame"
            print(
                f"{n:>6} turns {name:>4} ({trees[name]}): attach CPU median {statistics.median(cpu) * 1e3:.1f} ms "
                f"[{cpu[0] * 1e3:.1f}-{cpu[-1] * 1e3:.1f}], process "
                f"{statistics.median(float(x['process']) for x in rows) * 1e3:.1f} ms, wall "  # type: ignore[arg-type]
                f"{statistics.median(float(x['wall']) for x in rows) * 1e3:.1f} ms; read {last['read']:,} "  # type: ignore[arg-type]
                f"of {last['size']:,} bytes; load {load:.1f}",
                flush=True,
            )
        for proc in agents.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=120)


if __name__ == "__main__":
    main()
