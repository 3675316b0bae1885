"""The console script's direct path for plain `explain`, `verify`, `salvage`, `ps`, `ctx get`, `ctx add`,
`ctx expand`, `ctx import`, `diff`, `forks`, `report` and `eval` command lines
(inspector/cli_argv.py) hands each command exactly what typer's dispatch hands it, and the program answers
as under typer (output, messages, exit status), with neither typer nor pydantic imported when it succeeds.

The console script runs as a child process in every case (what it imports, its exit, its streams are the
point). typer's answer, what it is compared with, is made in this process (typer_in_process: a child for it
cost ~0.1-0.2 s of CPU a line in imports), and from a child process too for one line of each command and
path (LEGACY's cases: read directly and done, read directly and refused, left to typer), which must give
the same answer and import pydantic where the command succeeds."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inspector.cli as cli
import inspector.cli_ctx as cli_ctx
import inspector.cli_ctx_import as cli_ctx_import
import inspector.cli_diff as cli_diff
import inspector.cli_eval as cli_eval
import inspector.cli_explain as cli_explain
import inspector.cli_forks as cli_forks
import inspector.cli_ps as cli_ps
import inspector.cli_report as cli_report
import inspector.cli_salvage as cli_salvage
import inspector.cli_verify as cli_verify
from inspector.cli_argv import plain_command
from tests.support.console_script import (
    ENTRIES,
    SCRIPT,
    program,
    start_program,
    typer_in_process,
)

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
SYNTHETIC = ROOT / "tests" / "fixtures" / "synthetic"
T = TypeVar("T")

# Each command's work, as the typer command and the direct path call it: (module, function name).
WORK = {
    "explain": (cli_explain, "explain"),
    "verify": (cli_verify, "verify"),
    "salvage": (cli_salvage, "salvage"),
    "ps": (cli_ps, "ps"),
    "ctx get": (cli_ctx, "get"),
    "ctx add": (cli_ctx, "add"),
    "ctx expand": (cli_ctx, "expand"),
    "diff": (cli_diff, "diff"),
    "forks": (cli_forks, "forks"),
    "ctx import": (cli_ctx_import, "import_"),
    "report": (cli_report, "report"),
    "eval": (cli_eval, "eval_"),
}


def _record(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """Replace each command's work by a recorder of the arguments it is given."""
    calls: list[tuple[str, tuple[Any, ...]]] = []
    for name, (module, fn) in WORK.items():
        monkeypatch.setattr(module, fn, lambda *args, _name=name: calls.append((_name, args)))
    return calls


def _typer_hands(
    command: Any, argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, tuple[Any, ...]]] | None:
    """What typer's dispatch hands the command's work, or None when it refuses the command line."""
    calls = _record(monkeypatch)
    try:
        command.main(args=argv, prog_name="cp-inspect", standalone_mode=False)
    except (Exception, SystemExit):  # a usage error, help (its exit), explain's refusal of a second file
        return None
    return calls or None


def _direct_hands(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, tuple[Any, ...]]] | None:
    run = plain_command(argv, {})
    if run is None:
        return None
    calls = _record(monkeypatch)
    run()
    return calls


