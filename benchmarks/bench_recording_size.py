"""Recording size: the .cpsession the importers write for each real trajectory (engine output: `ingest`, the
same path as `cp-inspect import`) against the naive JSONL a request-logging proxy writes (every full request
body plus its response, one line per call) and against gzip -9 of that JSONL.

    .venv/bin/python benchmarks/bench_recording_size.py [TRAJECTORY ...]    # default: every shared one, 30+ calls

Goals (issue 15): >= 25x smaller than the naive log and >= 5x smaller than its gzip -9, on every shared
trajectory with 30+ calls, keeping random access (timed here: open + read the last turn, and a random turn).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from engine.importers import load
from engine.importers.ingest import ingest, message_dict
from engine.recording.cpsession import RecordingReader

ROOT = Path(os.environ.get("CONTEXTPIPE_TRAJECTORIES", Path(__file__).resolve().parents[2] / "shared" / "trajectories"))
MIN_CALLS = 30


def trajectories() -> list[Path]:
    if not ROOT.is_dir():
        return []
    return sorted(p for d in sorted(ROOT.iterdir()) if d.is_dir() for p in d.iterdir() if p.suffix in (".json", ".traj"))


def naive_jsonl(imp) -> bytes:  # type: ignore[no-untyped-def]
    lines = []
    for c in imp.calls:
        req = {
            "model": c.model,
            "messages": [message_dict(m) for m in c.messages],
            "tools": [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                        "parameters": t.parameters}} for t in c.tools],
        }
        resp = {"message": message_dict(c.response) if c.response else None,
                "usage": c.usage.__dict__ if c.usage else None}
        lines.append(json.dumps({"request": req, "response": resp}))
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    paths = [Path(a) for a in sys.argv[1:]] or trajectories()
    if not paths:
        print(f"skipped: no trajectories at {ROOT} (set CONTEXTPIPE_TRAJECTORIES)")
        return
    print(f"{'trajectory':<58}{'calls':>6}{'naive MB':>10}{'gzip-9 MB':>10}{'cps KB':>8}"
          f"{'naive/cps':>10}{'gz/cps':>8}{'write ms cpu':>13}{'open+last ms':>13}{'random turn ms':>15}")
    worst_naive = worst_gz = float("inf")
    for path in paths:
        try:
            imp = load(path)
        except Exception as exc:  # a trajectory this build cannot import is reported, not fatal
            print(f"{path.name}: cannot import ({exc})")
            continue
        if len(imp.calls) < MIN_CALLS and not sys.argv[1:]:
            continue
        naive = naive_jsonl(imp)
        gz = len(gzip.compress(naive, 9))
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "s.cpsession"
            c0 = time.process_time()
            pipe, _ = ingest(imp, out)
            pipe.close()
            write_cpu = (time.process_time() - c0) * 1000
            size = out.stat().st_size
            t0 = time.process_time()
            with RecordingReader.open(out) as r:
                r.turn(-1)
                t1 = time.process_time()
                n = r.turn_numbers()
                picks = random.Random(0).sample(n, min(10, len(n)))
                for t in picks:
                    r.turn(t)
                t2 = time.process_time()
        worst_naive, worst_gz = min(worst_naive, len(naive) / size), min(worst_gz, gz / size)
        print(f"{path.name[:57]:<58}{len(imp.calls):>6}{len(naive) / 1e6:>10.2f}{gz / 1e6:>10.3f}{size / 1e3:>8.1f}"
              f"{len(naive) / size:>9.1f}x{gz / size:>7.1f}x{write_cpu:>13.0f}{(t1 - t0) * 1000:>13.2f}"
              f"{(t2 - t1) * 1000 / max(1, len(picks)):>15.2f}")
    print(f"worst: naive/cps {worst_naive:.1f}x (goal >= 25x), gzip-9/cps {worst_gz:.1f}x (goal >= 5x)")
    print("(write ms cpu = the whole ingest incl. planning every turn; read times are CPU, process_time)")


if __name__ == "__main__":
    main()
