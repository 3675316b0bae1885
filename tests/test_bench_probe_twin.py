"""benchmarks/bench_probe.py --twin (issue 15 item 4): two Pipelines of one process, their turns taken in
turn, the subject attached to one for a round. Runs the mode end to end at a size with no timing meaning:
what is checked is that both twins serve, a reader attaches to either (the second serves at <pid>.N.sock,
so its reader must ask for that session), and the figures are printed for every pair."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_twin_runs_with_a_reader_on_either_twin() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(REPO)
    # --seed 0: round 0 attaches the reader to the second twin (<pid>.1.sock), round 1 to the first.
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "bench_probe.py"),
        "--twin",
        "none,reader,foldpath,foldmute,foldfloor,foldbypass,foldappends",
        "--rounds",
        "2",
    ]
    cmd += ["--pairs", "4", "--warmup", "3", "--settle", "1", "--seed", "0", "--untraced"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    for subject in ("none", "reader", "foldpath", "foldmute", "foldfloor", "foldbypass", "foldappends"):
        (head,) = [i for i, line in enumerate(lines) if line.startswith(f"{subject:8s}: turn ")]
        assert re.search(
            r"added [+-]\d+\.\d us a turn \[95% [+-]\d+\.\d to [+-]\d+\.\d\] = ratio \d\.\d{3}", lines[head]
        )
        assert re.search(r"ratio of sums \d\.\d{3} \[95% \d\.\d{3}-\d\.\d{3}\]", lines[head])
        assert lines[head + 1].strip().startswith("8 pairs of turns (2 rounds of 4 after 3 + 1; seed 0)")
    # foldfloor's B sent its reader the turns by the floor's path (it counts its sends as the probe does), A none.
    (floor,) = [i for i, line in enumerate(lines) if line.startswith("foldfloor: turn ")]
    sends = re.search(
        r"sends on the agent's thread \(closes held back\): A (\d+) \(\d+\), B (\d+)", lines[floor + 2]
    )
    assert sends is not None and int(sends[1]) == 0 and int(sends[2]) > 0, lines[floor + 2]
    # foldbypass and its A/A: a fold reader on both twins (each sent its turns on the agent's thread), and
    # the agent's thread inside each twin's journal appends printed for every timed turn.
    for subject in ("foldbypass", "foldappends"):
        _appends_and_sends(lines, subject)


def _appends_and_sends(lines: list[str], subject: str) -> None:
    (bypass,) = [i for i, line in enumerate(lines) if line.startswith(f"{subject}: turn ")]
    appends = re.search(
        r"in the journal's appends .*: A \d+\.\d us a turn, B \d+\.\d; B - A median [+-]\d+\.\d us over (\d+) turns",
        lines[bypass + 2],
    )
    assert appends is not None and int(appends[1]) == 8, lines[bypass + 2]
    sends = re.search(
        r"sends on the agent's thread \(closes held back\): A (\d+) \(\d+\), B (\d+)", lines[bypass + 3]
    )
    assert sends is not None and int(sends[1]) > 0 and int(sends[2]) > 0, lines[bypass + 3]