def _types(calls: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    return [[type(a) if not isinstance(a, list) else [type(v) for v in a] for a in args] for _, args in calls]


@pytest.fixture(scope="module")
def command() -> Any:
    return typer.main.get_command(cli.app)


FILES = ["a.cpsession", "dir/b c.cpsession", "é.cpsession", "5", "4242.1", "0"]
# Tokens typer reads its own way, or that a plain line never holds.
ODD = [
    "-3",
    "--",
    "-",
    "",
    "--help",
    "-h",
    "--bogus",
    "--turn",
    "--turn=",
    "--json=1",
    "--force=yes",
    "-o",
    "-ox.cpsession",
    "-o=x.cpsession",
    "--out",
    "--gate",
    "--budget",
    "--format",
    "surrogate\udcff.cpsession",
    "--turn=--json",
    "--budget=-",
    "explain",
    "--db",
    "--offset",
    "-1",
    "--importance",
    "--all=1",
    "get",
]
OPTIONS = {
    "explain": [
        ["--turn", "3"],
        ["--turn", "-1"],
        ["--turn=-2"],
        ["--turn", "+4"],
        ["--turn", "1_0"],
        ["--turn", "x"],
        ["--budget", "20k"],
        ["--budget=-5"],
        ["--budget", "1.5M"],
        ["--gate", "drop_rounds=off"],
        ["--gate=spill=on"],
        ["--threshold", "trim=0.5"],
        ["--threshold=compact=0.7"],
        ["--provider", "openai"],
        ["--provider=deepseek"],
        ["--format", "json"],
        ["--format=text"],
        ["--format", "xml"],
        ["--json"],
    ],
    "verify": [],
    "salvage": [["-o", "out.cpsession"], ["--out", "o u t.cpsession"], ["--out=x.cpsession"], ["--force"]],
    "ps": [["--json"]],
    "ctx get": [
        ["--budget", "-5"],
        ["--budget=1.5M"],
        ["--budget", "12,000"],
        ["--query", "fix the bug"],
        ["--query=x"],
        ["--model", "gpt-4o"],
        ["--model=chars"],
        ["--explain"],
        ["--json"],
        ["--fresh"],
        ["--db", "other.sqlite"],
    ],
    "ctx add": [
        ["--kind", "memory"],
        ["--kind=tool_result"],
        ["--pin"],
        ["--importance", "0.5"],
        ["--importance=1"],
        ["--importance", "x"],
        ["--importance", "-0.5"],
        ["--importance", "1_0"],
        ["--source", "call_1"],
        ["--source=a.py"],
    ],
    "ctx expand": [
        ["--offset", "100"],
        ["--offset", "-1"],
        ["--offset=x"],
        ["--offset", "1,000"],
        ["--limit", "10"],
        ["--limit=-3"],
        ["--limit", "1.5"],
        ["--all"],
    ],
    "diff": [
        ["--json"],
        ["--markdown"],
        ["--all"],
        ["--fail-on", "cache-break"],
        ["--fail-on=cost:+5%"],
        ["--prices", "p.json"],
        ["--prices=x y.json"],
    ],
    "forks": [["--json"], ["--prices", "p.json"], ["--prices=x y.json"]],
    "ctx import": [["--format", "swe-agent"], ["--format=cpsession"], ["--again"], ["--db", "other.sqlite"]],
    "report": [
        ["--json"],
        ["--window", "20k"],
        ["--window=-5"],
        ["--window", "1.5M"],
        ["--svg", "c.svg"],
        ["--svg=x y.svg"],
        ["--model", "gpt-4o"],
        ["--model=claude-sonnet-4"],
        ["--prices", "p.json"],
        ["--prices=x y.json"],
    ],
    "eval": [["--json"], ["--per-trajectory"], ["--trajectories", "t"], ["--trajectories=x y"]],
}
# The ctx commands' arguments, and their required options (each left out now and then).
ARGUMENTS = {
    "ctx get": ["5", "x"],
    "ctx add": ["hello", "two words", "-", "é"],
    "ctx expand": ["5", "+5", "1,000", "x", "0", "1e3"],
    "forks": FILES,
    "diff": ["recorded", "gate.drop_rounds=off", "a.cpsession", "window=8000", "b c.cpsession"],
    "ctx import": FILES,
    "report": [*FILES, "runs/", "demo_sessions/*.cpsession"],
    "eval": FILES,
}
REQUIRED = {
    "ctx get": [["--db", "s.sqlite"], ["--budget", "12k"]],
    "ctx add": [["--db=d/s.sqlite"]],
    "ctx expand": [["--db", "s.sqlite"]],
    "diff": [],
    "forks": [],
    "ctx import": [["--db", "s.sqlite"]],
    "report": [],
    "eval": [],
}


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """Mostly lines people type (arguments and options in any order, options now and then repeated), now
    and then with odd tokens."""
    name = draw(st.sampled_from(sorted(OPTIONS)))
    if name in ARGUMENTS:
        parts = [
            [a]
            for a in draw(
                st.lists(
                    st.sampled_from(ARGUMENTS[name]), max_size=4 if name in ("diff", "forks", "report") else 2
                )
            )
        ]
        parts += [part for part in REQUIRED[name] if draw(st.integers(0, 9))]
    else:
        parts = [
            [f]
            for f in draw(
                st.lists(
                    st.sampled_from(FILES),
                    min_size=0 if name == "ps" else 1,
                    max_size=1 if name == "ps" else 2,
                )
            )
        ]
    if OPTIONS[name]:
        parts += draw(st.lists(st.sampled_from(OPTIONS[name]), max_size=4))
    parts += [[t] for t in draw(st.lists(st.sampled_from(ODD), max_size=2))]
    order = draw(st.permutations(parts))
    return [*name.split(), *(token for part in order for token in part)]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command_lines())
