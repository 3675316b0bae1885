"""`cp-inspect report` and `simulate` fit the terminal they print on (inspector/cli_table.py).

`report` printed 91 columns and `simulate --policies all` 100 (`simulate FILE` 88), so at an 80-column
terminal every row wrapped onto a second line and no column lined up with its head. On a terminal
the tables now fit: report's session names give room first (cut in the middle), then the columns that
still do not fit go to a second table that repeats each row's name; prose lines wrap at the width. A
pipe gets every row whole on one line, whatever COLUMNS says, the same bytes as before."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest

from inspector.cli_table import Column, fitted, wrapped

ROOT = Path(__file__).resolve().parents[1]
DEMOS = sorted(str(p) for p in (ROOT / "demo_sessions").glob("*.cpsession"))
ANTHROPIC = str(ROOT / "demo_sessions" / "scout-anthropic.cpsession")


def _on_terminal(args: list[str], cols: int, env: dict[str, str] | None = None) -> list[str]:
    """`cp-inspect ARGS` run with its stdout on a pseudo-terminal `cols` wide: the lines it printed."""
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
        run_env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        run_env.update(env or {})
        proc = subprocess.Popen(
            [sys.executable, "-m", "inspector", *args],
            stdout=slave, stderr=subprocess.PIPE, cwd=ROOT, env=run_env,
        )  # fmt: skip
        os.close(slave)
        slave = -1
        got = b""
        while True:
            if select.select([master], [], [], 60)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # (the child closed its end: Linux says EIO)
                    chunk = b""
                if not chunk:
                    break
                got += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    return got.decode().replace("\r\n", "\n").splitlines()


def _piped(args: list[str], env: dict[str, str] | None = None) -> list[str]:
    run_env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    run_env.update(env or {})
    out = subprocess.run(
        [sys.executable, "-m", "inspector", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=run_env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_report_fits_an_80_column_terminal_and_a_pipe_keeps_whole_rows() -> None:
    lines = _on_terminal(["report", *DEMOS], 80)
    assert lines and max(map(len, lines)) <= 80, [ln for ln in lines if len(ln) > 80]
    head = lines[0]
    assert head.split() == [
        "SESSION",
        "CALLS",
        "PROMPT",
        "HIT",
        "BREAKS",
        "COST",
        "$",
        "ENGINE",
        "$",
        "SAVES",
    ]
    rows = lines[1:5]
    assert [r.split()[0] for r in rows] == [
        "scout-anthropic",
        "scout-gates-closed",
        "scout-openai.cpsession",
        "TOTAL",
    ]
    end = head.index("CALLS") + len("CALLS")
    assert [r[end - 3 : end] for r in rows] == [" 40", " 40", " 40", "120"], "under their head"
    assert any(ln.startswith("ENGINE $: what was paid") for ln in lines)
    assert any(ln.startswith("  ") and "simulator and prices)" in ln for ln in lines), "wrapped, indented"
    # A pipe: every row whole, as before (91 columns), even with COLUMNS set narrower.
    piped = _piped(["report", *DEMOS], {"COLUMNS": "60"})
    assert len(piped[0]) == 91 and piped[0].startswith("SESSION" + " " * 28 + "CALLS")
    assert piped[1].startswith("scout-anthropic.cpsession ")
    assert any(len(ln) > 140 and ln.startswith("ENGINE $:") for ln in piped), "prose not wrapped"


def test_simulate_policies_fits_an_80_column_terminal_in_two_tables() -> None:
    lines = _on_terminal(["simulate", ANTHROPIC, "--policies", "all"], 80)
    assert max(map(len, lines)) <= 80, [ln for ln in lines if len(ln) > 80]
    heads = [i for i, ln in enumerate(lines) if ln.startswith("policy ")]
    assert len(heads) == 2, lines
    first, second = lines[heads[0]].split(), lines[heads[1]].split()
    assert first[:3] == ["policy", "prompt", "tokens"] and second == ["policy", "compactions", "breaks"]
    names = [ln.split()[0] for ln in lines[heads[1] + 1 : heads[1] + 8]]
    assert names == [ln.split()[0] for ln in lines[heads[0] + 1 : heads[0] + 8]]
    assert "cost_aware" in names and "paper" in names
    piped = _piped(["simulate", ANTHROPIC, "--policies", "all"], {"COLUMNS": "80"})
    head = next(ln for ln in piped if ln.startswith("policy "))
    assert len(head) == 100 and head.endswith("compactions  breaks")


def test_simulate_fits_a_narrow_terminal() -> None:
    lines = _on_terminal(["simulate", ANTHROPIC], 72)
    assert max(map(len, lines)) <= 72, [ln for ln in lines if len(ln) > 72]
    tables = [ln for ln in lines if ln.strip().startswith("pipeline") or ln.strip().startswith("as_sent")]
    assert tables, lines
    cells = " ".join(lines)
    for column in ("pipeline", "gates_closed", "as_sent", "actual"):
        assert column in cells
    assert sum(1 for ln in lines if ln.startswith("cost (USD)")) == 2, "the row labels in both tables"


def test_fitted_keeps_whole_rows_without_a_width_and_splits_with_one() -> None:
    cols = [
        Column("name", ["a", "bb"], 6, left=True),
        Column("one", ["1", "22"], 6),
        Column("two", ["3", "4"], 6),
        Column("three", ["5", "6"], 8),
    ]
    assert fitted(cols, None) == [
        "name     one   two   three",
        "a          1     3       5",
        "bb        22     4       6",
    ]
    assert fitted(cols, 26) == fitted(cols, None)
    assert fitted(cols, 25) == [
        "name     one   two",
        "a          1     3",
        "bb        22     4",
        "",
        "name     three",
        "a            5",
        "bb           6",
    ]
    # A column too wide even beside the first alone is a table of its own (the terminal wraps it).
    assert fitted(cols, 10)[0::4] == ["name     one", "name     two", "name     three"]


@pytest.mark.parametrize("room", [None, 200])
def test_wrapped_leaves_a_line_that_fits(room: Any) -> None:
    line = "note: " + "word " * 30
    assert wrapped(line, room) == [line]
    got = wrapped(line, 40)
    assert max(map(len, got)) <= 40 and all(g.startswith("  ") for g in got[1:])
    assert " ".join(g.strip() for g in got) == line.strip()


def test_find_fits_its_snippets_to_the_terminal() -> None:
    """`find`'s rows carry a snippet of the text around the match (~110 columns a row on the demo): at 80
    columns each row wrapped under the next one's turn number. On a terminal the snippet is cut evenly
    at both ends (the match stays in view); a pipe gets it whole."""
    args = ["find", ANTHROPIC, "latch"]
    lines = _on_terminal(args, 80)
    assert max(map(len, lines)) <= 80, [ln for ln in lines if len(ln) > 80]
    rows = [ln for ln in lines if ln.startswith("  turn ")]
    piped = [ln for ln in _piped(args, {"COLUMNS": "80"}) if ln.startswith("  turn ")]
    assert len(rows) == len(piped) == 7 and max(map(len, piped)) > 100
    for cut, whole in zip(rows, piped, strict=True):
        if "enters" in whole or "again" in whole:
            assert "latch" in cut.lower() and cut.endswith("…"), cut
            kept = cut.split("  ")[-1].strip("…")
            assert kept in whole, (cut, whole)  # a piece of the same snippet
        else:
            assert cut == whole  # (a leaving row has no snippet)


@pytest.mark.parametrize(
    "args",
    [
        ["explain", ANTHROPIC, "--turn", "17", "--budget", "20000", "--gate", "drop_rounds=off"],
        ["diff", "recorded", "gate.drop_rounds=off", ANTHROPIC],
    ],
    ids=["explain", "diff"],
)
def test_explain_and_diff_wrap_their_long_lines_on_a_terminal(args: list[str]) -> None:
    """`explain`'s steps and `diff`'s turns ran to ~150-220 columns; a terminal wrapped them at column 0,
    under the next line's indent. On a terminal each is wrapped at spaces, its continuation indented
    past its own indent; a pipe keeps every line whole (the same words either way)."""
    lines = _on_terminal(args, 80)
    piped = _piped(args, {"COLUMNS": "80"})
    assert max(map(len, lines)) <= 80, [ln for ln in lines if len(ln) > 80]
    assert max(map(len, piped)) > 140
    assert " ".join(lines).split() == " ".join(piped).split()
    long = next(ln for ln in piped if len(ln) > 80)
    at = next(i for i, x in enumerate(lines) if x and long.startswith(x) and len(x) < len(long))
    indent = len(long) - len(long.lstrip(" "))
    assert lines[at + 1].startswith(" " * (indent + 4)) and lines[at + 1][indent + 4] != " "


def test_a_cut_snippet_keeps_its_match_in_view() -> None:
    """A snippet is taken around the section's last match, but a match near either end of its section has
    little on that side: cut evenly at both ends, the match itself went (a match at the start of a
    section lost its first letters)."""
    from inspector.cli_find import _fit

    at_start = "latch was flipped by the permission prompt at turn 3 and more text follows it"
    assert _fit(at_start, "latch", None) == at_start
    assert _fit(at_start, "latch", len(at_start)) == at_start
    got = _fit(at_start, "latch", 20)
    assert got.startswith("latch was") and got.endswith("…") and len(got) <= 20
    at_end = "…" + "a" * 50 + " LATCH"
    got = _fit(at_end, "latch", 20)
    assert got.endswith(" LATCH") and got.startswith("…") and len(got) <= 20
    middle = "…" + "x" * 40 + " the LATCH " + "y" * 40 + "…"
    got = _fit(middle, "latch", 21)
    assert "LATCH" in got and got[0] == got[-1] == "…" and len(got) <= 21


def test_ctx_get_explain_wraps_on_a_terminal(tmp_path: Path) -> None:
    """`ctx get --explain`'s manifest rows ran to ~105 columns; on a terminal they wrap at spaces, indented
    past the row. The same store read the same way (a store of its own for each side: a get advances
    the store's turn) says the same words piped, on whole lines."""
    dbs = []
    for side in ("tty", "pipe"):
        db = tmp_path / f"{side}.sqlite"
        _piped(["ctx", "import", ANTHROPIC, "--db", str(db)])
        dbs.append(db)
    args = ["ctx", "get", "--budget", "6000", "--explain", "--db"]
    lines = _on_terminal([*args, str(dbs[0])], 80)
    piped = _piped([*args, str(dbs[1])], {"COLUMNS": "80"})
    assert max(map(len, lines)) <= 80 < max(map(len, piped)), [ln for ln in lines if len(ln) > 80]
    assert " ".join(lines).split() == " ".join(piped).split()
