"""bench_engine.py --iso --split (benchmarks/engine_iso.py): where the whole trajectory's difference between the engine and
trim+memo lies. Its groups must add up to the difference it reports (less both sides' tokenizing), and
each turn must be put in the group its rule names: the first --warm turns, the later turns over twice
the later turns' median (the general path's), the rest (steady)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import engine_iso as be  # noqa: E402  (bench_engine's --ab and --iso)


def test_split_groups_add_up_to_the_trajectory_difference(capsys: pytest.CaptureFixture[str]) -> None:
    ms = 1e-3
    # Engine: turn 0 heavy, turn 5 a compaction (3x the later median rest), the others steady.
    e = [2.0 * ms, 0.5 * ms, 0.4 * ms, 0.3 * ms, 0.3 * ms, 0.9 * ms, 0.3 * ms]
    tk = [1.0 * ms, 0.2 * ms, 0.1 * ms, 0.0, 0.0, 0.0, 0.0]
    mm = [1.5 * ms, 0.4 * ms, 0.2 * ms, 0.1 * ms, 0.1 * ms, 0.1 * ms, 0.1 * ms]
    ptk = [1.2 * ms, 0.3 * ms, 0.1 * ms, 0.05 * ms, 0.05 * ms, 0.05 * ms, 0.05 * ms]
    be.split_turns(e, tk, mm, ptk, warm=2)
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if re.match(r"\s+\d+ ", ln)]
    assert len(rows) == len(e)
    assert [i for i, ln in enumerate(rows) if ln.endswith("(over 2x)")] == [5]
    total = re.search(
        r"whole trajectory ([+-][\d.]+) ms: tokenizing ([+-][\d.]+); without it first ([+-][\d.]+) \((\d+) turns\), "
        r"over 2x ([+-][\d.]+) \((\d+) turns\), steady ([+-][\d.]+) \((\d+) turns\)",
        out,
    )
    assert total is not None, out
    whole, tok, first, n_first, over, n_over, steady, n_steady = (float(x) for x in total.groups())
    assert (n_first, n_over, n_steady) == (2, 1, 4)
    assert whole == pytest.approx(1000 * (sum(e) - sum(mm)), abs=0.006)
    assert tok + first + over + steady == pytest.approx(whole, abs=0.02)
    # Turn 5: engine rest 0.9, peer rest 0.05.
    assert over == pytest.approx(0.85, abs=0.006)