def test_a_plain_command_line_reads_as_typer_reads_it(
    command: Any, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    direct = _direct_hands(argv, monkeypatch)
    if direct is not None:  # read directly only if typer hands the command the same values (and types)
        typed = _typer_hands(command, argv, monkeypatch)
        assert typed == direct
        assert _types(typed) == _types(direct)


@pytest.mark.parametrize(
    "argv",
    [
        ["explain", "a.cpsession"],
        ["explain", "a.cpsession", "--format", "json"],
        [
            "explain",
            "a.cpsession",
            "--turn",
            "-1",
            "--budget",
            "20k",
            "--gate",
            "drop_rounds=off",
            "--gate=spill=on",
        ],
        ["explain", "--json", "4242", "--threshold", "trim=0.5", "--provider", "openai"],
        ["verify", "a.cpsession"],
        ["salvage", "a.cpsession", "-o", "b.cpsession", "--force"],
        ["salvage", "--out=b.cpsession", "a.cpsession"],
        ["ps"],
        ["ps", "--json"],
        ["ctx", "get", "--db", "ctx.sqlite", "--budget", "12k"],
        [
            "ctx",
            "get",
            "--db=ctx.sqlite",
            "--budget",
            "1.5M",
            "--query",
            "fix the bug",
            "--explain",
            "--model",
            "chars",
        ],
        ["ctx", "get", "--json", "--fresh", "--budget=-5", "--db", "s.sqlite"],
        ["ctx", "add", "--db", "ctx.sqlite", "--kind", "memory", "--pin", "The build runs on Python 3.11."],
        ["ctx", "add", "--db", "ctx.sqlite", "-", "--importance", "0.8", "--source", "call_7"],
        ["ctx", "add", "--db", "ctx.sqlite"],
        ["ctx", "expand", "--db", "ctx.sqlite", "5"],
        ["ctx", "expand", "--db", "ctx.sqlite", "+5", "--offset", "1,000", "--limit=-3"],
        ["ctx", "expand", "--all", "--db", "ctx.sqlite", "12"],
        ["diff", "recorded", "gate.drop_rounds=off", "a.cpsession"],
        ["diff", "main.cpsession", "branch.cpsession", "--fail-on", "cache-break", "--markdown"],
        [
            "diff",
            "recorded",
            "window=8000",
            "a.cpsession",
            "b.cpsession",
            "--json",
            "--fail-on=cost:+5%",
            "--fail-on",
            "tokens:+1%",
            "--prices",
            "p.json",
        ],
        ["forks", "a.cpsession"],
        ["forks", "--json", "a.cpsession", "b.cpsession", "c.cpsession", "--prices=p.json"],
        ["ctx", "import", "a.cpsession", "--db", "ctx.sqlite"],
        ["ctx", "import", "--db=s.sqlite", "--again", "t.traj"],
        ["ctx", "import", "t.json", "--db", "ctx.sqlite", "--format", "swe-agent"],
        ["report", "a.cpsession"],
        ["report", "runs/", "--json"],
        [
            "report",
            "demo_sessions/*.cpsession",
            "b.cpsession",
            "--window",
            "20k",
            "--svg",
            "cost.svg",
            "--model",
            "gpt-4o",
            "--prices=p.json",
        ],
        ["eval"],
        ["eval", "--json"],
        ["eval", "--trajectories", "t", "--per-trajectory"],
    ],
)
def test_the_lines_people_type_are_read_directly(
    command: Any, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    direct = _direct_hands(argv, monkeypatch)
    assert direct is not None and direct == _typer_hands(command, argv, monkeypatch)


@pytest.mark.parametrize(
    "argv",
    [
        ["explain"],
        ["explain", "--help"],
        ["explain", "a", "b"],
        ["explain", "a", "--turn"],
        ["explain", "a", "--bogus"],
        ["explain", "a", "--format", "json", "--format", "text"],
        ["explain", "a", "--json=1"],
        ["explain", "--", "a"],
        ["explain", "a", "--provider", "--json"],
        ["verify"],
        ["verify", "a", "b"],
        ["verify", "--help"],
        ["salvage", "a"],
        ["salvage", "a", "-ob"],
        ["salvage", "a", "-o=b"],
        ["salvage", "a", "-o", "b", "--out", "c"],
        ["ps", "x"],
        ["ps", "--json", "--json"],
        ["ps", "-h"],
        ["import", "auto", "a"],
        [],
        ["ctx"],
        ["ctx", "--help"],
        ["ctx", "get"],
        ["ctx", "get", "--db", "s"],
        ["ctx", "get", "--budget", "5"],
        ["ctx", "get", "--db", "s", "--budget", "5", "--help"],
        ["ctx", "get", "--db", "s", "--budget", "5", "x"],
        ["ctx", "get", "--db", "s", "--budget"],
        ["ctx", "get", "--db", "s", "--budget", "5", "--json=1"],
        ["ctx", "get", "--db", "s", "--db", "t", "--budget", "5"],
        ["ctx", "reindex", "--db", "s"],
        ["ctx", "add", "--db", "s", "a", "b"],
        ["ctx", "add", "--db", "s", "--importance", "x"],
        ["ctx", "add", "a"],
        ["ctx", "add", "--db", "s", "--", "-a"],
        ["ctx", "expand", "--db", "s"],
        ["ctx", "expand", "--db", "s", "-1"],
        ["ctx", "expand", "--db", "s", "x"],
        ["ctx", "expand", "--db", "s", "5", "6"],
        ["ctx", "expand", "--db", "s", "5", "--offset", "1.5"],
        ["diff"],
        ["diff", "recorded"],
        ["diff", "a", "b", "--help"],
        ["diff", "a", "b", "--json", "--json"],
        ["diff", "a", "b", "--prices"],
        ["diff", "a", "b", "--", "c"],
        ["diff", "a", "-b"],
        ["forks"],
        ["forks", "--json"],
        ["forks", "a", "--help"],
        ["forks", "a", "--all"],
        ["ctx", "import", "a"],
        ["ctx", "import", "--db", "s"],
        ["ctx", "import", "a", "b", "--db", "s"],
        ["ctx", "import", "a", "--db", "s", "--help"],
        ["ctx", "import", "-", "--db", "s"],
        ["ctx", "import", "a", "--db", "s", "--again=1"],
        ["ctx", "import", "a", "--db", "s", "--format"],
        ["report"],
        ["report", "--json"],
        ["report", "a", "--help"],
        ["report", "a", "--window"],
        ["report", "a", "--json", "--json"],
        ["report", "a", "--", "b"],
        ["report", "-a"],
        ["report", "a", "--all"],
        ["eval", "x"],
        ["eval", "--help"],
        ["eval", "--trajectories"],
        ["eval", "--json=1"],
        ["eval", "--trajectories", "a", "--trajectories", "b"],
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert plain_command(argv, {}) is None


def test_shell_completion_is_left_to_typer() -> None:
    assert plain_command(["verify", "a"], {"_CP_INSPECT_COMPLETE": "bash_complete"}) is None


# ---- the program as the console script runs it, against typer's dispatch of the same line ---------

RUN = program(modules=("pydantic", "typer"))


def _start(
    argv: list[str], entry: str, typer_dispatch: bool, home: Path
) -> Callable[[], subprocess.CompletedProcess[str]]:
    # XDG_RUNTIME_DIR: ps looks for agents in a directory of the test's own (none run there).
    return start_program(
        RUN, argv, entry=entry, typer_dispatch=typer_dispatch, cwd=home, env={"XDG_RUNTIME_DIR": str(home)}
    )


# The console script (SCRIPT, what `cp-inspect` runs) answers every case. The other entry, a console script
# installed as `inspector.cli:app` before entry.py existed, reaches the same run_plain_command with typer
# already imported (inspector/cli.py's CommandLine.__call__): what differs is the entry, not the command
# line, so it answers one case of each command and each path there (read directly and done, read directly
# and refused, left to typer): 35 cases, not 165 (each a process: ~30% of this file's CPU).
LEGACY = next(e for e in ENTRIES if e != SCRIPT)
_REFUSED = ("/no/such", "nosuch", "lots", "bogus", "-5", "xml", "pyproject.toml", "none", "empty", "bad")


def _path(argv: list[str]) -> tuple[str, str]:
    """The command (ctx's with its subcommand) and the path its line takes, for LEGACY's cases."""
    command = " ".join(argv[:2]) if argv[0] == "ctx" else argv[0]
    if plain_command(argv, {}) is None:
        return command, "typer"
    return command, "refused" if any(bad in " ".join(argv) for bad in _REFUSED) else "direct"


def by_entry(cases: list[T]) -> list[tuple[T, str]]:
    """(case, entry) for every case under SCRIPT and the first of each _path under LEGACY."""
    first: dict[tuple[str, str], T] = {}
    for case in cases:
        argv: list[str] = case[0] if isinstance(case, tuple) else case  # type: ignore[assignment]
        first.setdefault(_path(argv), case)
    legacy = [c for c in cases if any(c is f for f in first.values())]
    return [(c, SCRIPT) for c in cases] + [(c, LEGACY) for c in legacy]


def _same_but_timing(text: str) -> str:
    return re.sub(r"\(\d+ ms\)", "(N ms)", text)  # verify's measured time


CASES = [
    ["explain", str(DEMO), "--format", "json"],
    ["explain", str(DEMO), "--turn", "-3", "--budget", "20k", "--gate", "drop_rounds=off"],
    ["explain", str(DEMO), "--turn", "17", "--threshold", "trim=0.5", "--provider", "openai", "--json"],
    ["explain", "/no/such/file.cpsession"],
    ["explain", str(DEMO), "--turn", "abc"],  # a wrong type, said by explain itself
    ["explain", str(DEMO), "--turn", "999"],
    ["explain", str(DEMO), "--budget", "lots"],
    ["explain", str(DEMO), "--budget", "-5"],
    ["explain", str(DEMO), "--format", "xml"],
    ["explain", str(DEMO), "--format", "text", "--json"],
    ["explain", str(DEMO), "--gate", "nosuchgate=off"],
    ["explain", str(DEMO), "--threshold", "trim"],
    ["explain", str(DEMO), "--provider", "nosuch"],
    ["explain", str(ROOT / "demo_sessions")],  # a directory
    ["explain", str(ROOT / "pyproject.toml")],  # not a recording
    ["explain", str(DEMO), str(DEMO)],  # left to typer, answered by explain's own line
    ["explain", str(DEMO), "--bogus"],  # bad flags: typer's answers either way
    ["explain", str(DEMO), "--turn"],
    ["explain"],
    ["explain", "--help"],
    ["verify", str(DEMO)],
    ["verify", "/no/such/file.cpsession"],
    ["verify", str(ROOT / "pyproject.toml")],
    ["verify", "--help"],
    ["salvage", str(DEMO), "-o", "copy.cpsession"],
    ["salvage", str(DEMO), "-o", str(DEMO)],  # exists, no --force
    ["salvage", "/no/such/file.cpsession", "--out", "x.cpsession"],
    ["salvage", str(DEMO)],  # no -o
    ["ps", "--json"],
    ["ps"],
    ["ps", "--help"],
    ["diff", "recorded", "gate.drop_rounds=off", str(DEMO)],
    ["diff", "recorded", "window=8000", str(DEMO), "--json", "--fail-on", "cache-break"],
    [
        "diff",
        "recorded",
        "window=8000",
        str(DEMO),
        "--markdown",
        "--fail-on",
        "tokens:+1%",
        "--fail-on=cost:+1%",
    ],
    ["diff", "recorded", "window=8000", str(DEMO), "--fail-on", "tokens:-1%", "--all"],
    ["diff", "recorded", "window=8000", str(DEMO), "--fail-on", "nosuchgate"],
    [
        "diff",
        "recorded",
        "gate.drop_rounds=off",
        str(DEMO),
        "--fail-on",
        "tokens:+0%",
        "--fail-on",
        "cache-break",
    ],
    [
        "diff",
        "recorded",
        "window=4000",
        str(DEMO),
        "--json",
        "--fail-on",
        "cache-break",
    ],  # a gate fails: exit 1
    ["diff", "recorded", "gate.drop_rounds=off", str(DEMO), "--json", "--markdown"],
    ["diff", "recorded", "gate.drop_rounds=off", str(DEMO), "--all", "--json"],
    ["diff", "recorded", "gate.drop_rounds=off", str(DEMO), "--prices", "nosuch.json"],
    ["diff", "recorded", "gate.drop_rounds=off", "/no/such/file.cpsession"],
    ["diff", "recorded", "bogus=1", str(DEMO)],
    ["diff", "recorded", "gate.drop_rounds=off", str(ROOT / "pyproject.toml")],
    ["diff", "recorded"],  # left to typer
    ["diff", "--help"],
    ["forks", str(DEMO)],  # a recording that forked nothing: a tree of one, exit 0
    ["forks", str(DEMO), "--json"],
    ["forks", str(DEMO), str(DEMO)],  # a child that is no sub-agent of it
    ["forks", "/no/such/file.cpsession"],
    ["forks", str(ROOT / "pyproject.toml")],
    ["forks", str(DEMO), "--prices", "nosuch.json"],
    ["forks"],  # left to typer
    ["report", str(DEMO)],
    [
        "report",
        str(DEMO),
        str(ROOT / "demo_sessions" / "scout-openai.cpsession"),
        "--json",
        "--window",
        "20k",
    ],
    [
        "report",
        str(ROOT / "demo_sessions"),
        "--svg",
        "cost.svg",
    ],  # a directory: each recording in it; a chart
    ["report", str(ROOT / "demo_sessions" / "*.cpsession"), "--model", "gpt-4o", "--window=1.5M"],  # a glob
    ["report", str(DEMO), "--window", "lots"],
    ["report", str(DEMO), "--window", "-5"],
    ["report", str(DEMO), "--svg", str(ROOT / "demo_sessions")],
    ["report", str(DEMO), "--svg", "nodir/cost.svg"],
    ["report", str(DEMO), "--model", "nosuch-model"],
    ["report", str(DEMO), "--prices", "nosuch.json"],
    ["report", "/no/such/file.cpsession"],
    ["report", "/no/such/*.cpsession"],
    ["report", str(ROOT / "pyproject.toml")],  # nothing could be reported: exit 1
    ["report", str(DEMO), str(ROOT / "pyproject.toml"), "--json"],  # one skipped (a yellow line), exit 0
    ["report"],  # left to typer
    ["report", "--help"],
]


def _case_id(argv: list[str]) -> str:
    return " ".join(Path(t).name if "/" in t else t for t in argv)


@pytest.mark.parametrize(("argv", "entry"), by_entry(CASES), ids=lambda c: c if isinstance(c, str) else _case_id(c))
def test_the_console_script_answers_as_typer_does(argv: list[str], entry: str, tmp_path: Path) -> None:
    (tmp_path / "direct").mkdir()
    direct_run = _start(argv, entry, typer_dispatch=False, home=tmp_path / "direct")  # beside typer's

    def typer_answer(typed: subprocess.CompletedProcess[str], home: Path) -> tuple[Any, ...]:
        err = typed.stderr.replace(str(home), "HOME").splitlines()
        written: dict[str, bytes] = {
            name: (home / name).read_bytes() for name in ("copy.cpsession", "cost.svg") if name in argv
        }
        return typed.returncode, err, _same_but_timing(typed.stdout), written

    home = tmp_path / "typer"
    home.mkdir()
    typed_code, typed_err, typed_out, typed_files = typer_answer(
        typer_in_process(argv, cwd=home, env={"XDG_RUNTIME_DIR": str(home)}), home
    )
    if entry == LEGACY:  # typer's answer from a child process, as the console script's is made
        child_home = tmp_path / "typer-child"
        child_home.mkdir()
        child = _start(argv, entry, typer_dispatch=True, home=child_home)()
        *child_err, child_mods = child.stderr.splitlines()
        child.stderr = "\n".join(child_err)
        assert typer_answer(child, child_home) == (typed_code, typed_err, typed_out, typed_files)
        assert "pydantic" in json.loads(child_mods) or child.returncode != 0 or argv[-1] == "--help"
    direct = direct_run()
    # Each side runs in a directory of its own, which a message about a relative path names.
    *direct_err, direct_mods = direct.stderr.replace(str(tmp_path / "direct"), "HOME").splitlines()
    assert (direct.returncode, direct_err) == (typed_code, typed_err)
    assert _same_but_timing(direct.stdout) == typed_out
    for written, data in typed_files.items():  # the same file written either way
        assert (tmp_path / "direct" / written).read_bytes() == data
    if entry == SCRIPT and plain_command(argv, {}) is not None:
        # Read directly: pydantic never imported, nor typer unless the command fails (fail() prints and
        # exits through it), verify reports a mismatch or report skips a recording (its yellow line).
        skipped = any(line.startswith("cp-inspect: warning: skipped") for line in direct_err)
        assert json.loads(direct_mods) == ([] if direct.returncode == 0 and not skipped else ["typer"])


# Both paths print through cli_output.echo (the commands' work is shared), so it is held to typer.echo here.
ECHO = r"""
import json, sys
texts = json.loads(sys.argv[1])
if sys.argv[2] == "typer":
    import typer
    for t in texts:
        typer.echo(t)
        typer.echo(t, err=True)
else:
    from inspector.cli_output import echo
    for t in texts:
        echo(t)
        echo(t, err=True)
"""


@pytest.mark.parametrize("encoding", ["utf-8", "ascii", "latin-1"])
def test_echo_writes_what_typer_echo_writes(encoding: str) -> None:
    texts = [
        "ok: 3 turns",
        "",
        "two\nlines",
        "é ünïcode ß",
        "\x1b[31mred\x1b[0m and \x1b]8;;x\x1b\\",
        "tab\there",
        json.dumps({"a": [1, 2]}, indent=2),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING=encoding)
    outs = [
        subprocess.run(
            [sys.executable, "-c", ECHO, json.dumps(texts), side], capture_output=True, env=env, timeout=120
        )
        for side in ("typer", "ours")
    ]
    assert [(o.returncode, o.stdout, o.stderr) for o in outs[1:]] == [
        (outs[0].returncode, outs[0].stdout, outs[0].stderr)
    ]


# ---- ctx get / add / expand on a store made from the demo recording, run in a directory of its own ----


def _store_rows(db: Path) -> dict[str, list[Any]] | None:
    """Every row of the store's own tables (an added item's time stamp left out), or None when there is no
    store file: what a command left in it."""
    if not db.is_file() or not db.stat().st_size:
        return None
    con = sqlite3.connect(db)
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND sql NOT LIKE "
                "'CREATE VIRTUAL%' AND name NOT LIKE 'items_fts%'"
            )
        ]
        rows = {t: sorted(map(repr, con.execute(f"SELECT * FROM '{t}'"))) for t in tables if t != "items"}
        rows["items"] = list(
            con.execute(
                "SELECT id, kind, body, hash, turn, source, file_hash, pinned, importance "
                "FROM items ORDER BY id"
            )
        )
        rows["search"] = list(
            con.execute("SELECT rowid FROM items_fts WHERE items_fts MATCH 'repository' ORDER BY rowid")
        )
        return rows
    finally:
        con.close()


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from typer.testing import CliRunner

    from inspector.ctx_cli import ctx_app

    db = tmp_path_factory.mktemp("store") / "ctx.sqlite"
    done = CliRunner().invoke(ctx_app, ["import", str(DEMO), "--db", str(db)])
    assert done.exit_code == 0, done.output
    return db


DB = ["--db", "ctx.sqlite"]
# (argv, stdin): `ctx.sqlite` is a copy of the demo's store in the run's directory, `empty.sqlite` an empty file.
CTX_CASES: list[tuple[list[str], str]] = [
    (["ctx", "get", *DB, "--budget", "2k"], ""),  # sticky: records its window, moves the turn
    (["ctx", "get", *DB, "--budget", "12k", "--explain"], ""),
    (["ctx", "get", *DB, "--budget", "3,000", "--json", "--query", "test failure"], ""),
    (["ctx", "get", "--fresh", "--model", "chars", "--budget=1.5k", *DB], ""),
    (["ctx", "get", *DB, "--budget", "lots"], ""),
    (["ctx", "get", *DB, "--budget", "-5"], ""),
    (["ctx", "get", *DB, "--budget", "3"], ""),  # too small for one message
    (["ctx", "get", *DB, "--budget", "99M"], ""),
    (["ctx", "get", *DB, "--budget", "2k", "--json", "--explain"], ""),
    (["ctx", "get", "--db", "nosuch.sqlite", "--budget", "2k"], ""),
    (["ctx", "get", "--db", ".", "--budget", "2k"], ""),
    (["ctx", "get", "--db", "empty.sqlite", "--budget", "2k"], ""),
    (["ctx", "get", "--db", "nodir/ctx.sqlite", "--budget", "2k"], ""),
    (["ctx", "get", *DB], ""),  # left to typer: no --budget
    (["ctx", "get", *DB, "--budget"], ""),
    (["ctx", "get", *DB, "--budget", "2k", "--bogus"], ""),
    (["ctx", "get", *DB, "--budget", "2k", "extra"], ""),
    (["ctx", "get", "--help"], ""),
    (["ctx", "add", *DB, "--kind", "memory", "--pin", "The build runs on Python 3.11."], ""),
    (["ctx", "add", *DB, "-", "--importance", "0.8", "--source", "call_7"], "piped tool output\n"),
    (["ctx", "add", *DB, "--kind=tool_result"], "read from stdin"),
    (["ctx", "add", "--db", "new.sqlite", "first item"], ""),  # makes a store
    (["ctx", "add", *DB], ""),  # nothing piped in: empty text
    (["ctx", "add", *DB, "--kind", "bogus", "x"], ""),
    (["ctx", "add", *DB, "--importance", "2", "x"], ""),
    (["ctx", "add", *DB, "--importance", "nan", "x"], ""),
    (["ctx", "add", *DB, "--importance", "x", "x"], ""),  # left to typer: its parser's line
    (["ctx", "add", *DB, "--kind", "file_read", "--source", "missing.py"], ""),
    (["ctx", "add", "--db", "nodir/ctx.sqlite", "x"], ""),
    (["ctx", "add", "--db", ".", "x"], ""),
    (["ctx", "add", *DB, "a", "b"], ""),
    (["ctx", "expand", *DB, "5"], ""),
    (["ctx", "expand", *DB, "5", "--limit", "30"], ""),
    (["ctx", "expand", *DB, "5", "--offset", "30", "--limit", "10"], ""),
    (["ctx", "expand", *DB, "+5", "--offset", "1,000"], ""),
    (["ctx", "expand", *DB, "5", "--all"], ""),
    (["ctx", "expand", *DB, "9999"], ""),
    (["ctx", "expand", *DB, "0"], ""),
    (["ctx", "expand", *DB, "5", "--all", "--limit", "3"], ""),
    (["ctx", "expand", *DB, "5", "--offset", "-1"], ""),
    (["ctx", "expand", *DB, "5", "--limit", "0"], ""),
    (["ctx", "expand", "--db", "nosuch.sqlite", "5"], ""),
    (["ctx", "expand", *DB, "x"], ""),  # left to typer
    (["ctx", "expand", *DB, "-1"], ""),
    (["ctx", "expand", *DB], ""),
    (["ctx", "import", str(DEMO), "--db", "new.sqlite"], ""),  # makes a store
    (["ctx", "import", str(DEMO), *DB], ""),  # the store holds it already: refused
    (["ctx", "import", "--again", str(DEMO), *DB], ""),
    (["ctx", "import", str(DEMO), "--db", "new.sqlite", "--format", "cpsession"], ""),
    (["ctx", "import", str(SYNTHETIC / "proxy_openai.jsonl"), *DB], ""),  # a trajectory, sniffed
    (
        [
            "ctx",
            "import",
            str(SYNTHETIC / "proxy_openai.jsonl"),
            "--db=new.sqlite",
            "--format",
            "proxy-jsonl",
        ],
        "",
    ),
    (
        ["ctx", "import", str(SYNTHETIC / "proxy_openai.jsonl"), *DB, "--format", "swe-agent"],
        "",
    ),  # the wrong one
    (["ctx", "import", str(SYNTHETIC / "mini_truncated.traj.json"), *DB], ""),  # damaged: exit 1
    (["ctx", "import", str(DEMO), *DB, "--format", "nosuch"], ""),
    (["ctx", "import", str(ROOT / "pyproject.toml"), *DB], ""),
    (["ctx", "import", "/no/such.cpsession", *DB], ""),
    (["ctx", "import", str(ROOT / "demo_sessions"), *DB], ""),  # a directory
    (["ctx", "import", str(DEMO), "--db", "nodir/ctx.sqlite"], ""),
    (["ctx", "import", str(DEMO), "--db", "."], ""),
    (["ctx", "import", str(DEMO), "--db", "empty.sqlite"], ""),
    (["ctx", "import", str(DEMO)], ""),  # left to typer: no --db
    (["ctx", "import", "--help"], ""),
]


@pytest.mark.parametrize(
    ("case", "entry"), by_entry(CTX_CASES), ids=lambda c: c if isinstance(c, str) else " ".join(c[0][1:])
)
def test_the_ctx_commands_answer_and_store_as_under_typer(
    case: tuple[list[str], str], entry: str, tmp_path: Path, demo_store: Path
) -> None:
    argv, stdin = case

    def home(side: str) -> Path:
        home = tmp_path / side
        home.mkdir()
        shutil.copy(demo_store, home / "ctx.sqlite")
        (home / "empty.sqlite").touch()
        return home

    def start(side: str) -> Callable[[], subprocess.CompletedProcess[str]]:
        typer_dispatch = side != "direct"
        return start_program(RUN, argv, entry=entry, typer_dispatch=typer_dispatch, cwd=home(side), input=stdin)

    def rows(side: str) -> list[Any]:
        return [_store_rows(tmp_path / side / name) for name in ("ctx.sqlite", "new.sqlite")]

    direct_run = start("direct")  # beside typer's
    typed = typer_in_process(argv, cwd=home("typer"), input=stdin)
    typed_code, typed_err, typed_out = typed.returncode, typed.stderr.splitlines(), typed.stdout
    typed_rows = rows("typer")
    if entry == LEGACY:  # typer's answer from a child process, as the console script's is made
        child = start("typer-child")()
        *child_err, child_mods = child.stderr.splitlines()
        assert (child.returncode, child_err, child.stdout) == (typed_code, typed_err, typed_out)
        assert rows("typer-child") == typed_rows
        assert "pydantic" in json.loads(child_mods) or child.returncode != 0 or argv[-1] == "--help"
    direct = direct_run()
    *direct_err, direct_mods = direct.stderr.splitlines()
    assert (direct.returncode, direct_err, direct.stdout) == (typed_code, typed_err, typed_out)
    # What the command left in the store, either way.
    assert [_store_rows(tmp_path / "direct" / name) for name in ("ctx.sqlite", "new.sqlite")] == typed_rows
    if entry == SCRIPT and plain_command(argv, {}) is not None:
        assert json.loads(direct_mods) == ([] if direct.returncode == 0 else ["typer"])


# `eval` in a directory holding t/ (one readable trajectory), bad/ (one that is not), empty/ (none);
# the default folder ($CONTEXTPIPE_TRAJECTORIES) is t/ or a missing one.
EVAL_CASES: list[tuple[list[str], str]] = [
    (["eval", "--trajectories", "t"], "absent"),
    (["eval", "--trajectories=t", "--json"], "absent"),
    (["eval", "--per-trajectory", "--trajectories", "t"], "absent"),
    (["eval"], "t"),
    (["eval", "--json"], "absent"),  # no trajectories: skipped, exit 0
    (["eval"], "absent"),
    (["eval", "--trajectories", "none"], "t"),
    (["eval", "--trajectories", "empty"], "t"),
    (["eval", "--trajectories", "bad", "--json"], "t"),
    (["eval", "--trajectories", "t", "x"], "t"),  # left to typer
    (["eval", "--help"], "t"),
]


@pytest.mark.parametrize(
    ("case", "entry"), by_entry(EVAL_CASES), ids=lambda c: c if isinstance(c, str) else " ".join([*c[0][1:], c[1]])
)
def test_eval_answers_as_under_typer(case: tuple[list[str], str], entry: str, tmp_path: Path) -> None:
    argv, default = case
    for name, fixture in (
        ("t", "mini_repr_strings.traj.json"),
        ("bad", "mini_bad_role.traj.json"),
        ("empty", None),
    ):
        (tmp_path / name).mkdir()
        if fixture is not None:
            shutil.copy(SYNTHETIC / fixture, tmp_path / name / fixture)
    env = {"CONTEXTPIPE_TRAJECTORIES": str(tmp_path / default)}
    direct_run = start_program(RUN, argv, entry=entry, typer_dispatch=False, cwd=tmp_path, env=env)
    typed = typer_in_process(argv, cwd=tmp_path, env=env)
    typed_err = typed.stderr.splitlines()
    if entry == LEGACY:  # typer's answer from a child process, as the console script's is made
        child = start_program(RUN, argv, entry=entry, typer_dispatch=True, cwd=tmp_path, env=env)()
        *child_err, child_mods = child.stderr.splitlines()
        assert (child.returncode, child_err, child.stdout) == (typed.returncode, typed_err, typed.stdout)
        assert "pydantic" in json.loads(child_mods) or child.returncode != 0 or argv[-1] == "--help"
    direct = direct_run()
    *direct_err, direct_mods = direct.stderr.splitlines()
    assert (direct.returncode, direct_err, direct.stdout) == (typed.returncode, typed_err, typed.stdout)
    if entry == SCRIPT and plain_command(argv, {}) is not None:
        assert json.loads(direct_mods) == ([] if direct.returncode == 0 else ["typer"])


@pytest.fixture(scope="module")
def fork_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    from tests.support.fork_tree import run_tree

    return run_tree(tmp_path_factory.mktemp("forks"), "anthropic")


@pytest.mark.parametrize("which", [[], ["--json"], ["child1"], ["child1", "child3", "--json"]])
def test_forks_of_a_forked_run_answer_as_under_typer(
    which: list[str], fork_tree: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """A parent with two recorded sub-agents: the tree from its fork events, or from the children named
    (one left out is a warning): the same output, warnings and exit status either way."""
    parent, kids = fork_tree
    named = {k.stem: str(k) for k in kids}
    argv = ["forks", str(parent), *(named.get(w, w) for w in which)]
    assert plain_command(argv, {}) is not None
    direct_run = start_program(RUN, argv, typer_dispatch=False, cwd=tmp_path)
    typed = typer_in_process(argv, cwd=tmp_path)
    direct = direct_run()
    *direct_err, direct_mods = direct.stderr.splitlines()
    typed_err = typed.stderr.splitlines()
    assert (direct.returncode, direct_err, direct.stdout) == (typed.returncode, typed_err, typed.stdout)
    assert direct.returncode == 0 and direct.stdout.strip()
    assert json.loads(direct_mods) == (["typer"] if direct_err else [])  # only a warning imports it
