"""benchmarks/bench_probe.py --flush-ab (issue 15 item 4's "probe's part of the agent's thread"): by default its
reader is what the inspector attaches to an agent's probe with, the live source on the fold stream
(LiveSource(fold=True): `cp-inspect attach`, top's Enter, `explain PID`), with the quiet elided ring reader
(the one it measured before, which `cp-inspect attach` no longer reads) beside it; `--flush-reader elide` keeps the
old figure reachable. Runs the mode end to end at a size with no timing meaning: what is checked is which
reader each mode attached and that the figures are printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import probe_flush_ab  # noqa: E402  (bench_probe --flush-ab's module)

FOLD = "(fold: the live source, as cp-inspect attach reads)"
ELIDE = "(elide: the quiet elided ring reader, not cp-inspect attach's)"


def flush_ab(*extra: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(REPO)
    cmd = [sys.executable, str(REPO / "benchmarks" / "bench_probe.py"), "--flush-ab", "0.01", "--rounds", "1"]
    cmd += ["--turns", "2", "--warmup", "2", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def mode_line(lines: list[str], mode: str) -> str:
    (line,) = [ln for ln in lines if ln.startswith(f"{mode:10s}: (")]
    assert re.search(r"added +[+-]?\d+\.\d us = [+-]?\d+\.\d\d% of the turn", line), line
    return line


def test_the_default_reader_is_the_one_cp_inspect_attach_reads() -> None:
    lines = flush_ab("--untraced")
    assert FOLD in mode_line(lines, "agent")
    assert ELIDE in mode_line(lines, "agent-elide")
    assert lines[-1].strip().endswith("the agent reads only each request's token count (--untraced))")


def test_the_elided_reader_stays_reachable_by_a_flag() -> None:
    lines = flush_ab("--flush-reader", "elide", "--flush-modes", "agent,agent-fold")
    assert ELIDE in mode_line(lines, "agent")
    assert FOLD in mode_line(lines, "agent-fold")
    assert lines[-1].strip().endswith("the agent reads each request's trace)")


@pytest.mark.parametrize(
    ("mode", "default", "reader"),
    [
        ("agent", "fold", "fold"),
        ("io", "fold", "fold"),
        ("agent", "elide", "elide"),
        ("agent-fold", "elide", "fold"),
        ("agent-elide", "fold", "elide"),
        # An elided reader's own tags (how it waits, what it asks for) and the agent's paths to such a
        # client mean that reader, as in the commands earlier sessions cite.
        ("agent-block-loud", "fold", "elide"),
        ("agent-socket", "fold", "elide"),
        ("agent-winding", "fold", "elide"),
        ("io-handoff", "fold", "elide"),
        ("agent-linger", "fold", "fold"),
        ("agent-bypass", "elide", "elide"),
        ("agent-bypass", "fold", "fold"),
    ],
)
def test_which_reader_a_mode_attaches(mode: str, default: str, reader: str) -> None:
    assert probe_flush_ab.flush_reader(mode, default) == reader
