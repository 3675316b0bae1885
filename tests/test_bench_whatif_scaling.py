"""benchmarks/bench_whatif_scaling.py's reports patch simulate's internals in a child process (the build
pass, a column's simulation, each build by the config it is for): a move of those names (simulate.py was
split into simulate_*.py) would leave a report timing nothing, or naming no column. Each report is run
here, as the benchmark runs it, on a short session recorded by the real engine, and must name every
column the what-if builds and give each tenth a figure."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_whatif_scaling as bws  # noqa: E402

TURNS = 40


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("whatif_scaling")
    bws._recording(d, TURNS)  # made once, as the benchmark makes it per --dir
    return d


def _rows(out: str) -> dict[str, list[str]]:
    """A report's table rows: the first cell -> the other cells."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and not set(cells[1]) <= set("-:"):
            rows[cells[0]] = cells[1:]
    return rows


def test_builds_names_every_build_of_the_pass(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bws.builds_report([TURNS], folder)
    rows = _rows(capsys.readouterr().out)
    # The header, the fold, and a build for each column the pass builds (the what-if's own settings are
    # the recording's: pipeline and recorded are one build).
    assert {"fold", "pipeline + recorded", "gates_closed", "wave1", "cost_aware", "peers' view"} <= set(rows)
    assert "other" not in rows  # every build was told apart by its config
    for name in ("fold", "wave1", "peers' view"):
        tenths = [float(c.replace(",", "")) for c in rows[name][:10]]
        assert len(tenths) == 10 and all(x > 0 for x in tenths), (name, rows[name])


def test_tenths_times_every_column(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bws.tenths_report([TURNS], folder)
    rows = _rows(capsys.readouterr().out)
    # The build pass and each of the what-if's columns (every policy), each simulated call timed.
    assert {"build pass", "pipeline", "gates_closed", "paper", "clear_tool_uses", "wave1"} <= set(rows)
    assert all(float(c.replace(",", "")) > 0 for c in rows["build pass"][:10])


def test_report_options_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        bws.main(["--builds", "--tenths", "--turns", "10"])
    assert e.value.code == 2
    assert "separate reports" in capsys.readouterr().err


@pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="--instructions counts under valgrind's callgrind"
)
def test_instructions_counts_every_part_by_tenth(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Under callgrind, a dump at each mark the child makes: as many dumps as marks, each part's ten tenths
    (and a column's end) counted, and the what-if's total the sum of its parts."""
    bws.instructions_report([TURNS], folder)
    out = capsys.readouterr().out
    tables = out.split("\n\n")
    tenths, totals = _rows(tables[0]), _rows(tables[-1])
    assert {
        "build pass",
        "pipeline",
        "gates_closed",
        "paper",
        "clear_tool_uses",
        "wave1",
        "cost_aware",
    } <= set(tenths)
    for name in ("build pass", "pipeline", "clear_tool_uses"):
        assert all(float(c.replace(",", "")) > 0 for c in tenths[name][:10]), (name, tenths[name])
    assert "imports+open" in tables[0]
    parts = [float(c[0].replace(",", "")) for p, c in totals.items() if p not in ("part", "what-if")]
    assert abs(sum(parts) - float(totals["what-if"][0].replace(",", ""))) <= len(parts)  # (rounded to 1 M)
