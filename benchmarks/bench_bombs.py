"""Decompression bombs (issue 10 item 7): each attack file from tests/attacks.py (1 GiB inflations) run through
`cp-inspect verify` and `cp-inspect explain` in a child process; peak RSS, CPU and wall time of the child.
Baseline: the same commands on an honest demo recording, interleaved.

    .venv/bin/python benchmarks/bench_bombs.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import attacks  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
PROBE = (
    "import resource, subprocess, sys, time\n"
    "t = time.monotonic(); p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(p.returncode, u.ru_maxrss, u.ru_utime + u.ru_stime, time.monotonic() - t)\n"
)


def run(cmd: str, path: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, sys.executable, "-m", "inspector.cli", cmd, str(path)],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    code, rss, cpu, wall = int(out[0]), int(out[1]) / 1024, float(out[2]), float(out[3])
    return f"exit {code}, peak RSS {rss:6.0f} MB, CPU {cpu:5.2f} s, wall {wall:5.2f} s"


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        files = {}
        for name, make in (
            ("v1 blob -> 1 GiB (the issue's attack)", attacks.v1_blob_bomb),
            ("v1 trace -> 256 MiB", attacks.v1_trace_bomb),
            ("v2 chunk declaring 2 GiB", attacks.v2_declared_bomb),
            ("v2 chunk declaring 1 KB, inflating to 1 GiB", attacks.v2_lying_bomb),
            ("v2 40 chunks x 60 MiB", attacks.v2_many_chunks),
        ):
            p = Path(d) / (name.split()[0] + str(len(files)) + ".cpsession")
            make(p)
            files[name] = p
        for name, p in files.items():
            for cmd in ("verify", "explain"):
                print(f"{name:<48} {p.stat().st_size / 1e6:6.2f} MB  {cmd:<8} {run(cmd, p)}")
                print(f"{'  baseline: honest demo recording':<48} {DEMO.stat().st_size / 1e6:6.2f} MB  {cmd:<8} {run(cmd, DEMO)}")


if __name__ == "__main__":
    main()
