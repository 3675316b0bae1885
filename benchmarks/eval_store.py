"""Store vs "last N messages that fit" on the real trajectories (same as `cp-inspect eval`).

    .venv/bin/python benchmarks/eval_store.py [--per-trajectory]

Trajectories are read from ../shared/trajectories (or $CONTEXTPIPE_TRAJECTORIES); the script skips
with a message when they are absent. The metric is defined in engine/store/evaluate.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.store.evaluate import format_report, run_eval  # noqa: E402


def main() -> None:
    import os

    env = os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    root = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "trajectories"
    if not root.is_dir():
        print(f"skipped: no trajectories at {root} (set CONTEXTPIPE_TRAJECTORIES)")
        return
    report = run_eval(root, progress=lambda s: print(s, file=sys.stderr))
    print(format_report(report, per_trajectory="--per-trajectory" in sys.argv))


if __name__ == "__main__":
    main()
